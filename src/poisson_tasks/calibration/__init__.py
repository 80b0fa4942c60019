"""Calibration cards: pure statistics and their presentation.

records_from_run (a run folder -> EpisodeRecords) -> build_artifact (every figure, Provenance and
the refusals) -> render_document (card.md) and card_json (card.json, canonical bytes).
"""

from poisson_tasks.calibration.artifact import Artifact, PublishedFacts
from poisson_tasks.calibration.build import build_artifact, card_from_run
from poisson_tasks.calibration.cardjson import card_json, read_card_json
from poisson_tasks.calibration.provenance import Provenance, provenance_from_run
from poisson_tasks.calibration.published import check_published, compare_published
from poisson_tasks.calibration.records import EpisodeRecord, records_from_run
from poisson_tasks.calibration.render import render_document

__all__ = [
    "Artifact",
    "EpisodeRecord",
    "Provenance",
    "PublishedFacts",
    "build_artifact",
    "card_from_run",
    "card_json",
    "check_published",
    "compare_published",
    "provenance_from_run",
    "read_card_json",
    "records_from_run",
    "render_document",
]
