"""run_preregistration: a validated plan run against its endpoint into a run folder.

Order of work: validate, check every arm generates, check a resumed folder belongs to this study
(writes nothing), read the API key from its variable, start the reference endpoint in-process when
the provider is `reference` without a base_url, preflight the endpoint (reachable, key accepted,
model served), refuse a resumed session served otherwise than the first (pin N10, unless
accept_serving_change), and only then create or open the folder. Episodes run concurrently, bounded by the
declared concurrency, arm by arm in plan order, so a stopped run leaves whole cells behind it.

One writer per folder: a resume takes the folder's lock before its preflight, a new folder when it
is made (runner/folder.py). SIGINT and SIGTERM stop a session the same way: no new slot is taken,
episodes in flight get STOP_GRACE_S to finish (a second signal, or the end of the grace, abandons
them and records what they spent; so does an instrument failure after the signal, which a server
stopped along with the runner causes), the header is written with the stop, and Interrupted is
raised (exit 128 + the signal's number). A signal before the folder exists stops with nothing written.
A disk that refuses an episode line stops the session the same way, the line cut back off.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

from poisson_tasks.bundle import TaskBundle
from poisson_tasks.credentials import SECRET_PIECE, fields_where, holds_secret, scrub
from poisson_tasks.errors import (
    EndpointError,
    Interrupted,
    OutOfCredit,
    PinRefusal,
    PoissonError,
    PreregistrationError,
    RunFolderError,
)
from poisson_tasks.files import os_problem
from poisson_tasks.generator import generate
from poisson_tasks.owntools import ToolSet, with_own_tools
from poisson_tasks.pins.owntools import own_tools_ledger
from poisson_tasks.pins.plan import check_plan
from poisson_tasks.prereg import Plan, Slot, load_preregistration, validate_preregistration
from poisson_tasks.reference import ReferenceServer, start_reference_server
from poisson_tasks.runfolder import (
    HEADER,
    EpisodeLine,
    FolderLock,
    OwnToolsRecord,
    ReplayRecord,
    RunHeader,
    StopReason,
    Usage,
    iter_episodes,
)
from poisson_tasks.runner.budget import Limits
from poisson_tasks.runner.endpoint import Counters, Endpoint
from poisson_tasks.runner.episode import EpisodeContext, Trace, episode_usage, run_episode
from poisson_tasks.runner.folder import (
    FolderState,
    RunFolder,
    check_creatable,
    resume_hint,
    stored_plan,
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
from poisson_tasks.runner.shard import Shard, budget_share, shard_record, shard_slots
from poisson_tasks.runner.summary import RunSummary, stopped_line
from poisson_tasks.runner.verifiers_null import run_batch, vf_eval_command
from poisson_tasks.servingpin import compare_serving, serving_facts, session_facts
from poisson_tasks.tokens import count_tokens
from poisson_tasks.verifier import INSTRUMENT_OUTCOMES

STOP_GRACE_S = 10.0  # how long episodes in flight may finish after SIGINT/SIGTERM
_NULL_BATCH = 8  # verifiers-null: slots per vf-eval child, in multiples of the concurrency


class _Tasks:
    """Bundles for the slots in flight: generated once per task, dropped after its last attempt."""

    def __init__(self, slots: list[Slot], own_tools: ToolSet | None = None) -> None:
        self._left = Counter((a, s) for a, s, _ in slots)
        self._cache: dict[tuple[str, int], TaskBundle] = {}
        self._own_tools = own_tools

    def take(self, slot: Slot) -> TaskBundle:
        key = (slot.arm_id, slot.seed)
        bundle = self._cache.get(key)
        if bundle is None:
            # The runner never reads the negative controls: built only where the user's own
            # tools re-derive the task id from the whole bundle (with_own_tools).
            bundle = generate(slot.arm_id, slot.seed, controls=self._own_tools is not None)
            if self._own_tools is not None:
                bundle = with_own_tools(bundle, self._own_tools)
            self._cache[key] = bundle
        return bundle

    def release(self, slot: Slot) -> None:
        key = (slot.arm_id, slot.seed)
        self._left[key] -= 1
        if self._left[key] <= 0:
            self._cache.pop(key, None)


class _Session:
    """One session's run loop: workers, limits, stop, and the tally the summary reports."""

    def __init__(
        self,
        plan: Plan,
        folder: RunFolder,
        endpoint: Endpoint,
        limits: Limits,
        progress: Progress,
        pending: list[Slot],
    ) -> None:
        pr = plan.preregistration
        self.plan = plan
        self.folder = folder
        self.endpoint = endpoint
        self.limits = limits
        self.progress = progress
        self.pending = pending
        self.tasks = _Tasks(pending, plan.own_tools)
        self.ctx = EpisodeContext(
            endpoint=endpoint,
            turn_limit=pr.design.turn_limit,
            timeout_s=pr.execution.episode_timeout_s,
            session=folder.session.index,
            resumed=folder.session.index > 0,
            derive_seed=pr.decoding.seed == "derived",
            own_tools=plan.own_tools,
        )
        self.stop_reason: StopReason | None = None
        self.detail: str | None = None
        self.signalled = False  # a SIGINT/SIGTERM came (see _work on what it fails)
        self.fatal: PoissonError | None = None
        self.crash: Exception | None = None
        self.outcomes: Counter[str] = Counter()
        self.passed = 0
        self.clause1 = 0
        self.no_call = 0
        self.instrument = 0
        self.abandoned = 0
        self.abandoned_usage = Usage()
        # what the progress shows as spent: the folder's spend when the session began, then each
        # episode's as it is counted, so a frame's tokens belong to the episodes it counts
        self.shown = dataclasses.replace(limits.spend)
        self.lost: tuple[str, RunFolderError] | None = None  # an fsync failed (see _lost)
        self._slots = iter(pending)
        self._workers: list[asyncio.Task[None]] = []

    def _stop(self, reason: StopReason, detail: str | None = None, hard: bool = False) -> None:
        if self.stop_reason is None:
            self.stop_reason, self.detail = reason, detail
        if hard:
            current = asyncio.current_task()
            for worker in self._workers:
                if worker is not current:
                    worker.cancel()

    def _abandon(self, trace: Trace) -> None:
        self.abandoned += 1
        usage = episode_usage(trace.replies) if trace.replies else Usage()
        before = self.abandoned_usage
        self.abandoned_usage = Usage(
            uncached_input_tokens=(before.uncached_input_tokens or 0)
            + (usage.uncached_input_tokens or 0),
            cached_input_tokens=(before.cached_input_tokens or 0)
            + (usage.cached_input_tokens or 0),
            completion_tokens=(before.completion_tokens or 0) + (usage.completion_tokens or 0),
            reasoning_tokens=(before.reasoning_tokens or 0) + (usage.reasoning_tokens or 0),
        )
        self.limits.spend.add(usage)
        self._show_spent(usage)

    def _abandon_line(self, line: EpisodeLine, spent: bool = False) -> None:
        """A finished episode whose line the disk refused: counted as abandoned, its spend kept
        (`spent`: the folder already counted it when the line was appended)."""
        self.abandoned += 1
        usage, before = line.usage, self.abandoned_usage
        self.abandoned_usage = Usage(
            uncached_input_tokens=(before.uncached_input_tokens or 0)
            + (usage.uncached_input_tokens or 0),
            cached_input_tokens=(before.cached_input_tokens or 0)
            + (usage.cached_input_tokens or 0),
            completion_tokens=(before.completion_tokens or 0) + (usage.completion_tokens or 0),
            reasoning_tokens=(before.reasoning_tokens or 0) + (usage.reasoning_tokens or 0),
        )
        if not spent:
            self.limits.spend.add(usage)
        self._show_spent(usage)

    def _show_spent(self, usage: Usage) -> None:
        self.shown.add(usage)
        self.progress.spent(self.shown.tokens, self.shown.dollars(self.limits.rates))

    def _lost(self, lines: list[EpisodeLine], exc: OSError) -> None:
        """An fsync failed: the lines it covered were cut back off (never counted as recorded)."""
        for line in lines:
            self._abandon_line(line, spent=True)
        self.lost = (
            f"the disk refused to keep {len(lines)} episode line(s): {exc.strerror}",
            RunFolderError(
                f"{self.folder.path}: {len(lines)} episode line(s) could not be synced to disk "
                f"({os_problem(exc)}); every line before them is kept: then continue with "
                f"{resume_hint(self.folder.path)}"
            ),
        )
        self.fatal = self.lost[1]
        self._stop("interrupted", self.lost[0], hard=True)

    def hard_stop(self) -> None:
        """Abandon the episodes in flight now (the second signal, or the grace period's end)."""
        self._stop("interrupted", "stopped", hard=True)

    def _tally(self, line: EpisodeLine) -> None:
        self.outcomes[line.outcome] += 1
        instrument = line.outcome in INSTRUMENT_OUTCOMES
        if instrument:
            self.instrument += 1
        else:
            self.passed += line.passed
            self.clause1 += line.malformed_clause == 1
            self.no_call += line.tool_calls == 0
        self.shown.add(line.usage)
        self.progress.episode(
            instrument=instrument,
            passed=line.passed,
            tokens=self.shown.tokens,
            dollars=self.shown.dollars(self.limits.rates),
        )

    async def _worker(self) -> None:
        try:
            await self._work()
        except Exception as exc:  # a bug, not the model or the endpoint: stop and show it
            if self.crash is None:
                self.crash = exc
            self._stop("interrupted", f"the runner failed: {type(exc).__name__}: {exc}", hard=True)

    async def _work(self) -> None:
        while self.stop_reason is None:
            reason = self.limits.exhausted()
            if reason is not None:
                self._stop(reason, hard=reason == "wall_clock")
                return
            slot = next(self._slots, None)
            if slot is None:
                return
            t0 = time.perf_counter()
            bundle = self.tasks.take(slot)
            trace = Trace.start(bundle)
            setup_s = time.perf_counter() - t0
            self.progress.flying(+1)
            try:
                line = await run_episode(bundle, slot, self.ctx, setup_s, trace)
            except OutOfCredit as exc:
                self._abandon(trace)
                self._stop("out_of_credit", str(exc), hard=True)
                return
            except EndpointError as exc:
                self._abandon(trace)
                self.fatal = exc
                self._stop("interrupted", str(exc), hard=True)
                return
            except asyncio.CancelledError:
                self._abandon(trace)
                raise
            finally:
                self.progress.flying(-1)
                self.tasks.release(slot)
            if self.signalled and line.outcome in INSTRUMENT_OUTCOMES:
                # A stop often takes the server down with the runner (a scheduler signals every
                # process of a job, Ctrl-C a terminal's process group): the failure is the stop's.
                self._abandon_line(line)
                return
            # Written at once, with no await before it, so a stop cannot cut a paid episode off;
            # its spend counts now, its tally once an fsync covers it (folder's on_durable).
            try:
                self.folder.append(line)
            except OSError as exc:  # a full disk, a folder gone read-only: stop, the line cut off
                self._abandon_line(line)
                self.fatal = RunFolderError(
                    f"{self.folder.path}: an episode line could not be written "
                    f"({os_problem(exc)}); every line before it is kept: then continue with "
                    f"{resume_hint(self.folder.path)}"
                )
                self._stop("interrupted", f"the disk refused an episode line: {exc.strerror}", True)
                return

    async def _watchdog(self) -> None:
        await asyncio.sleep(max(0.0, self.limits.seconds_left()))
        self._stop("wall_clock", hard=True)

    async def run_null(self, base_url: str, api_key: str | None) -> None:
        """The verifiers-null harness: pending slots in batches through vf-eval (a child process)."""
        concurrency = self.plan.preregistration.execution.concurrency
        size = max(1, concurrency * _NULL_BATCH)
        pending = list(self.pending)
        self._slots = iter(())
        while pending and self.stop_reason is None:
            reason = self.limits.exhausted()
            if reason is not None:
                self._stop(reason)
                break
            batch, pending = pending[:size], pending[size:]
            self.progress.flight(len(batch))
            try:
                lines, _ = await run_batch(
                    self.plan,
                    batch,
                    base_url,
                    api_key,
                    self.ctx.session,
                    self.ctx.resumed,
                    self.limits.seconds_left(),
                )
            except TimeoutError:
                self.abandoned += len(batch)
                self._stop("wall_clock")
                break
            except EndpointError as exc:
                self.fatal = exc
                self._stop("interrupted", str(exc))
                break
            finally:
                self.progress.flight(0)
            try:
                await self.folder.write(lines)
            except OSError as exc:  # a full disk: the batch is cut back off, the run stops
                for line in lines:
                    self._abandon_line(line)
                self.fatal = RunFolderError(
                    f"{self.folder.path}: episode lines could not be written "
                    f"({os_problem(exc)}); every line before them is kept: then continue with "
                    f"{resume_hint(self.folder.path)}"
                )
                self._stop("interrupted", f"the disk refused episode lines: {exc.strerror}")
                break
            for line in lines:
                self._tally(line)
            done = {(ln.arm_id, ln.seed, ln.attempt) for ln in lines}
            missing = [s for s in batch if s not in done]
            if missing:
                self.abandoned += len(missing)
                self._stop("interrupted", f"vf-eval returned no trace for {len(missing)} slot(s)")
        if self.stop_reason is None:
            self.stop_reason = "complete" if not pending else "interrupted"

    async def run(self) -> None:
        concurrency = self.plan.preregistration.execution.concurrency
        self._workers = [asyncio.create_task(self._worker()) for _ in range(concurrency)]
        watchdog = asyncio.create_task(self._watchdog())
        try:
            results = await asyncio.gather(*self._workers, return_exceptions=True)
        except asyncio.CancelledError:  # Ctrl-C: let every worker record what it abandons
            for worker in self._workers:
                worker.cancel()
            await asyncio.gather(*self._workers, return_exceptions=True)
            raise
        finally:
            watchdog.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watchdog
        for result in results:
            if isinstance(result, Exception) and self.crash is None:
                self.crash = result
                self._stop("interrupted", f"the runner failed: {type(result).__name__}: {result}")
        if self.stop_reason is None:
            self.stop_reason = "complete" if next(self._slots, None) is None else "interrupted"


