"""One session's run loop on an open folder: workers take the pending slots, bounded by the
declared concurrency, under the limits; a stop (a limit, a signal, an endpoint that fails, a disk
that refuses a line) ends it with why, and the tally is what the summary reports.

Each episode's line is appended with no await before it, so a stop cannot cut a paid episode off;
its spend counts at once, its tally once an fsync covers it (the folder's on_durable). The
verifiers-null harness runs the same slots in batches through vf-eval instead (`run_null`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections import Counter

from poisson_tasks.bundle import TaskBundle
from poisson_tasks.errors import EndpointError, OutOfCredit, PoissonError, RunFolderError
from poisson_tasks.files import os_problem
from poisson_tasks.generator import generate
from poisson_tasks.owntools import ToolSet, with_own_tools
from poisson_tasks.prereg import Plan, Slot
from poisson_tasks.runfolder import EpisodeLine, StopReason, Usage
from poisson_tasks.runner.budget import Limits
from poisson_tasks.runner.endpoint import Endpoint
from poisson_tasks.runner.episode import EpisodeContext, Trace, episode_usage, run_episode
from poisson_tasks.runner.folder import RunFolder, resume_hint
from poisson_tasks.runner.progress import Progress
from poisson_tasks.runner.verifiers_null import run_batch
from poisson_tasks.verifier import INSTRUMENT_OUTCOMES

_NULL_BATCH = 8  # verifiers-null: slots per vf-eval child, in multiples of the concurrency


class SessionTasks:
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


class Session:
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
        self.tasks = SessionTasks(pending, plan.own_tools)
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

    def stop(self, reason: StopReason, detail: str | None = None, hard: bool = False) -> None:
        if self.stop_reason is None:
            self.stop_reason, self.detail = reason, detail
        if hard:
            current = asyncio.current_task()
            for worker in self._workers:
                if worker is not current:
                    worker.cancel()

    def _abandon(self, trace: Trace) -> None:
        """An episode cut off in flight: counted as abandoned, what its replies spent kept."""
        self._abandoned(episode_usage(trace.replies) if trace.replies else Usage())

    def _abandon_line(self, line: EpisodeLine, spent: bool = False) -> None:
        """A finished episode whose line the disk refused: counted as abandoned, its spend kept
        (`spent`: the folder already counted it when the line was appended)."""
        self._abandoned(line.usage, spent)

    def _abandoned(self, usage: Usage, spent: bool = False) -> None:
        self.abandoned += 1
        before = self.abandoned_usage
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

    def on_lost(self, lines: list[EpisodeLine], exc: OSError) -> None:
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
        self.stop("interrupted", self.lost[0], hard=True)

    def hard_stop(self) -> None:
        """Abandon the episodes in flight now (the second signal, or the grace period's end)."""
        self.stop("interrupted", "stopped", hard=True)

    def tally(self, line: EpisodeLine) -> None:
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
            self.stop("interrupted", f"the runner failed: {type(exc).__name__}: {exc}", hard=True)

    async def _work(self) -> None:
        while self.stop_reason is None:
            reason = self.limits.exhausted()
            if reason is not None:
                self.stop(reason, hard=reason == "wall_clock")
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
                self.stop("out_of_credit", str(exc), hard=True)
                return
            except EndpointError as exc:
                self._abandon(trace)
                self.fatal = exc
                self.stop("interrupted", str(exc), hard=True)
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
                self.stop("interrupted", f"the disk refused an episode line: {exc.strerror}", True)
                return

    async def _watchdog(self) -> None:
        await asyncio.sleep(max(0.0, self.limits.seconds_left()))
        self.stop("wall_clock", hard=True)

    async def run_null(self, base_url: str, api_key: str | None) -> None:
        """The verifiers-null harness: pending slots in batches through vf-eval (a child process)."""
        concurrency = self.plan.preregistration.execution.concurrency
        size = max(1, concurrency * _NULL_BATCH)
        pending = list(self.pending)
        self._slots = iter(())
        while pending and self.stop_reason is None:
            reason = self.limits.exhausted()
            if reason is not None:
                self.stop(reason)
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
                self.stop("wall_clock")
                break
            except EndpointError as exc:
                self.fatal = exc
                self.stop("interrupted", str(exc))
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
                self.stop("interrupted", f"the disk refused episode lines: {exc.strerror}")
                break
            for line in lines:
                self.tally(line)
            done = {(ln.arm_id, ln.seed, ln.attempt) for ln in lines}
            missing = [s for s in batch if s not in done]
            if missing:
                self.abandoned += len(missing)
                self.stop("interrupted", f"vf-eval returned no trace for {len(missing)} slot(s)")
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
                self.stop("interrupted", f"the runner failed: {type(result).__name__}: {result}")
        if self.stop_reason is None:
            self.stop_reason = "complete" if next(self._slots, None) is None else "interrupted"
