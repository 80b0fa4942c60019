"""Opening a run folder for a session: create a new one, or resume one made by the same study.

Creating refuses a folder that already holds anything. Resuming refuses, before touching a byte, a
folder made by another pre-registration (anything but `budget`, `execution` and `description`
differs) or by another build of the generator or engine. Only then is a torn last line (a kill
mid-write) truncated and a new session appended. Lines are written by one writer thread that
appends, flushes and fsyncs each batch, so an episode is durable before it is counted.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from poisson_tasks.bundle import digest
from poisson_tasks.errors import RunFolderError
from poisson_tasks.hashes import engine_hash, environment_hash, generator_hash, vocabulary_hash
from poisson_tasks.prereg import Plan, measurement_of
from poisson_tasks.runfolder import (
    EPISODES,
    HEADER,
    EpisodeLine,
    OwnToolsRecord,
    RunHeader,
    Session,
    StopReason,
    iter_episodes,
    read_header,
    write_header,
)
from poisson_tasks.runner.budget import Spend
from poisson_tasks.runner.provenance import package_versions
from poisson_tasks.verifier import INSTRUMENT_OUTCOMES

Slot = tuple[str, int, int]


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass(slots=True)
class FolderState:
    """What the folder already holds: scored slots, instrument failures, and what was spent."""

    scored: set[Slot] = field(default_factory=set)
    seen: set[Slot] = field(default_factory=set)
    instrument: Counter[str] = field(default_factory=Counter)
    lines: int = 0
    spend: Spend = field(default_factory=Spend)

    def add(self, line: EpisodeLine) -> None:
        self.lines += 1
        self.seen.add((line.arm_id, line.seed, line.attempt))
        self.spend.add(line.usage)
        if line.outcome in INSTRUMENT_OUTCOMES:
            self.instrument[line.outcome] += 1
        else:
            self.scored.add((line.arm_id, line.seed, line.attempt))


def _diff(a: dict[str, Any], b: dict[str, Any], prefix: str = "") -> list[str]:
    """The dotted paths where two JSON documents differ (first few)."""
    out: list[str] = []
    for key in sorted(set(a) | set(b)):
        va, vb = a.get(key), b.get(key)
        if va == vb:
            continue
        path = f"{prefix}{key}"
        if isinstance(va, dict) and isinstance(vb, dict):
            out += _diff(va, vb, path + ".")
        else:
            out.append(path)
    return out


class RunFolder:
    """A run folder open for one session: its header, its state, and the episode writer."""

    def __init__(self, path: Path, header: RunHeader, state: FolderState) -> None:
        self.path = path
        self.header = header
        self.state = state
        self.session = header.sessions[-1]
        self._fh: BinaryIO | None = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ opening

    @classmethod
    def create(
        cls,
        path: Path,
        plan: Plan,
        serving: dict[str, Any],
        own_tools: OwnToolsRecord | None = None,
    ) -> RunFolder:
        """A new folder for `plan`; refuses a path that already holds anything."""
        if path.exists() and (not path.is_dir() or any(path.iterdir())):
            raise RunFolderError(
                f"{path} already exists and is not empty: pass --resume {path} to continue that "
                "run, or choose a new --out folder"
            )
        pr = plan.preregistration
        session = _session(0, plan, serving)
        header = RunHeader(
            preregistration=pr.model_dump(mode="json"),
            preregistration_hash=plan.preregistration_hash,
            seed_list_hash=plan.seed_list_hash,
            seeds=list(plan.seeds),
            arms=list(plan.arms),
            attempts=plan.attempts,
            engine_hash=engine_hash(),
            generator_hash=generator_hash(),
            vocabulary_hash=vocabulary_hash(),
            environment_hash=environment_hash(),
            package_version=package_versions()["poisson-tasks"],
            package_versions=package_versions(),
            serving=serving,
            concurrency=pr.execution.concurrency,
            thresholds=pr.thresholds,
            sessions=[session],
            own_tools=own_tools,
        )
        path.mkdir(parents=True, exist_ok=True)
        (path / EPISODES).touch()
        write_header(path, header)
        return cls(path, header, FolderState())

    @staticmethod
    def check_resumable(path: Path, plan: Plan) -> tuple[RunHeader, FolderState]:
        """Read a folder and check it was made by this study; writes nothing."""
        if not (path / HEADER).is_file():
            raise RunFolderError(
                f"{path} is not a run folder ({HEADER} is missing): nothing to resume; start a "
                "run with --out instead"
            )
        header = read_header(path)
        theirs = measurement_of(header.preregistration)
        ours = plan.preregistration.measurement()
        if digest(theirs) != digest(ours):
            where = ", ".join(_diff(theirs, ours)[:4]) or "the document"
            raise RunFolderError(
                f"{path} was made by another pre-registration (it differs in {where}): resume it "
                "with the pre-registration it was made with, or start a new --out folder"
            )
        for name, theirs_h, ours_h in (
            ("generator", header.generator_hash, generator_hash()),
            ("engine", header.engine_hash, engine_hash()),
        ):
            if theirs_h != ours_h:
                raise RunFolderError(
                    f"{path} was run with another build of the {name} ({theirs_h[:12]}, this "
                    f"install has {ours_h[:12]}): its tasks would change mid-run; resume it with "
                    "the poisson-tasks build that made it"
                )
        state = FolderState()
        for line in iter_episodes(path):
            state.add(line)
        for s in header.sessions:
            state.spend.add(s.abandoned_usage)
        return header, state

    @classmethod
    def resume(
        cls, path: Path, plan: Plan, serving: dict[str, Any], checked: tuple[RunHeader, FolderState]
    ) -> RunFolder:
        """Open a checked folder for a new session: truncate a torn tail, append the session."""
        header, state = checked
        truncate_torn_tail(path / EPISODES)
        for s in header.sessions:
            if s.stop_reason == "running":
                s.stop_reason = "interrupted"
                s.detail = s.detail or "the session ended without closing (killed or crashed)"
        header.sessions.append(_session(len(header.sessions), plan, serving))
        write_header(path, header)
        return cls(path, header, state)

    # ------------------------------------------------------------------ writing

    def open_writer(self) -> None:
        self._fh = (self.path / EPISODES).open("ab")

    def _write_batch(self, payloads: list[bytes]) -> None:
        with self._lock:
            fh = self._fh
            if fh is None:
                raise RunFolderError(f"{self.path}: the episode writer is closed")
            fh.write(b"".join(payloads))
            fh.flush()
            os.fsync(fh.fileno())

    async def write(self, lines: list[EpisodeLine]) -> None:
        """Append lines, flushed and fsynced, off the event loop; then count them."""
        payloads = [ln.model_dump_json().encode() + b"\n" for ln in lines]
        await asyncio.to_thread(self._write_batch, payloads)
        for ln in lines:
            self.state.add(ln)
        self.session.episodes_written += len(lines)

    def close(self, stop_reason: StopReason, detail: str | None = None) -> None:
        """End the session: close the writer and record how it stopped."""
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None
        self.session.ended_at = now()
        self.session.stop_reason = stop_reason
        self.session.detail = detail
        write_header(self.path, self.header)


def _session(index: int, plan: Plan, serving: dict[str, Any]) -> Session:
    pr = plan.preregistration
    return Session(
        index=index,
        started_at=now(),
        concurrency=pr.execution.concurrency,
        budget=pr.budget.model_dump(mode="json"),
        serving=serving,
    )


def truncate_torn_tail(path: Path) -> int:
    """Cut a last line that a kill left without its newline; returns the bytes removed."""
    if not path.exists():
        return 0
    with path.open("r+b") as fh:
        size = fh.seek(0, os.SEEK_END)
        if size == 0:
            return 0
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            return 0
        chunk = 1 << 16
        pos = size
        keep = 0
        while pos > 0:
            start = max(0, pos - chunk)
            fh.seek(start)
            block = fh.read(pos - start)
            i = block.rfind(b"\n")
            if i >= 0:
                keep = start + i + 1
                break
            pos = start
        fh.truncate(keep)
        fh.flush()
        os.fsync(fh.fileno())
        return size - keep


def default_run_folder(plan: Plan, root: Path = Path("runs")) -> Path:
    """runs/<pre-registration name>-<UTC time>: where a new run goes when no folder is named."""
    return root / f"{plan.preregistration.name}-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}"
