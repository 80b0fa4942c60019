"""A whole study in one call: a pre-registration file to a run folder to a card.

This is what `poisson-tasks card PREREG.yaml` (and, with no file, the embedded default) runs
(card_preregistration). The run-and-card functions are defined in calibration (`calibration.run_arm`, the spec's path) and
re-exported here; this module adds the embedded default pre-registration and the replay (a
seeded sample of a run folder run again, measured for the card's Reproducibility section).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from poisson_tasks.calibration.artifact import Reproducibility
from poisson_tasks.calibration.cardtarget import CardMade
from poisson_tasks.calibration.published import compare_published
from poisson_tasks.calibration.reproducibility import measure_replay
from poisson_tasks.calibration.runcard import StudyResult, card_study, run_arm, run_study
from poisson_tasks.calibration.sections.replay import reproducibility_lines
from poisson_tasks.runfolder import open_run
from poisson_tasks.runner import RunSummary, replay_run, summary_lines

__all__ = [
    "ReplayResult",
    "StudyResult",
    "card_preregistration",
    "card_study",
    "default_preregistration",
    "replay_study",
    "run_arm",
    "run_study",
]


def default_preregistration() -> Path:
    """The embedded default: a positive control against the in-process reference endpoint (the
    graded policy, whose rates are known from its parameters; the file's comments give them)."""
    return Path(str(files("poisson_tasks") / "data" / "smoke.yaml"))


def card_preregistration(
    prereg: Path | None,
    run_dir: Path | None,
    out: Path | None,
    *,
    plot: bool,
    compare: bool,
    show_progress: bool | None,
    report: Callable[[str], None],
) -> CardMade:
    """`card PREREG`: run a pre-registration (or, with none, the embedded default) and card it.

    The one rule, shared with `run`: stdout carries what a command makes (the card); the session
    summary is a report, given line by line to `report` before the card, so a refused card has it.
    """
    source = prereg if prereg is not None else default_preregistration()
    if prereg is None:
        report(f"no target given: running the embedded default {source.name}")

    def on_run(summary: RunSummary) -> None:
        for line in summary_lines(summary):
            report(line)

    result, made = card_study(
        source, run_dir, out, plot=plot, show_progress=show_progress, on_run=on_run
    )
    beside = compare_published(made.artifact) if compare else None
    return CardMade(made, beside, incomplete=result.summary.exit_code == 3)


@dataclass(frozen=True)
class ReplayResult:
    """A replay's session summary and the Reproducibility section it gives the run's card."""

    summary: RunSummary
    reproducibility: Reproducibility | None
    confidence: float

    def lines(self) -> list[str]:
        """What `poisson-tasks replay` prints: the session, then the card's section."""
        section = reproducibility_lines(self.reproducibility, self.confidence)
        return [*summary_lines(self.summary), *section]


def replay_study(
    run_dir: str | Path,
    sample: int,
    seed: int = 0,
    *,
    show_progress: bool | None = None,
    accept_serving_change: bool = False,
    base_url: str | None = None,
) -> ReplayResult:
    """Replay a seeded sample of a run folder's scored slots (runner.replay_run) and measure how
    much of it came out the same (the card's Reproducibility section)."""
    summary = replay_run(
        run_dir,
        sample,
        seed,
        show_progress=show_progress,
        accept_serving_change=accept_serving_change,
        base_url=base_url,
    )
    return ReplayResult(
        summary=summary,
        reproducibility=measure_replay(run_dir),
        confidence=open_run(run_dir).thresholds.confidence,
    )
