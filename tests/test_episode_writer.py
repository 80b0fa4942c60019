"""Batched episode writes: a line is written at once, counted as recorded only once an fsync covers
it, fsynced in batches (not one fsync per line), and cut back off when its fsync fails. Runs
against the reference endpoint on loopback (reference-policy figures are baselines of the
instrument, never a model's results).
"""

from __future__ import annotations

import asyncio
import errno
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_runner import prereg

from poisson_tasks.errors import RunFolderError
from poisson_tasks.prereg import load_preregistration
from poisson_tasks.reference import ReferenceServer
from poisson_tasks.runfolder import EPISODES, EpisodeLine, iter_episodes, read_header
from poisson_tasks.runner import folder as folder_module
from poisson_tasks.runner import run_preregistration
from poisson_tasks.runner.folder import RunFolder


@pytest.fixture
def fsyncs(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, object]]:
    """Count os.fsync calls on episodes.jsonl; make them fail with EIO while `fail()` holds."""
    real = os.fsync
    state: dict[str, object] = {"calls": 0, "fail": lambda: False}

    def fake(fd: int) -> None:
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            target = ""
        if target.endswith(EPISODES):
            state["calls"] = int(str(state["calls"])) + 1
            fail = state["fail"]
            if callable(fail) and fail():
                raise OSError(errno.EIO, os.strerror(errno.EIO))
        real(fd)

    monkeypatch.setattr(os, "fsync", fake)
    yield state


def _lines(tmp_path: Path, server: ReferenceServer) -> tuple[Path, list[EpisodeLine]]:
    """A plan and the lines of one real run of it."""
    path = prereg(tmp_path, base_url=server.base_url, tasks=3, attempts=2)
    run_preregistration(path, tmp_path / "source", show_progress=False)
    return path, list(iter_episodes(tmp_path / "source"))


def _folder(tmp_path: Path, plan_path: Path) -> RunFolder:
    return RunFolder.create(tmp_path / "run", load_preregistration(plan_path), {})


pytestmark = pytest.mark.skipif(
    not Path("/proc/self/fd").is_dir(), reason="needs /proc to map fds to paths"
)


def test_a_line_counts_only_once_synced_and_a_batch_takes_one_fsync(
    tmp_path: Path,
    server: ReferenceServer,
    fsyncs: dict[str, object],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plan_path, lines = _lines(tmp_path, server)
    monkeypatch.setattr(folder_module, "FSYNC_EVERY_S", 0.2)
    folder = _folder(tmp_path, plan_path)
    recorded: list[EpisodeLine] = []

    async def go() -> None:
        folder.open_writer(on_durable=recorded.append)
        before = fsyncs["calls"]
        for line in lines:
            folder.append(line)
        # written (a kill -9 cannot lose it), its spend counted, but not yet claimed as recorded
        assert list(iter_episodes(folder.path)) == lines
        assert folder.state.spend.tokens == sum(
            (ln.usage.uncached_input_tokens or 0)
            + (ln.usage.cached_input_tokens or 0)
            + (ln.usage.completion_tokens or 0)
            for ln in lines
        )
        assert recorded == [] and folder.session.episodes_written == 0
        assert folder.state.lines == 0 and not folder.state.scored
        await asyncio.sleep(0.6)
        assert recorded == lines and folder.session.episodes_written == len(lines)
        assert folder.state.lines == len(lines)
        assert fsyncs["calls"] == before + 1  # one fsync for the batch, not one per line
        folder.close("complete")

    asyncio.run(go())
    assert read_header(folder.path).sessions[-1].episodes_written == len(lines)


def test_a_full_batch_is_synced_before_the_second_is_up(
    tmp_path: Path,
    server: ReferenceServer,
    fsyncs: dict[str, object],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plan_path, lines = _lines(tmp_path, server)
    monkeypatch.setattr(folder_module, "FSYNC_EVERY_S", 60.0)
    monkeypatch.setattr(folder_module, "FSYNC_BATCH", 4)
    folder = _folder(tmp_path, plan_path)
    recorded: list[EpisodeLine] = []

    async def go() -> None:
        folder.open_writer(on_durable=recorded.append)
        for line in lines[:5]:
            folder.append(line)
        for _ in range(200):
            if recorded:
                break
            await asyncio.sleep(0.01)
        assert recorded == lines[:5]  # the fifth was written before the batch's fsync ran
        folder.close("complete")  # closing syncs and counts what is left

    asyncio.run(go())
    assert folder.session.episodes_written == 5


def test_a_failed_fsync_cuts_its_lines_off_and_claims_none(
    tmp_path: Path,
    server: ReferenceServer,
    fsyncs: dict[str, object],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plan_path, lines = _lines(tmp_path, server)
    monkeypatch.setattr(folder_module, "FSYNC_EVERY_S", 0.05)
    folder = _folder(tmp_path, plan_path)
    recorded: list[EpisodeLine] = []
    lost: list[EpisodeLine] = []

    async def go() -> None:
        folder.open_writer(on_durable=recorded.append, on_lost=lambda gone, exc: lost.extend(gone))
        folder.append(lines[0])
        await asyncio.sleep(0.3)
        assert recorded == lines[:1]
        kept = (folder.path / EPISODES).read_bytes()
        fsyncs["fail"] = lambda: True
        folder.append(lines[1])
        folder.append(lines[2])
        await asyncio.sleep(0.3)
        assert lost == lines[1:3] and recorded == lines[:1]
        assert (folder.path / EPISODES).read_bytes() == kept  # cut back, no partial line
        assert folder.session.episodes_written == 1 and folder.state.lines == 1
        with pytest.raises(OSError, match="Input/output error"):
            folder.append(lines[3])  # a writer whose fsync failed takes no more lines
        assert (folder.path / EPISODES).read_bytes() == kept
        folder.close("interrupted")

    asyncio.run(go())


def test_the_runner_stops_on_a_failed_fsync_and_resumes(
    tmp_path: Path,
    server: ReferenceServer,
    fsyncs: dict[str, object],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(folder_module, "FSYNC_EVERY_S", 0.0)  # every line asks for its fsync
    path = prereg(tmp_path, base_url=server.base_url, tasks=4, execution={"concurrency": 1})
    out = tmp_path / "run"

    def after_three() -> bool:
        return (out / EPISODES).read_bytes().count(b"\n") >= 4

    fsyncs["fail"] = after_three
    with pytest.raises(RunFolderError) as info:
        run_preregistration(path, out, show_progress=False)
    message = str(info.value)
    assert "\n" not in message and "Input/output error" in message
    assert "poisson-tasks run --resume" in message
    kept = list(iter_episodes(out))  # the lines synced before the failure: at most three, fewer
    # when a late fsync met the fourth line first (under load, even the first fsync can; nothing is
    # then durable and the file is cut back to empty)
    data = (out / EPISODES).read_bytes()
    assert len(kept) <= 3 and (data == b"" or data.endswith(b"\n"))
    session = read_header(out).sessions[-1]
    assert session.stop_reason == "interrupted" and session.episodes_written == len(kept)
    assert session.abandoned >= 1  # the line cut off: its spend is kept in the header
    assert (session.abandoned_usage.completion_tokens or 0) > 0
    fsyncs["fail"] = _never
    summary = run_preregistration(path, out, resume=True, show_progress=False)
    assert summary.complete
    slots = Counter((ln.arm_id, ln.seed, ln.attempt) for ln in iter_episodes(out))
    assert slots == Counter(load_preregistration(path).slots())


def _never() -> bool:
    return False
