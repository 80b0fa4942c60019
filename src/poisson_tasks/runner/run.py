"""run_preregistration: a validated plan run against its endpoint into a run folder.

Order of work: validate, refuse what runner/preflight.py refuses (an arm that does not generate, a
violated pin, a missing extra), check a resumed folder belongs to this study (writes nothing),
read the API key from its variable, start the reference endpoint in-process when the provider is
`reference` without a base_url, preflight the endpoint (runner/provenance.py: reachable, key
accepted, model served), refuse a resumed session served otherwise than the first (pin N10, unless
accept_serving_change), and only then create or open the folder and run the session
(runner/session.py), arm by arm in plan order, so a stopped run leaves whole cells behind it.

One writer per folder: a resume takes the folder's lock before its preflight, a new folder when it
is made (runner/folder.py). SIGINT and SIGTERM stop a session the same way (runner/signals.py):
the header is written with the stop, and Interrupted is raised (exit 128 + the signal's number);
a signal before the folder exists stops with nothing written. This module also holds the entry
points: run_plan (a run, then its declared replay), replay_plan (a sample again, into replay/),
and their synchronous forms.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import Path

from poisson_tasks.errors import Interrupted
from poisson_tasks.prereg import Plan, Slot, load_preregistration, validate_preregistration
from poisson_tasks.reference import ReferenceServer
from poisson_tasks.runfolder import (
    HEADER,
    FolderLock,
    ReplayRecord,
    RunHeader,
    StopReason,
    iter_episodes,
)
from poisson_tasks.runner.budget import Limits
from poisson_tasks.runner.endpoint import Counters, Endpoint
from poisson_tasks.runner.folder import (
    FolderState,
    RunFolder,
    check_creatable,
    resume_hint,
    stored_plan,
)
from poisson_tasks.runner.preflight import (
    check_runnable,
    check_serving_unchanged,
    own_tools_record,
    read_api_key,
    resolve_base_url,
)
from poisson_tasks.runner.progress import Progress
from poisson_tasks.runner.provenance import serving_details
from poisson_tasks.runner.replay import (
    draw_sample,
    replay_folder,
    replay_record,
    replayable_header,
)
from poisson_tasks.runner.request import RunRequest
from poisson_tasks.runner.session import Session
from poisson_tasks.runner.shard import Shard, budget_share, shard_record, shard_slots
from poisson_tasks.runner.signals import Signals
from poisson_tasks.runner.summary import RunSummary, stopped_line
from poisson_tasks.verifier import INSTRUMENT_OUTCOMES


async def run_plan(
    plan: Plan,
    out_dir: Path | str,
    resume: bool = False,
    *,
    show_progress: bool | None = None,
    shard: Shard | None = None,
    accept_serving_change: bool = False,
) -> RunSummary:
    """The async form of run_preregistration (for callers already inside an event loop); a whole
    run that completes runs its declared replay (design.replay) after it."""
    request = RunRequest(plan, Path(out_dir), resume, show_progress, shard, accept_serving_change)
    summary = await _signalled(request)
    declared = plan.preregistration.design.replay
    if declared is None or shard is not None:
        return summary
    if not summary.complete:
        return summary.model_copy(update={"replay_waits": True})
    replayed = await replay_plan(
        out_dir, declared.sample, declared.seed, show_progress=show_progress
    )
    return summary.model_copy(update={"replay": replayed})


async def replay_plan(
    run_dir: Path | str,
    sample: int,
    seed: int = 0,
    *,
    show_progress: bool | None = None,
    accept_serving_change: bool = False,
    base_url: str | None = None,
) -> RunSummary:
    """Run `sample` of a run folder's scored slots again (drawn by runner/replay.py's rule with
    `seed`) into RUN_DIR/replay/ with the run's own plan: its endpoint, decoding and per-attempt
    seeds (`base_url` gives the same server's address when it moved, as serve-local's port does;
    pin N10 still compares the serving). A replay folder already there is continued (its sample
    must be the one drawn now). The run folder's lock is held throughout, so no session writes to
    the run meanwhile."""
    run = Path(run_dir)
    _draw(run, sample, seed, base_url)  # a bad sample is refused before the lock file is touched
    lock = FolderLock.acquire(run)
    try:
        plan, record = _draw(run, sample, seed, base_url)  # again, under the lock
        target = replay_folder(run)
        resume = (target / HEADER).is_file()
        request = RunRequest(
            plan, target, resume, show_progress, None, accept_serving_change, record
        )
        summary = await _signalled(request)
        return summary.model_copy(update={"replay_of": str(run)})
    finally:
        lock.release()


def _draw(
    run: Path, sample: int, seed: int, base_url: str | None = None
) -> tuple[Plan, ReplayRecord]:
    """The run's plan (at `base_url` when given) and the replay's sample drawn from its scored
    slots (runner/replay.py)."""
    replayable_header(run)
    plan = stored_plan(run)
    if base_url is not None:
        document = plan.preregistration.model_dump(mode="json")
        document["model"]["base_url"] = base_url
        plan = validate_preregistration(document, source=plan.source)
    scored = {
        Slot(line.arm_id, line.seed, line.attempt)
        for line in iter_episodes(run)
        if line.outcome not in INSTRUMENT_OUTCOMES
    }
    return plan, replay_record(draw_sample(scored, plan, sample, seed), seed, len(scored))


async def _signalled(request: RunRequest) -> RunSummary:
    """One session with SIGINT and SIGTERM handled (see Signals)."""
    signals = Signals()
    signals.install()
    opened: list[RunFolder] = []
    try:
        return await _run_plan(request, signals, opened)
    except asyncio.CancelledError:
        if signals.signum is None:
            raise
        if signals.main is not None:
            signals.main.uncancel()
        path = request.path
        where = (
            f"; continue with {resume_hint(path)}"
            if opened
            else "; nothing was written"
            if not request.resume
            else f"; the folder is as it was: continue with {resume_hint(path)}"
        )
        message = f"stopped by {signals.name} before the run began{where}"
        raise Interrupted(message, signals.signum) from None
    finally:
        signals.remove()


@dataclasses.dataclass
class _Held:
    """What a session holds until it ends: the folder's lock (until the folder takes it), the
    endpoint's client and an in-process reference server; released in that order."""

    lock: FolderLock | None = None
    endpoint: Endpoint | None = None
    server: ReferenceServer | None = None

    async def release(self) -> None:
        if self.lock is not None:
            self.lock.release()
        if self.endpoint is not None:
            await self.endpoint.close()
        if self.server is not None:
            self.server.close()


