"""build_artifact: every figure of a card from its records, with the refusals enforced here.

A run folder is read in one streamed pass (artifact_from_run, card_from_run): each line is
checked and counted into a RunTally as it is read, so no episode is held; build_artifact counts
records already in memory into the same tally, and both compute the card from it.

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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from poisson_tasks.arms import KNOBS, parse_arm_id
from poisson_tasks.calibration.artifact import (
    Artifact,
    Cell,
    KnobTable,
    NoCallPeak,
    PublishedFacts,
    RateLimited,
    ServingObserved,
)
from poisson_tasks.calibration.comparisons import knob_table
from poisson_tasks.calibration.figures import CellCounts, build_cell, no_call_share, totals
from poisson_tasks.calibration.firstrequest import first_request_pin
from poisson_tasks.calibration.manifest import published_facts
from poisson_tasks.calibration.provenance import Provenance, provenance_from_header
from poisson_tasks.calibration.records import EpisodeRecord, episode_rows
from poisson_tasks.calibration.reproducibility import ReplaySide
from poisson_tasks.calibration.statements import build_statements, stale_hashes
from poisson_tasks.calibration.tally import RunTally
from poisson_tasks.errors import CardRefusal, RunFolderError
from poisson_tasks.hashes import engine_hash, generator_hash
from poisson_tasks.prereg import Thresholds
from poisson_tasks.runfolder import (
    REPLAY,
    OpenRun,
    RecordStream,
    RunHeader,
    is_run_folder,
    open_run,
)

__all__ = [
    "LineObserver",
    "artifact_from_run",
    "artifact_from_tally",
    "build_artifact",
    "card_from_run",
    "serving_observed",
    "tally_records",
]


def tally_records(records: Iterable[EpisodeRecord], provenance: Provenance) -> RunTally:
    """A run's tally from records already in memory (build_artifact's input)."""
    tally = RunTally(provenance.arms, provenance.seeds, provenance.attempts)
    seeds = set(provenance.seeds)
    for record in records:
        if record.arm_id not in tally.cells or record.seed not in seeds:
            raise RunFolderError(
                f"record {record.arm_id} seed {record.seed} is outside the provenance's plan; build the "
                "card from the records and provenance of the same run folder"
            )
        tally.add(record)
    return tally


def _refuse_no_call(tally: RunTally, th: Thresholds) -> NoCallPeak | None:
    """Raise CardRefusal when a cell is over the no-call limit; else the highest share seen."""
    peak: NoCallPeak | None = None
    over: list[str] = []
    no_call = text = 0
    dialects: Counter[str] = Counter()
    for arm, cell in tally.cells.items():
        share = no_call_share(cell)
        if share is None:
            continue
        if peak is None or share > peak.share:
            peak = NoCallPeak(arm_id=arm, share=share)
        if share > th.no_call_max:
            over.append(f"{arm} ({share:.3f})")
            no_call += cell.no_tool_call
            text += cell.no_call_text
            dialects.update(cell.no_call_dialects)
    if over:
        raise CardRefusal(
            f"card refused: more than {th.no_call_max:g} of the scored episodes made no tool call "
            f"in {', '.join(over)}; {_no_call_reading(no_call, text, dialects)}, so neither it nor "
            "its card is published"
        )
    return peak


def _no_call_reading(no_call: int, text: int, dialects: Counter[str]) -> str:
    """What the refused cells' no-call episodes were: a model that did not start, or calls the
    serving side's parser left as text (the format alarm, clause 1)."""
    if not text:
        return "such a cell measures whether the model starts the task, not the level"
    named = ", ".join(f"{dialect} {count}" for dialect, count in sorted(dialects.items()))
    share = "all" if text == no_call else f"{text}"
    return (
        f"{share} of their {no_call} no-call episodes wrote a call as text instead (dialects: "
        f"{named}; the format alarm, clause 1), calls the serving side's tool parser did not turn "
        "into tool calls, so such a cell measures the server's chat template and tool parser, "
        "not the level: check them first (docs/local-model.md)"
    )


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
    records: Iterable[EpisodeRecord],
    provenance: Provenance,
    thresholds: Thresholds | None = None,
    *,
    installed_generator_hash: str | None = None,
    installed_engine_hash: str | None = None,
    published: Sequence[PublishedFacts] | None = None,
) -> Artifact:
    """Every figure of a card, its comparisons, provenance and closing texts.

    thresholds default to the ones the run declared (provenance.thresholds). The installed
    generator and engine hashes (for staleness) default to this install's, and the published cards (for the
    "does not claim" lines) to the ones in the repository's calibration folder.
    """
    return artifact_from_tally(
        tally_records(records, provenance),
        provenance,
        thresholds,
        installed_generator_hash=installed_generator_hash,
        installed_engine_hash=installed_engine_hash,
        published=published,
    )


