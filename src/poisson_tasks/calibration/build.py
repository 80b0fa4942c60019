"""build_artifact: every figure of a card from its records, with the refusals enforced here.

Refusals:
- no-call: a cell in which more than `no_call_max` of the scored episodes made no tool call is
  not published, and neither is the card that holds it: CardRefusal (exit 1) names every such
  cell and its share.
- instrument: a cell whose instrument rate is above `instrument_max` is withheld: the card keeps
  its counts, marks it, leaves its figures and every comparison that needs them out, and is
  otherwise published.
"""

from __future__ import annotations

import shlex
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path

from poisson_tasks.arms import KNOBS, parse_arm_id
from poisson_tasks.calibration.artifact import (
    Artifact,
    Cell,
    KnobTable,
    NoCallPeak,
    PublishedFacts,
    ServingObserved,
)
from poisson_tasks.calibration.comparisons import knob_table
from poisson_tasks.calibration.figures import CellCounts, build_cell, no_call_share, totals
from poisson_tasks.calibration.manifest import published_facts
from poisson_tasks.calibration.provenance import Provenance, provenance_from_run
from poisson_tasks.calibration.records import EpisodeRecord, records_from_run
from poisson_tasks.calibration.statements import build_statements
from poisson_tasks.errors import CardRefusal, RunFolderError
from poisson_tasks.hashes import generator_hash
from poisson_tasks.prereg import Thresholds

__all__ = ["build_artifact", "card_from_run", "serving_observed"]


def _group(
    records: Sequence[EpisodeRecord], provenance: Provenance
) -> dict[str, list[EpisodeRecord]]:
    plan, seeds = set(provenance.arms), set(provenance.seeds)
    groups: dict[str, list[EpisodeRecord]] = {a: [] for a in provenance.arms}
    for record in records:
        if record.arm_id not in plan or record.seed not in seeds:
            raise RunFolderError(
                f"record {record.arm_id} seed {record.seed} is outside the provenance's plan; build the "
                "card from the records and provenance of the same run folder"
            )
        groups[record.arm_id].append(record)
    return groups


def _refuse_no_call(groups: dict[str, list[EpisodeRecord]], th: Thresholds) -> NoCallPeak | None:
    """Raise CardRefusal when a cell is over the no-call limit; else the highest share seen."""
    peak: NoCallPeak | None = None
    over: list[str] = []
    for arm, recs in groups.items():
        share = no_call_share([r for r in recs if not r.instrument])
        if share is None:
            continue
        if peak is None or share > peak.share:
            peak = NoCallPeak(arm_id=arm, share=share)
        if share > th.no_call_max:
            over.append(f"{arm} ({share:.3f})")
    if over:
        raise CardRefusal(
            f"card refused: more than {th.no_call_max:g} of the scored episodes made no tool call "
            f"in {', '.join(over)}; such a cell measures whether the model starts the task, not "
            "the level, so neither it nor its card is published"
        )
    return peak


def _knob_tables(
    cells: Sequence[Cell], counts: dict[str, CellCounts], th: Thresholds
) -> list[KnobTable]:
    by_knob: dict[str, list[Cell]] = defaultdict(list)
    for cell in cells:
        if not cell.control:
            by_knob[cell.knob].append(cell)
    return [
        knob_table(k, sorted(by_knob[k], key=lambda cell: (cell.level, cell.arm_id)), counts, th)
        for k in KNOBS
        if k in by_knob
    ]


def build_artifact(
    records: Sequence[EpisodeRecord],
    provenance: Provenance,
    thresholds: Thresholds | None = None,
    *,
    installed_generator_hash: str | None = None,
    published: Sequence[PublishedFacts] | None = None,
) -> Artifact:
    """Every figure of a card, its comparisons, provenance and closing texts.

    thresholds default to the ones the run declared (provenance.thresholds). The installed
    generator hash (for staleness) defaults to this install's, and the published cards (for the
    "does not claim" lines) to the ones in the repository's calibration folder.
    """
    th = thresholds if thresholds is not None else provenance.thresholds
    installed = installed_generator_hash
    if installed is None:
        installed = generator_hash()
    if published is None:
        published = published_facts()
    groups = _group(records, provenance)
    peak = _refuse_no_call(groups, th)
    cells: list[Cell] = []
    counts: dict[str, CellCounts] = {}
    for arm, recs in groups.items():
        cell, cc = build_cell(
            parse_arm_id(arm), recs, provenance.seeds, provenance.attempts, th, provenance.rates
        )
        cells.append(cell)
        counts[arm] = cc
    kind = "reference-policy" if provenance.serving.kind == "reference" else "model"
    knobs = _knob_tables(cells, counts, th)
    return Artifact(
        kind=kind,
        model=provenance.model,
        stale=provenance.generator_hash != installed,
        installed_generator_hash=installed,
        provenance=provenance,
        thresholds=th,
        cells=cells,
        knobs=knobs,
        controls=[c.arm_id for c in cells if c.control],
        run_totals=totals(records, provenance.rates),
        no_call_peak=peak,
        published_cards=sorted(p.name for p in published),
        statements=build_statements(kind, provenance, cells, knobs, installed, published, th),
        serving_observed=serving_observed(records, provenance) if kind == "model" else None,
    )


def serving_observed(
    records: Sequence[EpisodeRecord], provenance: Provenance
) -> ServingObserved | None:
    """Fingerprints, estimated tokens and context overflows over every episode line (a model card
    only: a reference policy's fingerprint is a constant of the policy)."""
    fingerprints: Counter[str] = Counter()
    overflows: Counter[str] = Counter()
    responses = without = estimated = total = 0
    for record in records:
        responses += len(record.system_fingerprints)
        for fp in record.system_fingerprints:
            if fp:
                fingerprints[fp] += 1
            else:
                without += 1
        estimated += record.estimated_tokens or 0
        total += record.tokens or 0
        if record.context_overflow:
            overflows[record.arm_id] += 1
    return ServingObserved(
        responses=responses,
        system_fingerprints=dict(sorted(fingerprints.items())) if fingerprints else None,
        responses_without_fingerprint=without,
        estimated_tokens=estimated,
        estimated_share=round(estimated / total, 6) if total else None,
        context_overflow=sum(overflows.values()),
        context_overflow_by_arm=dict(sorted(overflows.items())),
        context_window=provenance.serving.context_window,
    )


def card_from_run(
    folder: Path | str,
    thresholds: Thresholds | None = None,
    *,
    installed_generator_hash: str | None = None,
    published: Sequence[PublishedFacts] | None = None,
) -> Artifact:
    """records_from_run, provenance_from_run and build_artifact on one run folder.

    A folder with no scored episode (a run stopped before its first, or only instrument failures)
    is refused with CardRefusal: a card of nothing but "n/a" would read as a result."""
    records = records_from_run(folder)
    if not any(not r.instrument for r in records):
        raise CardRefusal(
            f"{folder} holds no scored episode yet ({len(records)} instrument failures): nothing "
            f"to card; run it first: poisson-tasks run --resume {shlex.quote(str(folder))}"
        )
    return build_artifact(
        records,
        provenance_from_run(folder),
        thresholds,
        installed_generator_hash=installed_generator_hash,
        published=published,
    )