async def _run_plan(request: RunRequest, signals: Signals, opened: list[RunFolder]) -> RunSummary:
    plan, path, replay = request.plan, request.path, request.replay
    shard = request.shard
    # A shard runs its own slots within its share of the study's budget (runner/shard.py); a
    # replay runs its sample's slots (runner/replay.py).
    record = shard_record(plan, shard) if shard is not None else None
    slots = shard_slots(plan, shard) if shard is not None else plan.slots()
    if replay is not None:
        slots = [Slot(arm, seed, attempt) for arm, seed, attempt in replay.slots]
    check_runnable(plan)
    held = _Held()
    checked = None
    if request.resume:
        # refuses another study's folder (or another shard of it), writing nothing
        RunFolder.check_resumable(path, plan, record, replay)
        held.lock = FolderLock.acquire(path)
    else:
        check_creatable(path)
    try:
        if request.resume:
            checked = RunFolder.check_resumable(path, plan, record, replay)  # again, locked
            if all(slot in checked[1].scored for slot in slots):
                return _complete_already(plan, slots, path, checked)
        key = read_api_key(plan, path)
        base_url, held.server = resolve_base_url(plan, key)
        serving = await serving_details(
            plan.preregistration.model, base_url, key, in_process=held.server is not None
        )
        if checked is not None and not request.accept_serving_change:
            check_serving_unchanged(path, checked[0], serving, plan)
        folder = (
            RunFolder.resume(path, plan, serving, checked, held.lock, shard=record, replay=replay)
            if checked is not None
            else RunFolder.create(
                path, plan, serving, own_tools_record(plan), shard=record, replay=replay
            )
        )
        held.lock = None  # the folder holds it now and drops it on close
        opened.append(folder)
        return await _session(request, folder, slots, base_url, key, signals, held)
    finally:
        await held.release()