def _api_key(plan: Plan, folder: Path) -> str | None:
    env = plan.preregistration.model.api_key_env
    if env is None:
        return None
    value = os.environ.get(env)
    if not value:
        raise EndpointError(
            f"model.api_key_env names {env}, which is not set: export {env}=<your key>"
        )
    # decided by value: the key, or any 8-character piece of it, anywhere in the document
    # (it would be written into run.json and the card) refuses the run before anything is sent
    fields = fields_where(
        {**plan.preregistration.model_dump(mode="json"), _FOLDER_FIELD: str(folder.absolute())},
        lambda text: text == value or (len(value) >= SECRET_PIECE and holds_secret(text, value)),
    )
    if fields:
        raise PreregistrationError(
            [
                f"{field}: holds the API key that model.api_key_env names ({env}), or a piece of "
                + (
                    "it; give another --out: a folder's name is printed, and written in every "
                    "card and page made from it"
                    if field == _FOLDER_FIELD
                    else "it; remove it: the key is sent in the Authorization header and never "
                    "written"
                )
                for field in fields
            ]
        )
    return value


_FOLDER_FIELD = "the run folder's path"


def _check_arms(plan: Plan) -> None:
    """Every arm generates (a knob without a generator in this build stops the run up front)."""
    for arm in plan.arms:
        bundle = generate(arm, plan.seeds[0])
        if plan.own_tools is not None:
            with_own_tools(bundle, plan.own_tools)


