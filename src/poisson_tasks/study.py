"""A whole study in one call: a pre-registration file to a run folder to a card.

This is what `poisson-tasks card PREREG.yaml` (and, with no file, the embedded default) runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from poisson_tasks.arms import parse_arm_id
from poisson_tasks.calibration import Artifact, card_from_run
from poisson_tasks.prereg import Plan, load_preregistration, validate_preregistration
from poisson_tasks.runner import (
    RunSummary,
    check_plan_pins,
    default_run_folder,
    run_preregistration,
)


def default_preregistration() -> Path:
    """The embedded default: a small design against the in-process reference endpoint."""
    return Path(str(files("poisson_tasks") / "data" / "smoke.yaml"))


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
) -> StudyResult:
    """Run a pre-registered study into a new folder and build its card (refusals raise CardRefusal)."""
    plan = prereg if isinstance(prereg, Plan) else load_preregistration(prereg)
    folder = Path(run_dir) if run_dir is not None else default_run_folder(plan)
    summary = run_preregistration(plan, folder, show_progress=show_progress)
    return StudyResult(folder=folder, summary=summary, artifact=card_from_run(folder))


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