async def _session(
    request: RunRequest,
    folder: RunFolder,
    slots: list[Slot],
    base_url: str,
    key: str | None,
    signals: Signals,
    held: _Held,
) -> RunSummary:
    """The session proper on an open folder: its pending slots run, the folder closed with why
    the session stopped, and the summary."""
    plan, pr = request.plan, request.plan.preregistration
    shard = request.shard
    budget = budget_share(pr.budget, shard.count) if shard is not None else pr.budget
    pending = [s for s in slots if s not in folder.state.scored]
    counters = Counters()
    progress = Progress(
        len(pending),
        token_cap=budget.tokens,
        dollar_cap=budget.dollars,
        enabled=request.show_progress,
        label=str(request.path),
        tokens=folder.state.spend.tokens,
        dollars=folder.state.spend.dollars(pr.model.rates),
    )
    endpoint = held.endpoint = Endpoint(
        base_url=base_url,
        api_key=key,
        model=pr.model.model,
        decoding=pr.decoding,
        execution=pr.execution,
        counters=counters,
        on_retry=progress.retry,
        session=folder.session.index,
    )
    limits = Limits(budget, pr.model.rates, folder.state.spend)
    session = Session(plan, folder, endpoint, limits, progress, pending)
    started = time.perf_counter()
    stop: StopReason = "interrupted"
    detail: str | None = "the session was interrupted"
    try:
        folder.open_writer(on_durable=session.tally, on_lost=session.on_lost)
        signals.session = session
        with progress:
            if pr.design.harness == "verifiers-null":
                await session.run_null(base_url, key)
            else:
                await session.run()
            folder.finish_writes()  # the last lines counted before the last frame is drawn
        stop, detail = session.stop_reason or "interrupted", session.detail
        if signals.signum is not None:
            detail = f"stopped by {signals.name}"
    finally:
        signals.session = None
        folder.finish_writes()  # the last lines synced and tallied, or cut off (session.lost)
        if session.lost is not None:
            stop, detail = "interrupted", session.lost[0]
        folder.session.abandoned = session.abandoned
        folder.session.abandoned_usage = session.abandoned_usage
        folder.session.pacing = endpoint.pacing_record()
        folder.close(stop, detail)
    if session.fatal is not None:
        raise session.fatal
    if session.crash is not None:
        raise session.crash
    summary = _summary(plan, slots, folder, session, counters, time.perf_counter() - started)
    if signals.signum is not None:
        raise Interrupted(stopped_line(signals.name, summary), signals.signum)
    return summary


def _complete_already(
    plan: Plan, slots: list[Slot], path: Path, checked: tuple[RunHeader, FolderState]
) -> RunSummary:
    """The summary of a resume that found every slot scored: it opened no session (an empty one
    would only add a line to the card's provenance), so nothing was written."""
    header, state = checked
    pr = plan.preregistration
    last = header.sessions[-1]
    return RunSummary(
        folder=str(path),
        session=last.index,
        shard=None if header.shard is None else f"{header.shard.index}/{header.shard.count}",
        stop_reason="complete",
        planned=len(slots),
        scored=len(slots),
        written=0,
        outcomes={},
        passed=0,
        malformed_clause1=0,
        no_tool_call=0,
        instrument=0,
        abandoned=0,
        retries=0,
        tokens=state.spend.tokens,
        dollars=state.spend.dollars(pr.model.rates),
        seconds=0.0,
        incomplete_arms=[],
        no_call_max=pr.thresholds.no_call_max,
        instrument_max=pr.thresholds.instrument_max,
        already_complete=True,
    )


