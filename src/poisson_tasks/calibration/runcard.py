"""A pre-registration, or one cell of it, run and carded: `calibration.run_arm` (the spec's path).

It sits in calibration, above the runner, because a card is what it returns; calibration's package
imports it lazily so that reading and rendering cards does not load the endpoint client.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from poisson_tasks.arms import parse_arm_id
from poisson_tasks.calibration.artifact import Artifact
from poisson_tasks.calibration.build import card_from_run
from poisson_tasks.calibration.output import CardFiles, check_card_folder, write_run_card
from poisson_tasks.prereg import Plan, load_preregistration, validate_preregistration
from poisson_tasks.runner import (
    RunSummary,
    check_plan_pins,
    default_run_folder,
    run_preregistration,
)


@dataclass(frozen=True)
class StudyResult:
    """The run's summary, its folder, and the card built from it."""

    folder: Path
    summary: RunSummary
    artifact: Artifact


def run_study(
    prereg: str | Path | Plan,
    run_dir: str | Path | None = None,
    *,
    show_progress: bool | None = None,
    on_run: Callable[[RunSummary], None] | None = None,
) -> StudyResult:
    """Run a pre-registered study into a new folder and build its card (refusals raise CardRefusal).

    `on_run` receives the run's summary once the run is over and before the card is built, so a
    caller can report the run even when its card is then refused.
    """
    plan = prereg if isinstance(prereg, Plan) else load_preregistration(prereg)
    folder = Path(run_dir) if run_dir is not None else default_run_folder(plan)
    summary = run_preregistration(plan, folder, show_progress=show_progress)
    if on_run is not None:
        on_run(summary)
    return StudyResult(folder=folder, summary=summary, artifact=card_from_run(folder))


def card_study(
    prereg: str | Path | Plan,
    run_dir: str | Path | None = None,
    out: str | Path | None = None,
    *,
    plot: bool = False,
    show_progress: bool | None = None,
    on_run: Callable[[RunSummary], None] | None = None,
) -> tuple[StudyResult, CardFiles]:
    """`card PREREG`: run the study into a new folder, then write its card where `card RUN` writes
    a run's card (RUN_DIR/card/, and `out` when given). `out` is checked before the run starts: a
    run that would end with its card refused a place is not run. `on_run` as in run_study."""
    plan = prereg if isinstance(prereg, Plan) else load_preregistration(prereg)
    folder = Path(run_dir) if run_dir is not None else default_run_folder(plan)
    if out is not None:
        check_card_folder(Path(out), folder)  # a new run has no card: any card there is another's
    result = run_study(plan, folder, show_progress=show_progress, on_run=on_run)
    return result, write_run_card(result.artifact, folder, out, plot=plot)


def run_arm(
    prereg: str | Path | Plan, arm: str, run_dir: str | Path, *, show_progress: bool | None = None
) -> StudyResult:
    """Run one cell (one arm of a pre-registration, its tasks and attempts) and card it."""
    plan = prereg if isinstance(prereg, Plan) else load_preregistration(prereg)
    check_plan_pins(plan)  # the whole plan's contrasts, before the one cell's first request
    doc = plan.preregistration.model_dump(mode="json")
    doc["design"]["arms"] = [arm]
    doc["design"]["horizon"] = parse_arm_id(arm).max_turns(doc["design"]["slack"])
    doc["name"] = f"{doc['name']}-{arm.replace(':', '-').replace('+', '-').replace('@', '-')}"
    one = validate_preregistration(doc, source=plan.source)
    return run_study(one, run_dir, show_progress=show_progress)
