"""The run folder under hostile conditions: two writers at once, a full disk, SIGTERM, stale locks.

Everything runs against the reference endpoint on loopback (reference-policy figures are baselines
of the instrument, never a model's results).
"""

from __future__ import annotations

import errno
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import PlannedRun
from test_runner import SLOW_CALLS, prereg

from poisson_tasks.calibration import card_from_run
from poisson_tasks.calibration.output import write_card
from poisson_tasks.errors import OutputError, RunFolderError
from poisson_tasks.prereg import load_preregistration
from poisson_tasks.reference import ReferenceServer
from poisson_tasks.runfolder import (
    EPISODES,
    HEADER,
    LOCK,
    FolderLock,
    iter_episodes,
    read_header,
    write_header,
)
from poisson_tasks.runner import run_preregistration
from poisson_tasks.verifier import INSTRUMENT_OUTCOMES

CLI = [sys.executable, "-m", "poisson_tasks.cli"]


def _slots(folder: Path) -> Counter[tuple[str, int, int]]:
    return Counter((ln.arm_id, ln.seed, ln.attempt) for ln in iter_episodes(folder))


def _wait_for_lines(folder: Path, n: int, proc: subprocess.Popen[bytes], limit: float = 90) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and proc.poll() is None:
        episodes = folder / EPISODES
        if episodes.is_file() and episodes.read_bytes().count(b"\n") >= n:
            return
        time.sleep(0.02)
    raise AssertionError(f"the run did not reach {n} lines while running (rc {proc.poll()})")


def _slow_plan(tmp_path: Path, server: ReferenceServer, tasks: int = 6) -> Path:
    return prereg(
        tmp_path,
        model=SLOW_CALLS,
        arms=["depth:d3", "distractor:r2@k16"],
        tasks=tasks,
        attempts=2,
        base_url=server.base_url,
        execution={"concurrency": 2},
    )


# --------------------------------------------------------------------------- one writer


