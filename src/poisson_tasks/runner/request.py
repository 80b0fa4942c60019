"""A session of a run as asked for: one frozen `RunRequest` that the entry points build and the
runner passes down whole, and `session_request`, which builds the one `poisson-tasks run` asks
for from its options (a new run of a file, or a folder resumed as the shard it holds)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from poisson_tasks.errors import PoissonError
from poisson_tasks.prereg import Plan, load_preregistration
from poisson_tasks.runfolder import ReplayRecord
from poisson_tasks.runner.folder import default_run_folder, stored_plan
from poisson_tasks.runner.shard import Shard, stored_shard


@dataclasses.dataclass(frozen=True)
class RunRequest:
    """One session as asked for, passed whole from the public entry points down: the plan, the
    folder, whether to resume it, the progress display, a shard's or a replay's share of the
    slots, and whether a changed serving is accepted (pin N10)."""

    plan: Plan
    path: Path
    resume: bool = False
    show_progress: bool | None = None
    shard: Shard | None = None
    accept_serving_change: bool = False
    replay: ReplayRecord | None = None


def session_request(
    file: Path | None,
    *,
    out: Path | None = None,
    resume: Path | None = None,
    base_url: str | None = None,
    shard: str | None = None,
    accept_serving_change: bool = False,
    show_progress: bool | None = None,
) -> RunRequest:
    """The session `run FILE` (into `out`, or runs/<name>-<time>) or `run --resume DIR` asks for;
    PoissonError in one line when the options do not go together."""
    if out is not None and resume is not None:
        raise PoissonError("give --out (a new run) or --resume (an existing one), not both")
    if file is None and resume is None:
        raise PoissonError(
            "give a pre-registration FILE (a new run), or --resume DIR to continue a run"
        )
    part = Shard.parse(shard) if shard is not None else None
    if accept_serving_change and resume is None:
        raise PoissonError(
            "--accept-serving-change goes with --resume DIR: a new run has one serving"
        )
    if file is not None:
        plan = load_preregistration(file, base_url=base_url)
    else:
        plan = stored_plan(resume)  # type: ignore[arg-type]
    if part is None and resume is not None:
        part = stored_shard(resume)  # a shard folder is resumed as the shard it holds
    folder = resume or out or default_run_folder(plan)
    return RunRequest(
        plan, Path(folder), resume is not None, show_progress, part, accept_serving_change
    )