def artifact_from_tally(
    tally: RunTally,
    provenance: Provenance,
    thresholds: Thresholds | None = None,
    *,
    installed_generator_hash: str | None = None,
    installed_engine_hash: str | None = None,
    published: Sequence[PublishedFacts] | None = None,
) -> Artifact:
    """build_artifact from a run's tally (its records already counted, in file order)."""
    th = thresholds if thresholds is not None else provenance.thresholds
    installed = {
        "generator": installed_generator_hash or generator_hash(),
        "engine": installed_engine_hash or engine_hash(),
    }
    moved = stale_hashes(provenance, installed)
    if published is None:
        published = published_facts()
    peak = _refuse_no_call(tally, th)
    cells: list[Cell] = []
    counts: dict[str, CellCounts] = {}
    for arm, cell_tally in tally.cells.items():
        cell, cc = build_cell(
            parse_arm_id(arm),
            cell_tally,
            provenance.seeds,
            provenance.attempts,
            th,
            provenance.rates,
        )
        cells.append(cell)
        counts[arm] = cc
    kind = "reference-policy" if provenance.serving.kind == "reference" else "model"
    knobs = _knob_tables(cells, counts, th)
    return Artifact(
        kind=kind,
        model=provenance.model,
        stale=bool(moved),
        installed_generator_hash=installed["generator"],
        installed_engine_hash=installed["engine"],
        stale_hashes=moved,
        provenance=provenance,
        thresholds=th,
        cells=cells,
        knobs=knobs,
        controls=[c.arm_id for c in cells if c.control],
        run_totals=totals(tally.totals, provenance.rates),
        no_call_peak=peak,
        published_cards=sorted(p.name for p in published),
        statements=build_statements(kind, provenance, cells, knobs, installed, published, th),
        serving_observed=serving_observed(tally, provenance) if kind == "model" else None,
        first_request=first_request_pin(tally, provenance.arms, provenance.seeds),
        rate_limited=RateLimited(responses=tally.rate_limited, episodes=tally.rate_limited_episodes)
        if any(s.pacing is not None for s in provenance.sessions)
        else None,
    )


def serving_observed(tally: RunTally, provenance: Provenance) -> ServingObserved | None:
    """Fingerprints, estimated tokens and context overflows over every episode line (a model card
    only: a reference policy's fingerprint is a constant of the policy)."""
    fingerprints, overflows = tally.fingerprints, tally.overflows
    estimated, total = tally.estimated_tokens, tally.all_tokens
    return ServingObserved(
        responses=tally.responses,
        system_fingerprints=dict(sorted(fingerprints.items())) if fingerprints else None,
        responses_without_fingerprint=tally.without_fingerprint,
        estimated_tokens=estimated,
        estimated_share=round(estimated / total, 6) if total else None,
        context_overflow=sum(overflows.values()),
        context_overflow_by_arm=dict(sorted(overflows.items())),
        context_window=provenance.serving.context_window,
    )


# Called with (line number, the line's fields) for every episode line as the card's one pass
# reads it: how a reader that also needs the transcripts (poisson-tasks view) shares the pass.
LineObserver = Callable[[int, Mapping[str, Any]], None]


def _observed(
    stream: RecordStream, observe: LineObserver
) -> Iterator[tuple[int, Mapping[str, Any]]]:
    for number, doc in stream:
        observe(number, doc)
        yield number, doc