def _summary(
    plan: Plan,
    slots: list[Slot],
    folder: RunFolder,
    session: Session,
    counters: Counters,
    seconds: float,
) -> RunSummary:
    scored, seen = folder.state.scored, folder.state.seen
    incomplete = sorted({a for a, s, k in slots if (a, s, k) not in seen}, key=plan.arms.index)
    unscored = sorted(
        {a for a, s, k in slots if (a, s, k) in seen and (a, s, k) not in scored},
        key=plan.arms.index,
    )
    pr = plan.preregistration
    return RunSummary(
        folder=str(folder.path),
        session=folder.session.index,
        shard=None
        if folder.header.shard is None
        else f"{folder.header.shard.index}/{folder.header.shard.count}",
        stop_reason=folder.session.stop_reason,
        detail=folder.session.detail,
        planned=len(slots),
        scored=len(scored),
        written=folder.session.episodes_written,
        outcomes=dict(sorted(session.outcomes.items())),
        passed=session.passed,
        malformed_clause1=session.clause1,
        no_tool_call=session.no_call,
        instrument=session.instrument,
        abandoned=session.abandoned,
        retries=counters.retries,
        tokens=folder.state.spend.tokens,
        dollars=folder.state.spend.dollars(pr.model.rates),
        seconds=seconds,
        incomplete_arms=incomplete,
        unscored_arms=unscored,
        no_call_max=pr.thresholds.no_call_max,
        instrument_max=pr.thresholds.instrument_max,
    )


def run_preregistration(
    path_or_plan: str | Path | Plan,
    out_dir: str | Path,
    resume: bool = False,
    *,
    show_progress: bool | None = None,
    shard: Shard | None = None,
    accept_serving_change: bool = False,
) -> RunSummary:
    """Run a pre-registration (a YAML path or a validated Plan) into `out_dir`.

    resume=True continues the run folder at `out_dir`: the same tasks, each with its full number
    of attempts, none run twice (see runfolder.py on slots). `shard` runs only that shard's slots
    (runner/shard.py) into a shard folder. A resumed session served otherwise than the first (pin
    N10) is refused unless accept_serving_change. Raises PreregistrationError, RunFolderError,
    ShardError or EndpointError with one line naming the fix; the folder is never corrupted.
    """
    plan = path_or_plan if isinstance(path_or_plan, Plan) else load_preregistration(path_or_plan)
    return asyncio.run(
        run_plan(
            plan,
            out_dir,
            resume,
            show_progress=show_progress,
            shard=shard,
            accept_serving_change=accept_serving_change,
        )
    )


def run_request(request: RunRequest) -> RunSummary:
    """Run the session `request` asks for (session_request builds it for `poisson-tasks run`), and
    the declared replay after a whole run that completes, as run_preregistration does."""
    return asyncio.run(
        run_plan(
            request.plan,
            request.path,
            request.resume,
            show_progress=request.show_progress,
            shard=request.shard,
            accept_serving_change=request.accept_serving_change,
        )
    )


def replay_run(
    run_dir: str | Path,
    sample: int,
    seed: int = 0,
    *,
    show_progress: bool | None = None,
    accept_serving_change: bool = False,
    base_url: str | None = None,
) -> RunSummary:
    """Replay `sample` of a run folder's scored slots into RUN_DIR/replay/ (replay_plan), or
    continue the replay there; ReplayError, RunFolderError or EndpointError in one line."""
    return asyncio.run(
        replay_plan(
            run_dir,
            sample,
            seed,
            show_progress=show_progress,
            accept_serving_change=accept_serving_change,
            base_url=base_url,
        )
    )
