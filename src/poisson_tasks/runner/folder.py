"""Opening a run folder for a session: create a new one, or resume one made by the same study.

Creating refuses a folder that already holds anything. Resuming refuses, before touching a byte, a
folder made by another pre-registration (anything but `budget`, `execution` and `description`
differs) or by another build of the generator or engine. Only then is a torn last line (a kill
mid-write) truncated and a new session appended.

Writing. Each finished episode's line is appended at once, on the event loop (`append`): one
write(2) into the kernel's page cache, which a `kill -9` of the runner cannot lose. An fsync, in a
thread, then covers every line appended so far, at most FSYNC_EVERY_S after the oldest unsynced
line or as soon as FSYNC_BATCH lines wait, whichever comes first, and once more when the session
closes. A line is counted as recorded (the folder's state, the session's `episodes_written`, the
runner's tally and progress) only when an fsync has covered it, so nothing is reported that a
crash could still take. Its spend is counted at once (the budgets see it before the next slot is
taken). A line the disk refuses is cut back off, and a failed fsync cuts back every line it
covered and reports them lost (`on_lost`), so a full disk never leaves a partial line. `write`
(the verifiers-null harness's batches) appends, fsyncs and counts a batch in one step.

One writer at a time (runfolder.FolderLock): a session holds an exclusive `fcntl.flock` on `run.lock` in the folder for
its whole life, and the file names the holder (pid, host, start time). A second writer is refused
in one line naming them. The kernel drops the lock when its process dies, so a lock file left by a
killed writer is simply taken over; the file itself stays (removing it would let two writers hold
locks on two different files).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from poisson_tasks.bundle import digest
from poisson_tasks.errors import RunFolderError
from poisson_tasks.files import fsync_dir, os_problem, write_all
from poisson_tasks.hashes import engine_hash, environment_hash, generator_hash, vocabulary_hash
from poisson_tasks.prereg import Plan, Slot, measurement_of
from poisson_tasks.runfolder import (
    EPISODES,
    HEADER,
    REPLAY,
    EpisodeLine,
    FolderLock,
    OwnToolsRecord,
    PacingRecord,
    PlanSlots,
    ReplayRecord,
    RunHeader,
    ServingRecord,
    Session,
    ShardRecord,
    StopReason,
    is_empty,
    is_run_folder,
    iter_episodes,
    not_a_run_folder,
    now,
    open_run,
    remove_partial,
    truncate_torn_tail,
    write_header,
)
from poisson_tasks.runner.budget import Spend
from poisson_tasks.runner.provenance import package_versions
from poisson_tasks.runner.replay import check_replay_record
from poisson_tasks.verifier import INSTRUMENT_OUTCOMES

FSYNC_EVERY_S = 1.0  # the longest an appended episode line waits for its fsync
FSYNC_BATCH = 64  # ... or this many unsynced lines, whichever comes first
NOTHING_TO_RESUME = "nothing to resume; start a run with --out instead"


@dataclass(slots=True)
class FolderState:
    """What the folder already holds: scored slots, instrument failures, and what was spent."""

    scored: set[Slot] = field(default_factory=set)
    seen: set[Slot] = field(default_factory=set)
    instrument: Counter[str] = field(default_factory=Counter)
    lines: int = 0
    spend: Spend = field(default_factory=Spend)
    per_session: Counter[int] = field(default_factory=Counter)

    def add(self, line: EpisodeLine) -> None:
        """A line on disk: its slot, outcome and spend."""
        self.count(line)
        self.spend.add(line.usage)

    def count(self, line: EpisodeLine) -> None:
        """A line's slot and outcome, its spend left out (counted when it was appended)."""
        self.lines += 1
        self.per_session[line.session] += 1
        slot = Slot(line.arm_id, line.seed, line.attempt)
        self.seen.add(slot)
        if line.outcome in INSTRUMENT_OUTCOMES:
            self.instrument[line.outcome] += 1
        else:
            self.scored.add(slot)