def _both(first: LineObserver, second: LineObserver) -> LineObserver:
    def observe(number: int, doc: Mapping[str, Any]) -> None:
        first(number, doc)
        second(number, doc)

    return observe


def _tallied(
    run: OpenRun, observe: LineObserver | None = None, replay: ReplaySide | None = None
) -> tuple[RunTally, RunHeader, RecordStream]:
    """One streamed pass over a run folder: every episode line read, checked against the
    header's plan and counted, the lines hashed on the way; no episode is kept (`observe` sees
    each line's fields before it is checked) but the replayed slots' lines `replay` keeps."""
    folder, header = run.path, run.header
    if header.replay is not None:  # the other kind of folder: say so, not that it is incomplete
        whole = folder.parent if folder.name == REPLAY and is_run_folder(folder.parent) else None
        raise RunFolderError(
            f"{folder} holds a replay ({header.replay.sample} of a run's scored slots run again), "
            "not a run: what came out the same is the Reproducibility section of the run's card: "
            + (
                f"poisson-tasks card {shlex.quote(str(whole))}"
                if whole
                else "card the run it came from"
            )
        )
    stream = run.stream()
    tally = RunTally(header.arms, header.seeds, header.attempts)
    add = tally.add
    if replay is not None:
        observe = replay.keep if observe is None else _both(observe, replay.keep)
    lines = stream if observe is None else _observed(stream, observe)
    for row in episode_rows(lines, header):
        add(row)
    return tally, header, stream


def _with_replay(artifact: Artifact, replay: ReplaySide | None, header: RunHeader) -> Artifact:
    """The card with its Reproducibility section when the run folder holds a replay."""
    if replay is None:
        return artifact
    measured = replay.measure(header, artifact.thresholds)
    return artifact.model_copy(update={"reproducibility": measured})


def _opened(folder: Path | str | OpenRun) -> OpenRun:
    return folder if isinstance(folder, OpenRun) else open_run(folder)


def artifact_from_run(
    folder: Path | str | OpenRun,
    thresholds: Thresholds | None = None,
    *,
    installed_generator_hash: str | None = None,
    installed_engine_hash: str | None = None,
    published: Sequence[PublishedFacts] | None = None,
) -> Artifact:
    """build_artifact(records_from_run(folder), provenance_from_run(folder)) in one streamed pass;
    a replay in the folder (RUN_DIR/replay/) adds the Reproducibility section. `folder` may be
    one open_run opened already (its header is then not read again)."""
    run = _opened(folder)
    replay = ReplaySide.open(run.path)
    tally, header, stream = _tallied(run, replay=replay)
    artifact = artifact_from_tally(
        tally,
        provenance_from_header(header, stream.sha256, stream.written),
        thresholds,
        installed_generator_hash=installed_generator_hash,
        installed_engine_hash=installed_engine_hash,
        published=published,
    )
    return _with_replay(artifact, replay, header)


def card_from_run(
    folder: Path | str | OpenRun,
    thresholds: Thresholds | None = None,
    *,
    installed_generator_hash: str | None = None,
    installed_engine_hash: str | None = None,
    published: Sequence[PublishedFacts] | None = None,
    observe: LineObserver | None = None,
) -> Artifact:
    """artifact_from_run, refusing a folder with no scored episode (a run stopped before its
    first, or only instrument failures) with CardRefusal: a card of nothing but "n/a" would read
    as a result. `observe`, when given, is called with each episode line as the pass reads it."""
    run = _opened(folder)
    replay = ReplaySide.open(run.path)
    tally, header, stream = _tallied(run, observe, replay)
    if not tally.scored:
        where = run.path if isinstance(folder, OpenRun) else folder
        raise CardRefusal(
            f"{where} holds no scored episode yet ({tally.totals.episodes} instrument failures): "
            f"nothing to card; run it first: poisson-tasks run --resume {shlex.quote(str(where))}"
        )
    artifact = artifact_from_tally(
        tally,
        provenance_from_header(header, stream.sha256, stream.written),
        thresholds,
        installed_generator_hash=installed_generator_hash,
        installed_engine_hash=installed_engine_hash,
        published=published,
    )
    return _with_replay(artifact, replay, header)
