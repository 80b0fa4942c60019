"""Calibration cards: pure statistics and their presentation.

records_from_run (a run folder -> EpisodeRecords) -> build_artifact (every figure, Provenance and
the refusals) -> render_document (card.md) and card_json (card.json, canonical bytes).
run_arm and run_study (run, then card) are imported on first use: they load the runner and its
endpoint client, which reading and rendering a card never needs.
"""

import importlib
from typing import TYPE_CHECKING, Any

from poisson_tasks.calibration.artifact import Artifact, PublishedFacts
from poisson_tasks.calibration.build import build_artifact, card_from_run
from poisson_tasks.calibration.cardjson import card_json, read_card_json
from poisson_tasks.calibration.provenance import Provenance, provenance_from_run
from poisson_tasks.calibration.published import check_published, compare_published
from poisson_tasks.calibration.records import EpisodeRecord, records_from_run
from poisson_tasks.calibration.render import render_document

if TYPE_CHECKING:
    from poisson_tasks.calibration.runcard import StudyResult, run_arm, run_study

_RUN_AND_CARD = frozenset({"StudyResult", "run_arm", "run_study"})

__all__ = [
    "Artifact",
    "EpisodeRecord",
    "Provenance",
    "PublishedFacts",
    "StudyResult",
    "build_artifact",
    "card_from_run",
    "card_json",
    "check_published",
    "compare_published",
    "provenance_from_run",
    "read_card_json",
    "records_from_run",
    "render_document",
    "run_arm",
    "run_study",
]


def __getattr__(name: str) -> Any:
    if name not in _RUN_AND_CARD:
        raise AttributeError(f"module 'poisson_tasks.calibration' has no attribute {name!r}")
    value = getattr(importlib.import_module("poisson_tasks.calibration.runcard"), name)
    globals()[name] = value  # later look-ups skip __getattr__
    return value