def differing_paths(first: dict[str, Any], second: dict[str, Any], prefix: str = "") -> list[str]:
    """The dotted paths where two JSON documents differ (the first few name a refusal)."""
    out: list[str] = []
    for key in sorted(set(first) | set(second)):
        va, vb = first.get(key), second.get(key)
        if va == vb:
            continue
        path = f"{prefix}{key}"
        if isinstance(va, dict) and isinstance(vb, dict):
            out += differing_paths(va, vb, path + ".")
        else:
            out.append(path)
    return out


def _problem(path: Path, what: str, exc: OSError) -> RunFolderError:
    return RunFolderError(f"{path}: cannot {what}: {os_problem(exc)}")


class RunFolder:
    """A run folder open for one session: its header, its state, and the episode writer."""

    def __init__(
        self, path: Path, header: RunHeader, state: FolderState, lock: FolderLock | None = None
    ) -> None:
        self.path = path
        self.header = header
        self.state = state
        self.session = header.sessions[-1]
        self.lock = lock
        self._fd: int | None = None
        self._lock = threading.Lock()  # an fsync in its thread against close
        # appended lines no fsync has covered yet, each with when it was appended
        self._pending: list[tuple[EpisodeLine, float]] = []
        self._end = 0  # the file's size after the last line appended
        self._durable = 0  # every byte before this offset is fsynced
        self._broken: OSError | None = None  # an fsync failed: no more lines are taken
        self._on_durable: Callable[[EpisodeLine], None] | None = None
        self._on_lost: Callable[[list[EpisodeLine], OSError], None] | None = None
        self._flusher: asyncio.Task[None] | None = None
        self._has_pending = asyncio.Event()
        self._batch_full = asyncio.Event()

    # ------------------------------------------------------------------ opening

    @classmethod
    def create(
        cls,
        path: Path,
        plan: Plan,
        serving: ServingRecord,
        own_tools: OwnToolsRecord | None = None,
        lock: FolderLock | None = None,
        shard: ShardRecord | None = None,
        replay: ReplayRecord | None = None,
    ) -> RunFolder:
        """A new folder for `plan` (or for one `shard` of it, or a `replay` of a sample of it);
        refuses a path that already holds anything.

        Takes the folder's lock (unless given one) and keeps it; on a failure (a full disk, a
        read-only folder) it removes what it made and raises RunFolderError in one line.
        """
        check_creatable(path)
        made = not path.exists()
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _problem(path, "make the run folder", exc) from None
        own = lock is None
        try:
            lock = lock or FolderLock.acquire(path)
        except RunFolderError:
            if made:  # only when empty; a lock file stays (another writer may hold it)
                with contextlib.suppress(OSError):
                    path.rmdir()
            raise
        try:
            if not is_empty(path):  # another writer made it between the check and the lock
                raise RunFolderError(
                    f"{path} was filled by another writer while this one started: pass --resume "
                    f"{path} to continue that run, or choose a new --out folder"
                )
            header = _header(plan, serving, own_tools, shard, replay)
            try:
                write_header(path, header)
                fd = os.open(path / EPISODES, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                os.close(fd)
                fsync_dir(path)
            except OSError as exc:
                remove_partial(path, made=False)
                raise _problem(path, "create the run folder", exc) from None
        except BaseException:
            if own:
                lock.release()
                if made:
                    remove_partial(path, made)
            raise
        return cls(path, header, FolderState(), lock)

    @staticmethod
    def check_resumable(
        path: Path,
        plan: Plan,
        shard: ShardRecord | None = None,
        replay: ReplayRecord | None = None,
    ) -> tuple[RunHeader, FolderState]:
        """Read a folder and check it was made by this study (and holds this `shard` of it, or
        this `replay` sample); writes nothing."""
        if not is_run_folder(path):
            raise not_a_run_folder(path, NOTHING_TO_RESUME)
        header = open_run(path).header
        theirs = measurement_of(header.preregistration)
        ours = plan.preregistration.measurement()
        if digest(theirs) != digest(ours):
            where = ", ".join(differing_paths(theirs, ours)[:4]) or "the document"
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
        _check_shard(path, header, shard)
        _check_replay(path, header, replay)
        state = FolderState()
        slots = PlanSlots(header)  # card's own check: a line outside the plan, a slot twice
        for number, line in enumerate(iter_episodes(path), start=1):
            slots.check_slot(
                f"{path / EPISODES}",
                number,
                line.arm_id,
                line.seed,
                line.attempt,
                line.min_calls,
                line.outcome,
            )
            state.add(line)
        for session in header.sessions:
            state.spend.add(session.abandoned_usage)
        return header, state

    @classmethod
    def resume(
        cls,
        path: Path,
        plan: Plan,
        serving: ServingRecord,
        checked: tuple[RunHeader, FolderState],
        lock: FolderLock | None = None,
        shard: ShardRecord | None = None,
        replay: ReplayRecord | None = None,
    ) -> RunFolder:
        """Open a checked folder for a new session: truncate a torn tail, append the session.

        Without a lock it takes one and reads the folder again under it, so a writer that finished
        in between is never counted from stale state.
        """
        own = lock is None
        if lock is None:
            lock = FolderLock.acquire(path)
        try:
            if own:
                checked = cls.check_resumable(path, plan, shard, replay)
            header, state = checked
            try:
                truncate_torn_tail(path / EPISODES)
            except OSError as exc:
                raise _problem(path, f"repair the torn last line of {EPISODES}", exc) from None
            for session in header.sessions:
                if session.stop_reason == "running":
                    session.stop_reason = "interrupted"
                    session.detail = (
                        session.detail or "the session ended without closing (killed or crashed)"
                    )
                # a killed session never wrote its count: the records say what it wrote
                session.episodes_written = state.per_session.get(session.index, 0)
            # a session served as the header says (compared as written) records no copy of it
            own_serving = None if serving.model_dump() == header.serving.model_dump() else serving
            header.sessions.append(_session(len(header.sessions), plan, own_serving, shard))
            try:
                write_header(path, header)
            except OSError as exc:
                raise _problem(path, f"write {HEADER}", exc) from None
        except BaseException:
            if own:
                lock.release()
            raise
        return cls(path, header, state, lock)

    # ------------------------------------------------------------------ writing

    def open_writer(
        self,
        on_durable: Callable[[EpisodeLine], None] | None = None,
        on_lost: Callable[[list[EpisodeLine], OSError], None] | None = None,
    ) -> None:
        """Open episodes.jsonl for appending and start the fsync task (inside a running loop).

        `on_durable(line)` is called for each appended line once an fsync covers it; `on_lost(lines,
        exc)` with the lines a failed fsync cut back off (their spend stays counted)."""
        try:
            self._fd = os.open(self.path / EPISODES, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
            self._end = self._durable = os.lseek(self._fd, 0, os.SEEK_END)
        except OSError as exc:
            raise _problem(self.path, f"open {EPISODES}", exc) from None
        self._on_durable, self._on_lost = on_durable, on_lost
        self._flusher = asyncio.get_running_loop().create_task(self._flush_loop())

    def append(self, line: EpisodeLine) -> None:
        """Write one episode line now and count its spend; it is counted as recorded once an fsync
        covers it (see the module doc). OSError when refused: the line is cut back off."""
        fd = self._fd
        if fd is None:
            raise RunFolderError(f"{self.path}: the episode writer is closed")
        if self._broken is not None:
            raise OSError(self._broken.errno, self._broken.strerror)
        payload = line.model_dump_json().encode() + b"\n"
        start = self._end
        try:
            write_all(fd, payload)
        except OSError:
            with contextlib.suppress(OSError):  # never leave part of a line behind
                os.ftruncate(fd, start)
            raise
        self._end = start + len(payload)
        self.state.spend.add(line.usage)
        self._pending.append((line, time.monotonic()))
        self._has_pending.set()
        if len(self._pending) >= FSYNC_BATCH:
            self._batch_full.set()

    async def _flush_loop(self) -> None:
        while True:
            await self._has_pending.wait()
            wait = self._pending[0][1] + FSYNC_EVERY_S - time.monotonic() if self._pending else 0
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, wait)):
                    await self._batch_full.wait()
            count, end = len(self._pending), self._end
            try:
                await asyncio.to_thread(self._fsync)
            except OSError as exc:
                self._lose(exc)
            else:
                self._settle(count, end)

    def _fsync(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.fsync(self._fd)

    def _settle(self, count: int, end: int) -> None:
        """The first `count` pending lines are on disk: count them as recorded."""
        durable, self._pending = self._pending[:count], self._pending[count:]
        self._durable = end
        if not self._pending:
            self._has_pending.clear()
        if len(self._pending) < FSYNC_BATCH:
            self._batch_full.clear()
        for line, _ in durable:
            self.state.count(line)
            self.session.episodes_written += 1
            if self._on_durable is not None:
                self._on_durable(line)

    def _lose(self, exc: OSError) -> None:
        """An fsync failed: cut every unsynced line back off and report them lost."""
        lost = [line for line, _ in self._pending]
        self._pending = []
        self._has_pending.clear()
        self._batch_full.clear()
        self._broken = exc
        with self._lock:
            if self._fd is not None:
                with contextlib.suppress(OSError):
                    os.ftruncate(self._fd, self._durable)
        self._end = self._durable
        if lost and self._on_lost is not None:
            self._on_lost(lost, exc)

    def finish_writes(self) -> None:
        """Stop the fsync task and fsync what is still pending, counting it (or losing it)."""
        if self._flusher is not None:
            self._flusher.cancel()
            self._flusher = None
        if not self._pending:
            return
        count, end = len(self._pending), self._end
        try:
            self._fsync()  # waits for an fsync still running in the task's thread
        except OSError as exc:
            self._lose(exc)
        else:
            self._settle(count, end)

    def _write_batch(self, payloads: list[bytes]) -> None:
        with self._lock:
            fd = self._fd
            if fd is None:
                raise RunFolderError(f"{self.path}: the episode writer is closed")
            start = os.lseek(fd, 0, os.SEEK_END)
            try:
                write_all(fd, b"".join(payloads))
                os.fsync(fd)
            except OSError:
                with contextlib.suppress(OSError):  # never leave part of a line behind
                    os.ftruncate(fd, start)
                raise
            self._end = self._durable = os.lseek(fd, 0, os.SEEK_END)

    async def write(self, lines: list[EpisodeLine]) -> None:
        """Append lines, fsynced, off the event loop; then count them. OSError when refused."""
        payloads = [ln.model_dump_json().encode() + b"\n" for ln in lines]
        await asyncio.to_thread(self._write_batch, payloads)
        for ln in lines:
            self.state.add(ln)
        self.session.episodes_written += len(lines)

    def close(self, stop_reason: StopReason, detail: str | None = None) -> None:
        """End the session: close the writer, record how it stopped, drop the lock.

        Raises RunFolderError when run.json cannot be written (the previous one stays whole)."""
        self.finish_writes()
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
        self.session.ended_at = now()
        self.session.stop_reason = stop_reason
        self.session.detail = detail
        try:
            write_header(self.path, self.header)
        except OSError as exc:
            raise RunFolderError(
                f"{self.path}: cannot record the session's end in {HEADER} ({os_problem(exc)}); "
                f"every episode written is kept: then continue with {resume_hint(self.path)}"
            ) from None
        finally:
            if self.lock is not None:
                self.lock.release()


def stored_plan(path: Path) -> Plan:
    """The plan a run folder was made with (the pre-registration in its run.json): what
    `run --resume DIR` runs when no file is given."""
    return open_run(path, NOTHING_TO_RESUME).plan


def resume_hint(path: Path) -> str:
    """The command that continues a run folder (a replay folder: its replay), quoted so it works
    when pasted."""
    replay: ReplayRecord | None = None
    if path.name == REPLAY and is_run_folder(path):
        with contextlib.suppress(RunFolderError):
            replay = open_run(path).header.replay
    if replay is not None:
        return (
            f"poisson-tasks replay {shlex.quote(str(path.parent))} --sample {replay.sample} "
            f"--seed {replay.seed}"
        )
    return f"poisson-tasks run --resume {shlex.quote(str(path))}"


def check_creatable(path: Path) -> None:
    """Refuse, writing nothing, a --out that is a file or already holds a run (or anything); the
    advice fits what it holds (a merged folder is never continued)."""
    if path.exists() and (not path.is_dir() or not is_empty(path)):
        if is_run_folder(path):
            merged = None
            with contextlib.suppress(RunFolderError):
                merged = open_run(path).header.merged
            if merged is not None:
                raise RunFolderError(
                    f"{path} already holds the merge of {merged.count} shard folders, which is "
                    "not continued: choose a new --out folder (to redo the merge, move it away "
                    "first)"
                )
            raise RunFolderError(
                f"{path} already holds a run: continue it with {resume_hint(path)}, or choose a "
                "new --out folder"
            )
        raise RunFolderError(
            f"{path} already exists and is not an empty folder: choose a new --out folder"
        )


def _check_shard(path: Path, header: RunHeader, shard: ShardRecord | None) -> None:
    """A merged folder is not resumed, and a shard folder is resumed only as its own shard."""
    if header.merged is not None:
        raise RunFolderError(
            f"{path} is the merge of {header.merged.count} shard folders, not a run to continue: "
            "resume the shard that needs it, then merge again into a new --out folder"
        )
    theirs = None if header.shard is None else f"{header.shard.index}/{header.shard.count}"
    ours = None if shard is None else f"{shard.index}/{shard.count}"
    if theirs == ours:
        return
    if theirs is None:
        raise RunFolderError(
            f"{path} holds a whole run, not shard {ours}: resume it without --shard"
        )
    raise RunFolderError(
        f"{path} holds shard {theirs} of its study"
        + ("" if ours is None else f", not {ours}")
        + f": resume it with --shard {theirs} (or with no --shard, which reads it from run.json)"
    )


def _check_replay(path: Path, header: RunHeader, replay: ReplayRecord | None) -> None:
    """A replay folder is continued only by `replay` with its own sample; a run folder never as
    a replay."""
    if header.replay is None and replay is None:
        return
    if header.replay is None:
        raise RunFolderError(
            f"{path} holds a run, not a replay: move it away, or replay into its parent's "
            "replay/ folder"
        )
    if replay is None:
        raise RunFolderError(
            f"{path} is the replay of {path.parent}: continue it with poisson-tasks replay "
            f"{shlex.quote(str(path.parent))} --sample {header.replay.sample} "
            f"--seed {header.replay.seed}"
        )
    check_replay_record(path, header.replay, replay)


def _header(
    plan: Plan,
    serving: ServingRecord,
    own_tools: OwnToolsRecord | None = None,
    shard: ShardRecord | None = None,
    replay: ReplayRecord | None = None,
) -> RunHeader:
    pr = plan.preregistration
    return RunHeader(
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
        sessions=[_session(0, plan, None, shard)],  # the header holds session 0's serving
        own_tools=own_tools,
        shard=shard,
        replay=replay,
    )


def _session(
    index: int, plan: Plan, serving: ServingRecord | None, shard: ShardRecord | None = None
) -> Session:
    """A new session; a shard's session records the shard's share of the budget, and its own
    serving only when it differs from the header's (None: served as the header says)."""
    pr = plan.preregistration
    return Session(
        index=index,
        started_at=now(),
        concurrency=pr.execution.concurrency,
        budget=pr.budget.model_dump(mode="json") if shard is None else dict(shard.budget),
        serving=serving,
        pacing=PacingRecord(pace=pr.execution.pace),  # what it did is recorded at its close
    )


def default_run_folder(plan: Plan, root: Path = Path("runs")) -> Path:
    """runs/<pre-registration name>-<UTC time>: where a new run goes when no folder is named. A
    run started in the same second as one already there gets `-2` (then `-3` ...), so two runs
    in a row never meet in one folder."""
    base = f"{plan.preregistration.name}-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}"
    path, count = root / base, 1
    while path.exists():
        count += 1
        path = root / f"{base}-{count}"
    return path
