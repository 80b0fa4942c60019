"""The streamed record reader (RecordStream) against EpisodeLine: the same records, hash, session
counts and refusals, and a card whose memory does not grow with what its lines carry."""

from __future__ import annotations

import json
import tracemalloc
from collections import Counter
from dataclasses import fields
from pathlib import Path
from typing import Any, get_type_hints

import pytest
from pydantic import ValidationError
from synthetic_runs import FAKE_ENGINE_HASH, header, line, write_run

from poisson_tasks.calibration import card_from_run, provenance_from_run, records_from_run
from poisson_tasks.calibration.records import (
    EpisodeRecord,
    EpisodeRow,
    RecordStream,
    episode_lines,
    episode_rows,
    records_from_lines,
    records_sha256,
)
from poisson_tasks.errors import RunFolderError
from poisson_tasks.runfolder import EPISODES, EpisodeLine, read_header
from poisson_tasks.runfolder.episodes import LINE_TYPES

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT / "calibration"
ARMS = ["depth:d1", "depth:d3"]


def _through_episode_line(folder: Path) -> list[Any]:
    """The records as reading every line through EpisodeLine gives them (the reference)."""
    return records_from_lines(episode_lines(folder), read_header(folder))


def _exhausted(folder: Path) -> RecordStream:
    stream = RecordStream(folder)
    for _ in stream:
        pass
    return stream


def test_every_field_of_an_episode_line_has_its_json_types() -> None:
    assert set(LINE_TYPES) == set(EpisodeLine.model_fields)


def test_a_published_run_reads_as_episode_line_reads_it_without_pydantic() -> None:
    folder = PUBLISHED / "reference-noisy"  # episodes.jsonl.gz, as the runner wrote them
    reference = _through_episode_line(folder)
    assert records_from_run(folder) == reference
    stream = _exhausted(folder)
    assert stream.read_by_pydantic == 0  # every line took the fast path
    assert stream.sha256 == records_sha256(folder)
    assert stream.written == dict(Counter(r.session for r in reference))


def _edited(tmp_path: Path, edit: Any) -> Path:
    """A two-line run whose second line is the first one's JSON after `edit`."""
    folder = write_run(
        tmp_path, header(ARMS, [0], 2), [line("depth:d1", 0, 0), line("depth:d3", 0, 1)]
    )
    raw = (folder / EPISODES).read_bytes().splitlines(keepends=True)
    doc = json.loads(raw[1])
    edited = edit(doc)
    text = edited if isinstance(edited, str) else json.dumps(doc)
    (folder / EPISODES).write_bytes(raw[0] + text.encode() + b"\n")
    return folder


def _set(path: str, value: Any) -> Any:
    def edit(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        for name in parents:
            doc = doc[name]
        doc[last] = value

    return edit


def _drop(*names: str) -> Any:
    def edit(doc: dict[str, Any]) -> None:
        for name in names:
            del doc[name]

    return edit


@pytest.mark.parametrize(
    "edit",
    [
        _set("timing.episode_s", 2),  # an integer where a float goes: pydantic makes it 2.0
        _set("usage.provider_cost_usd", 0),
        _set("timing.model_s", 1.5),
        _drop("transcript", "usage", "timing", "goal_stages", "system_fingerprints"),
        lambda doc: json.dumps(dict(reversed(doc.items()))),  # another key order
        _set("system_fingerprints", ["fp-1", None]),
        _set("resumed", 1),  # lax: pydantic reads 1 as True
    ],
)
def test_a_line_in_another_form_reads_as_episode_line_reads_it(tmp_path: Path, edit: Any) -> None:
    folder = _edited(tmp_path, edit)
    assert records_from_run(folder) == _through_episode_line(folder)
    assert provenance_from_run(folder).records_sha256 == records_sha256(folder)


@pytest.mark.parametrize(
    "edit",
    [
        _set("surprise", 1),  # an unknown key
        _set("seed", 1.5),
        _set("outcome", "won"),
        _set("goal_stages", ["a"]),
        _set("usage.prompt_tokens", "many"),
        _set("usage.surprise", 1),
        _set("system_fingerprints", [1]),
        _set("transcript", []),
        _drop("task_id"),
        lambda doc: '{"arm_id": "depth:d3", "seed": 0,',  # cut short, with its newline
        lambda doc: "[]",
    ],
)
def test_a_bad_line_is_refused_with_episode_lines_message(tmp_path: Path, edit: Any) -> None:
    folder = _edited(tmp_path, edit)
    with pytest.raises(RunFolderError) as reference:
        _through_episode_line(folder)
    assert ":2 is not an episode line: " in str(reference.value)
    for read in (records_from_run, provenance_from_run, card_from_run):
        with pytest.raises(RunFolderError) as streamed:
            read(folder)
        assert str(streamed.value) == str(reference.value)


def _peak_bytes(tasks: int, tmp_path: Path) -> int:
    """Peak traced memory of card_from_run on a run of `tasks` seeds x 2 arms x 2 attempts whose
    lines each carry a 2 KB transcript."""
    seeds = list(range(tasks))
    transcript = {"messages": ["x" * 2_000]}
    lines = [
        line(arm, seed, attempt, transcript=transcript)
        for arm in ARMS
        for seed in seeds
        for attempt in (0, 1)
    ]
    folder = write_run(tmp_path / str(tasks), header(ARMS, seeds, 2), lines)
    card_from_run(
        folder,
        installed_generator_hash="f" * 64,
        installed_engine_hash=FAKE_ENGINE_HASH,
        published=[],
    )  # warm: imports, caches
    tracemalloc.start()
    try:
        card_from_run(
            folder,
            installed_generator_hash="f" * 64,
            installed_engine_hash=FAKE_ENGINE_HASH,
            published=[],
        )
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_cards_memory_does_not_grow_with_its_episodes(tmp_path: Path) -> None:
    small, large = _peak_bytes(50, tmp_path), _peak_bytes(300, tmp_path)
    per_episode = (large - small) / (4 * 250)
    # Held per episode: a few numbers for the medians (measured: about 170 bytes), never the
    # line nor a typed record (measured: about 3,400 bytes when every record was kept).
    assert per_episode < 400, (small, large, per_episode)


def test_the_record_is_the_streamed_row_validated() -> None:
    """EpisodeRecord declares no field of its own: it takes EpisodeRow's (one table: names, order,
    types), and a record is the row it was read from, validated by pydantic and frozen."""
    assert not vars(EpisodeRecord).get("__annotations__")
    table = get_type_hints(EpisodeRow)
    assert [field.name for field in fields(EpisodeRow)] == list(EpisodeRecord.model_fields)
    assert {name: field.annotation for name, field in EpisodeRecord.model_fields.items()} == {
        field.name: table[field.name] for field in fields(EpisodeRow)
    }
    folder = PUBLISHED / "reference-noisy"
    row = next(episode_rows(RecordStream(folder), read_header(folder)))
    record = EpisodeRecord.model_validate(vars(row))
    assert isinstance(record, EpisodeRow)
    assert record.model_dump() == vars(row)
    assert (record.tokens, record.no_tool_call) == (row.tokens, row.no_tool_call)
    with pytest.raises(ValidationError, match="seed"):
        EpisodeRecord.model_validate({**vars(row), "seed": "zero"})
    with pytest.raises(ValidationError, match="frozen"):
        record.seed = 1  # type: ignore[misc]