def test_two_writers_at_once_exactly_one_proceeds(tmp_path: Path, server: ReferenceServer) -> None:
    path = _slow_plan(tmp_path, server)
    out = tmp_path / "run"
    first = subprocess.Popen(
        [*CLI, "run", str(path), "--out", str(out), "--quiet"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        _wait_for_lines(out, 1, first)
        os.kill(first.pid, signal.SIGSTOP)  # frozen mid-run, holding the lock
        second = subprocess.run(
            [*CLI, "run", str(path), "--resume", str(out), "--quiet"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert second.returncode == 2, second.stderr
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1, second.stderr
        assert f"is being written by another poisson-tasks (pid {first.pid} on " in lines[0]
        assert "started 20" in lines[0]
        before = read_header(out)
        assert len(before.sessions) == 1  # the refused writer wrote nothing
    finally:
        os.kill(first.pid, signal.SIGCONT)
        first.wait(timeout=120)
    assert first.returncode == 0, first.stderr
    assert _slots(out) == Counter(load_preregistration(path).slots())  # each slot written once


def test_two_new_runs_racing_for_one_folder(tmp_path: Path, server: ReferenceServer) -> None:
    path = _slow_plan(tmp_path, server, tasks=2)
    out = tmp_path / "run"
    procs = [
        subprocess.Popen(
            [*CLI, "run", str(path), "--out", str(out), "--quiet"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    results = [(p.wait(timeout=120), p.stderr.read() if p.stderr else "") for p in procs]
    codes = sorted(rc for rc, _ in results)
    assert codes == [0, 2], results
    refused = next(err for rc, err in results if rc == 2)
    assert len(refused.strip().splitlines()) == 1
    assert any(
        s in refused for s in ("being written by another", "already holds a run", "filled by")
    ), refused
    assert _slots(out) == Counter(load_preregistration(path).slots())
    assert len(read_header(out).sessions) == 1


def test_a_lock_left_by_a_dead_writer_is_taken_over(finished_run: PlannedRun) -> None:
    path, out = finished_run
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        text=True,
        capture_output=True,
        check=True,
    )
    stale = {"pid": int(dead.stdout), "host": "gone", "started_at": "2026-01-01T00:00:00+00:00"}
    (out / LOCK).write_text(json.dumps(stale))
    summary = run_preregistration(path, out, resume=True, show_progress=False)
    assert summary.complete
    assert json.loads((out / LOCK).read_text())["pid"] == os.getpid()


def test_a_held_lock_is_refused_in_process(finished_run: PlannedRun) -> None:
    path, out = finished_run
    held = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR); "
            "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)",
            str(out / LOCK),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert held.stdout is not None and held.stdout.readline().strip() == "held"
        with pytest.raises(RunFolderError, match="being written by another poisson-tasks"):
            run_preregistration(path, out, resume=True, show_progress=False)
        with pytest.raises(RunFolderError, match="being written by another"):
            FolderLock.acquire(out)
    finally:
        held.kill()
        held.wait()
    FolderLock.acquire(out).release()


# --------------------------------------------------------------------------- full disk


@pytest.fixture
def disk() -> Iterator[Callable[[Path, Callable[[], bool]], None]]:
    """Make os.write fail with ENOSPC on files under a folder while a condition holds."""
    real = os.write
    state: dict[str, object] = {}

    def fake(fd: int, data: object) -> int:
        root, full = state.get("root"), state.get("full")
        if root is not None and callable(full) and full():
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                target = ""
            if target.startswith(str(root)):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data)  # type: ignore[arg-type]

    def arm(root: Path, full: Callable[[], bool]) -> None:
        state["root"], state["full"] = root.resolve(), full

    os.write = fake  # type: ignore[assignment]
    try:
        yield arm
    finally:
        os.write = real


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to map fds to paths")
def test_a_full_disk_keeps_the_folder_whole_and_resumes(
    tmp_path: Path, server: ReferenceServer, disk: Callable[[Path, Callable[[], bool]], None]
) -> None:
    path = prereg(tmp_path, base_url=server.base_url, tasks=4, execution={"concurrency": 1})
    out = tmp_path / "run"

    def full() -> bool:
        episodes = out / EPISODES
        return episodes.is_file() and episodes.read_bytes().count(b"\n") >= 3

    disk(tmp_path, full)
    header_before = None
    with pytest.raises(RunFolderError) as info:
        run_preregistration(path, out, show_progress=False)
    message = str(info.value)
    assert "\n" not in message and "No space left on device" in message
    assert "poisson-tasks run --resume" in message
    header_before = (out / HEADER).read_bytes()
    header = read_header(out)  # the previous run.json, whole
    assert header.sessions[-1].stop_reason == "running"
    data = (out / EPISODES).read_bytes()
    assert data.endswith(b"\n") and data.count(b"\n") == 3  # no partial line
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]
    assert len(header_before) > 0

    # card --out on the full disk: one error, no 0-byte card, the previous card untouched
    cards = tmp_path / "cards"
    disk(tmp_path, lambda: False)
    artifact = card_from_run(out)
    write_card(artifact, cards)
    previous = {p.name: p.read_bytes() for p in cards.iterdir()}
    disk(tmp_path, lambda: True)
    with pytest.raises(OutputError, match="No space left on device"):
        write_card(artifact, cards)
    assert {p.name: p.read_bytes() for p in cards.iterdir()} == previous

    disk(tmp_path, lambda: False)  # space freed
    summary = run_preregistration(path, out, resume=True, show_progress=False)
    assert summary.complete
    assert _slots(out) == Counter(load_preregistration(path).slots())
    assert [s.stop_reason for s in read_header(out).sessions] == ["interrupted", "complete"]
    assert read_header(out).sessions[0].episodes_written == 3  # counted from the records


def test_a_full_disk_at_creation_leaves_nothing_behind(
    tmp_path: Path, planned_run: PlannedRun, disk: Callable[[Path, Callable[[], bool]], None]
) -> None:
    path, out = planned_run
    disk(tmp_path / "run", lambda: True)
    with pytest.raises(RunFolderError, match="No space left on device"):
        run_preregistration(path, out, show_progress=False)
    # nothing that --out refuses: at most the lock file, which a new writer takes over
    assert not out.exists() or [p.name for p in out.iterdir()] == [LOCK]
    disk(tmp_path / "run", lambda: False)
    assert run_preregistration(path, out, show_progress=False).complete


def test_a_read_only_folder_and_a_directory_for_episodes(
    tmp_path: Path, finished_run: PlannedRun
) -> None:
    path, out = finished_run
    (out / EPISODES).rename(tmp_path / "saved.jsonl")
    (out / EPISODES).mkdir()
    with pytest.raises(RunFolderError, match="is not a file"):
        run_preregistration(path, out, resume=True, show_progress=False)
    (out / EPISODES).rmdir()
    (tmp_path / "saved.jsonl").rename(out / EPISODES)
    if os.geteuid() == 0:
        return  # root writes anywhere
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        with pytest.raises(RunFolderError, match="Permission denied"):
            run_preregistration(path, ro / "run", show_progress=False)
    finally:
        ro.chmod(0o755)


# --------------------------------------------------------------------------- signals


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_mid_run_records_the_stop_and_resumes(
    tmp_path: Path, server: ReferenceServer, sig: signal.Signals
) -> None:
    path = _slow_plan(tmp_path, server, tasks=8)
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [*CLI, "run", str(path), "--out", str(out), "--quiet"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    _wait_for_lines(out, 3, proc)
    os.kill(proc.pid, sig)
    rc = proc.wait(timeout=60)
    err = proc.stderr.read() if proc.stderr else ""
    assert rc == 128 + sig, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert f"stopped by {sig.name}" in err and f"poisson-tasks run --resume {out}" in err
    session = read_header(out).sessions[-1]
    assert session.stop_reason == "interrupted" and session.detail == f"stopped by {sig.name}"
    assert session.ended_at is not None
    assert session.episodes_written == sum(_slots(out).values())
    summary = run_preregistration(path, out, resume=True, show_progress=False)
    assert summary.complete
    assert _slots(out) == Counter(load_preregistration(path).slots())


def test_a_stop_that_takes_the_server_down_records_no_instrument_failure(tmp_path: Path) -> None:
    # A scheduler stops a job by signalling every process in it (SLURM's scancel, a requeue, a
    # time limit; a terminal's Ctrl-C, its whole process group): the server the job started dies
    # with the runner. Episodes in flight then fail on the instrument's side during the grace;
    # they are the stop's, not the serving's: abandoned (their slots run again on resume), never
    # written as api_error lines that would count against the card's instrument threshold.
    served = subprocess.Popen(
        [*CLI, "serve-reference", "--port", "0"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert served.stdout is not None
        url = re.search(r"http://127\.0\.0\.1:\d+/v1", served.stdout.readline())
        assert url, "serve-reference did not print its address"
        path = prereg(
            tmp_path,
            model="flaky?p_500=0&p_429=0&p_slow=1&slow_s=2",  # every answer 2 s late
            arms=["depth:d3"],
            tasks=4,
            base_url=url.group(0),
        )
        out = tmp_path / "run"
        proc = subprocess.Popen(
            [*CLI, "run", str(path), "--out", str(out), "--quiet"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while not (out / HEADER).is_file() and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.5)  # four episodes in flight, each call answered 2 s late
        os.kill(proc.pid, signal.SIGTERM)
        time.sleep(0.3)  # the stop is taken; then the server goes, as the job's other process
        served.kill()
        rc = proc.wait(timeout=60)
        err = proc.stderr.read() if proc.stderr else ""
    finally:
        served.kill()
        served.wait(timeout=30)
    assert rc == 128 + signal.SIGTERM, err
    lines = list(iter_episodes(out))
    assert [line.outcome for line in lines if line.outcome in INSTRUMENT_OUTCOMES] == [], err
    session = read_header(out).sessions[-1]
    assert session.stop_reason == "interrupted" and session.abandoned == 4, err


# --------------------------------------------------------------------------- session provenance


def test_resuming_a_complete_run_claims_no_resume(finished_run: PlannedRun) -> None:
    """Nothing is left to run, so no session is opened (issue 34 item 3: an empty one made the
    card say its serving held across two sessions)."""
    path, out = finished_run
    again = run_preregistration(path, out, resume=True, show_progress=False)
    assert again.complete and again.written == 0 and again.already_complete
    artifact = card_from_run(out)
    assert [s.episodes_written for s in artifact.provenance.sessions] == [8]
    assert "resumed" not in {c.key for c in artifact.statements.does_not_claim}


def test_a_killed_sessions_count_comes_from_its_records(finished_run: PlannedRun) -> None:
    _, out = finished_run
    header = read_header(out)
    header.sessions[0].episodes_written = 0  # as a kill -9 leaves it
    header.sessions[0].stop_reason = "running"
    write_header(out, header)
    card = card_from_run(out)
    assert card.provenance.sessions[0].episodes_written == 8


# --------------------------------------------------------------------------- the command line


def test_resume_alone_reads_the_stored_preregistration(finished_run: PlannedRun) -> None:
    path, out = finished_run
    lines = (out / EPISODES).read_bytes().splitlines(keepends=True)
    (out / EPISODES).write_bytes(b"".join(lines[:3]))
    path.unlink()  # the file is gone: the folder's own copy is what runs
    done = subprocess.run(
        [*CLI, "run", "--resume", str(out), "--quiet"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert _slots(out) == Counter(load_preregistration_from(out).slots())


def load_preregistration_from(folder: Path):  # type: ignore[no-untyped-def]
    from poisson_tasks.runner.folder import stored_plan

    return stored_plan(folder)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.parametrize("delay", [0.2, 0.5, 1.0])
def test_a_stop_during_start_up_is_one_line(
    planned_run: PlannedRun, sig: signal.Signals, delay: float
) -> None:
    path, out = planned_run
    proc = subprocess.Popen(
        [sys.executable, "-m", "poisson_tasks", "run", str(path), "--out", str(out), "--quiet"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(delay)
    proc.send_signal(sig)
    rc = proc.wait(timeout=60)
    err = proc.stderr.read() if proc.stderr else ""
    assert "Traceback" not in err, err
    if rc == 0:  # it finished first
        return
    assert rc in (128 + sig, -sig), (rc, err)  # -sig: before Python installed any handler
    if rc > 0:
        assert len(err.strip().splitlines()) == 1, err
        assert f"stopped by {sig.name}" in err
    if "--resume" in err:
        assert (out / HEADER).is_file()  # a hint only for a folder that exists
        assert run_preregistration(path, out, resume=True, show_progress=False).complete
    elif out.exists() and (out / HEADER).is_file():
        assert run_preregistration(path, out, resume=True, show_progress=False).complete


_INTERRUPT_AT_STOPPING = """
import importlib.abc, runpy, sys

class Interrupt(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "poisson_tasks.stopping":
            raise KeyboardInterrupt
        return None

import poisson_tasks  # the package itself loads first, as with python -m
sys.meta_path.insert(0, Interrupt())
runpy.run_module("poisson_tasks", run_name="__main__", alter_sys=True)
"""


def test_a_ctrl_c_before_the_handlers_exist_is_one_line() -> None:
    """The window before `stopping.install()` (python -m poisson_tasks) ends in one line, exit 130."""
    done = subprocess.run(
        [sys.executable, "-c", _INTERRUPT_AT_STOPPING, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 130, done.stderr
    assert done.stderr == "error: stopped by SIGINT while starting; nothing was written\n"


@pytest.mark.parametrize("delay", [0.2, 0.6, 1.2])
def test_kill_during_card_out_leaves_no_partial_card(
    tmp_path: Path, finished_run: PlannedRun, delay: float
) -> None:
    _, out = finished_run
    cards = tmp_path / "cards"
    proc = subprocess.Popen(
        [*CLI, "card", str(out), "--out", str(cards)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(delay)
    proc.kill()
    proc.wait(timeout=30)
    for name in ("card.json", "card.md"):
        p = cards / name
        if p.exists():
            assert p.stat().st_size > 0
    if (cards / "card.json").exists():
        json.loads((cards / "card.json").read_text())
    done = subprocess.run(
        [*CLI, "card", str(out), "--out", str(cards)], capture_output=True, timeout=120
    )
    assert done.returncode == 0
    assert json.loads((cards / "card.json").read_text())
