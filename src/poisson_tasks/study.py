"""A whole study in one call: a pre-registration file to a run folder to a card.

This is what `poisson-tasks card PREREG.yaml` (and, with no file, the embedded default) runs. The
run-and-card functions are defined in calibration (`calibration.run_arm`, the spec's path) and
re-exported here; this module adds the embedded default pre-registration.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from poisson_tasks.calibration.runcard import StudyResult, run_arm, run_study

__all__ = ["StudyResult", "default_preregistration", "run_arm", "run_study"]


def default_preregistration() -> Path:
    """The embedded default: a small design against the in-process reference endpoint."""
    return Path(str(files("poisson_tasks") / "data" / "smoke.yaml"))