def check_plan_pins(plan: Plan) -> None:
    """Hold the pin ledger over every contrast of the plan at every seed, before any request.

    A violated row refuses the whole run with PinRefusal (exit 2) in one line naming the row, the
    arms and their values, and the seeds it was refused at; there is no switch to skip it.
    """
    report = check_plan(plan.arms, plan.seeds)
    if not report.refused:
        return
    seed, first = next(
        (r.seed, v) for c in report.contrasts for r in c.reports for v in r.violations
    )
    raise PinRefusal(
        f"run refused before any request: {report.message()}; at seed {seed}: {first.line()}; "
        "the levels of a contrast must differ only in their knob: fix the generator or the plan"
    )


OWN_TOOLS_SEEDS = 3  # the seeds the pin ledger is held on with the user's tools, from the first


def own_tools_record(plan: Plan) -> OwnToolsRecord | None:
    """What the pin ledger finds on the plan's own tools (None without them), on its first seeds."""
    tools = plan.own_tools
    if tools is None:
        return None
    seeds = list(plan.seeds[:OWN_TOOLS_SEEDS])
    ledger = own_tools_ledger(plan.arms, seeds, tools)
    return OwnToolsRecord(
        file=tools.source,
        sha256=tools.sha256,
        names=list(tools.names),
        checked_seeds=seeds,
        contrasts=ledger.contrasts,
        changed=[c.model_dump() for c in ledger.changed],
        not_held=[c.model_dump() for c in ledger.not_held],
    )


