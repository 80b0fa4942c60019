"""What `poisson-tasks card` is given: a run folder to card, or a pre-registration to run first.

The options each target takes are checked here, before anything is read or run, in the order the
command line has always refused them; a run folder is carded here, a pre-registration by
study.card_preregistration (which loads the runner: a card of a run folder never does).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from poisson_tasks.calibration.build import card_from_run
from poisson_tasks.calibration.cardjson import card_json
from poisson_tasks.calibration.output import CardFiles, check_card_place, write_run_card
from poisson_tasks.calibration.published import compare_published
from poisson_tasks.calibration.render import render_document
from poisson_tasks.errors import PoissonError

__all__ = ["CardMade", "card_run_folder", "is_run_target"]


@dataclass(frozen=True)
class CardMade:
    """A card written (its files and notes), the comparison with the published cards when asked
    for, and whether the run it came from was left incomplete (exit 3)."""

    files: CardFiles
    beside: str | None = None
    incomplete: bool = False

    def document(self, as_json: bool) -> str:
        """What `card` prints on stdout: the comparison when asked for, else card.json or card.md."""
        if self.beside is not None:
            return self.beside
        artifact = self.files.artifact
        return card_json(artifact).decode() if as_json else render_document(artifact)


def is_run_target(
    target: Path | None, *, run_dir: Path | None, out: Path | None, plot: bool, compare: str | None
) -> bool:
    """Whether TARGET is a run folder (True) or a pre-registration to run first (False: a file,
    or none for the embedded default); refused in one line when an option does not fit it."""
    if compare not in (None, "published"):
        raise PoissonError(f"--compare {compare!r} is unknown; the one choice is `published`")
    if plot and out is None:
        raise PoissonError("--plot writes PNG files: add --out DIR")
    if target is None or (target.exists() and not target.is_dir()):  # a FIFO: refused as read
        return False
    if not target.is_dir():
        raise PoissonError(
            f"{target} does not exist: give a run folder or a pre-registration YAML file"
        )
    if run_dir is not None:
        raise PoissonError("--run-dir goes with a pre-registration file, not a run folder")
    return True


def card_run_folder(target: Path, out: Path | None, *, plot: bool, compare: bool) -> CardMade:
    """A run folder's card, written into its card/ (and `out`), and the comparison with the
    published cards when asked for (a refusal there writes no file)."""
    if out is not None:  # refused before the pass over the records
        check_card_place(out, target)
    artifact = card_from_run(target)
    beside = compare_published(artifact) if compare else None
    return CardMade(write_run_card(artifact, target, out, plot=plot), beside)