class _Signals:
    """SIGINT and SIGTERM while run_plan runs: before the session, cancel the run (nothing is
    written yet, or the folder is closed as interrupted); during it, stop taking slots and give
    in-flight episodes STOP_GRACE_S, then abandon them."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.main = asyncio.current_task()
        self.signum: int | None = None
        self.session: _Session | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._previous: dict[int, Any] = {}

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum is not None else "a signal"

    def install(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                previous = signal.getsignal(sig)
                self.loop.add_signal_handler(sig, self._on_signal, int(sig))
            except (ValueError, RuntimeError, NotImplementedError):  # not the main thread
                continue
            self._previous[sig] = previous

    def remove(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        for sig, previous in self._previous.items():
            with contextlib.suppress(ValueError, RuntimeError):
                self.loop.remove_signal_handler(sig)
                signal.signal(sig, previous if previous is not None else signal.SIG_DFL)
        self._previous.clear()

    def _on_signal(self, signum: int) -> None:
        first = self.signum is None
        if first:
            self.signum = signum
        session = self.session
        if session is None:
            if self.main is not None:
                self.main.cancel()
        elif first:
            session.signalled = True
            session._stop("interrupted", f"stopped by {self.name}")
            self._timer = self.loop.call_later(STOP_GRACE_S, session.hard_stop)
        else:
            session.hard_stop()


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
    """One session with SIGINT and SIGTERM handled (see _Signals)."""
    signals = _Signals()
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


def _check_runnable(plan: Plan) -> None:
    """What refuses a plan before its folder is touched: its arms, its pins, a missing extra."""
    _check_arms(plan)
    check_plan_pins(plan)
    if plan.preregistration.design.harness == "verifiers-null":
        vf_eval_command()  # the extra is missing: stop before the folder is touched


def _base_url(plan: Plan, key: str | None, held: _Held) -> str:
    """The endpoint's base URL: the declared one, else an in-process reference server's."""
    model = plan.preregistration.model
    base_url = model.resolved_base_url
    if model.provider == "reference" and base_url is None:
        count_tokens("warm")  # the server thread counts tokens: load the tables before the clock
        held.server = start_reference_server("127.0.0.1", 0, api_key=key)
        base_url = held.server.base_url
    if base_url is None:  # validate_preregistration requires one for every provider but these
        raise EndpointError(
            "model.base_url: not given; for a llama.cpp server pass the URL serve-local "
            "printed with `run --base-url URL` (or write it in the file)"
        )
    return base_url


async def _run_plan(request: RunRequest, signals: _Signals, opened: list[RunFolder]) -> RunSummary:
    plan, path, replay = request.plan, request.path, request.replay
    shard = request.shard
    # A shard runs its own slots within its share of the study's budget (runner/shard.py); a
    # replay runs its sample's slots (runner/replay.py).
    record = shard_record(plan, shard) if shard is not None else None
    slots = shard_slots(plan, shard) if shard is not None else plan.slots()
    if replay is not None:
        slots = [Slot(arm, seed, attempt) for arm, seed, attempt in replay.slots]
    _check_runnable(plan)
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
        key = _api_key(plan, path)
        base_url = _base_url(plan, key, held)
        serving = scrub(await serving_details(plan.preregistration.model, base_url, key), key)
        if held.server is not None:
            serving["in_process"] = True
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
    signals: _Signals,
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
    session = _Session(plan, folder, endpoint, limits, progress, pending)
    started = time.perf_counter()
    stop: StopReason = "interrupted"
    detail: str | None = "the session was interrupted"
    try:
        folder.open_writer(on_durable=session._tally, on_lost=session._lost)
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
    session: _Session,
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


def check_serving_unchanged(
    path: Path, header: RunHeader, serving: dict[str, Any], plan: Plan
) -> None:
    """Refuse a resumed session whose serving differs from the first session's on pin N10
    (servingpin.compare_serving), in one line naming each field; writes nothing."""
    decoding = plan.preregistration.model_dump(mode="json")["decoding"]
    change = compare_serving(session_facts(header)[0], serving_facts(serving, decoding))
    if not change.held:
        raise RunFolderError(
            f"{path} was served otherwise in session 0 ({change.describe()}): serve the model as "
            "session 0 was served, or pass --accept-serving-change to go on (the card then lists "
            "every session's serving and says its figures pool several servings)"
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
