"""Per-episode records: a finished run folder read into typed rows a card is computed from.

One record per episode line. Tokens follow the run folder's convention: `uncached_input_tokens`
is the uncached input (a line written before the field was named so has it as `prompt_tokens`),
`cached_input_tokens` the cached input, and `completion_tokens` already holds the reasoning
tokens, so an episode's tokens are uncached input + cached input + completion and nothing else.

Reading is one streamed pass (RecordStream): each complete line is hashed as it is read, parsed
with orjson, and only the fields a card reads are kept (the transcript is parsed but dropped). A
line in the runner's own form is checked field by field here, against the same types, keys and
outcome names as runfolder.EpisodeLine; any other line (a coerced value, an unknown key, invalid
JSON) goes through EpisodeLine itself, so it is read or refused exactly as pydantic would.
"""

from __future__ import annotations

import gzip
import hashlib
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import orjson
from pydantic import BaseModel, ConfigDict

from poisson_tasks.arms import Knob
from poisson_tasks.errors import RunFolderError
from poisson_tasks.files import lines_limited, open_regular, os_problem
from poisson_tasks.runfolder import (
    EPISODES,
    LINE_MAX_BYTES,
    USAGE_UNCACHED_KEYS,
    EpisodeLine,
    PlanSlots,
    RunHeader,
    Timing,
    Usage,
    read_header,
    uncached_input,
)
from poisson_tasks.verifier import INSTRUMENT_OUTCOMES, OUTCOMES, Outcome

EPISODES_GZ = EPISODES + ".gz"

__all__ = [
    "EPISODES_GZ",
    "EpisodeRecord",
    "EpisodeRow",
    "RecordStream",
    "episode_lines",
    "episode_rows",
    "records_from_lines",
    "records_from_run",
    "records_sha256",
]


def episode_tokens(prompt: int | None, cached: int | None, completion: int | None) -> int | None:
    """An episode's tokens by the run folder's convention (the module docstring); None unless both
    prompt and completion were reported."""
    if prompt is None or completion is None:
        return None
    return prompt + (cached or 0) + completion


@dataclass
class EpisodeRow:
    """One episode line as a card reads it: who, how it ended, what it cost, how long it took.

    The one table of an episode's fields (names, types, order). The streamed card holds these, one
    per line in flight; EpisodeRecord is the same fields validated, and takes them from here, so a
    new field is written once: here, and where _Plan.check reads it from the line.
    """

    arm_id: str
    knob: Knob
    level: int
    control: bool
    seed: int
    attempt: int
    task_id: str
    session: int
    resumed: bool
    outcome: Outcome
    instrument: bool
    strict_pass: bool
    leaky_pass: bool
    overshoot: bool
    tool_calls: int
    model_calls: int
    min_calls: int
    uncached_input_tokens: int | None
    cached_input_tokens: int | None
    completion_tokens: int | None
    reasoning_tokens: int | None
    provider_cost_usd: float | None
    episode_s: float | None
    model_s: float | None
    harness_s: float | None
    setup_s: float | None
    estimated_tokens: int | None
    context_overflow: bool
    system_fingerprints: list[str | None]
    malformed_clause: int | None
    text_calls: int
    text_call_dialects: list[str]
    first_request_tokens: int | None
    first_request_pinned_tokens: int | None
    rate_limited: int = 0  # the episode's failed responses that were 429 (transcript)

    @property
    def tokens(self) -> int | None:
        """Uncached + cached input + completion; None unless uncached input and completion were
        reported."""
        return episode_tokens(
            self.uncached_input_tokens, self.cached_input_tokens, self.completion_tokens
        )

    @property
    def no_tool_call(self) -> bool:
        return self.tool_calls == 0

    @property
    def stopped_short(self) -> bool:
        """At least one tool call but fewer than the task's minimum (disjoint from no tool call)."""
        return 0 < self.tool_calls < self.min_calls


class EpisodeRecord(BaseModel, EpisodeRow):
    """An EpisodeRow validated by pydantic and frozen: its fields are EpisodeRow's, inherited."""

    model_config = ConfigDict(frozen=True, extra="forbid")


def _lines(fh: BinaryIO) -> Iterator[tuple[int, bytes]]:
    """Complete lines with their numbers; a torn last line (a kill mid-write) is never read."""
    for number, raw in enumerate(lines_limited(fh, LINE_MAX_BYTES), start=1):
        if not raw.endswith(b"\n"):
            return
        yield number, raw


def _episodes_path(folder: Path) -> Path | None:
    plain, packed = folder / EPISODES, folder / EPISODES_GZ
    if plain.exists():
        return plain
    return packed if packed.exists() else None


def _open(path: Path) -> BinaryIO:
    """The episode lines' stream, from a regular file only (files.open_regular): a FIFO or a link
    to /dev/zero is refused at once; every line is then read within LINE_MAX_BYTES."""
    fh = open_regular(path)
    if path.name.endswith(".gz"):
        return gzip.GzipFile(fileobj=fh, mode="rb")  # type: ignore[return-value]
    return fh


_UNREADABLE = (OSError, EOFError, zlib.error)  # zlib.error: a damaged gzip stream


def _unreadable(path: Path, exc: BaseException) -> RunFolderError:
    reason = os_problem(exc) if isinstance(exc, OSError) and exc.strerror else str(exc)
    return RunFolderError(f"{path} cannot be read: {reason}")


def episode_lines(folder: Path) -> Iterator[tuple[int, EpisodeLine]]:
    """(line number, episode) for every complete line of episodes.jsonl or episodes.jsonl.gz."""
    path = _episodes_path(folder)
    if path is None:
        return
    try:
        with _open(path) as fh:
            for number, raw in _lines(fh):
                yield number, _episode_line(path, number, raw)
    except _UNREADABLE as exc:
        raise _unreadable(path, exc) from exc


def _episode_line(path: Path, number: int, raw: bytes) -> EpisodeLine:
    try:
        return EpisodeLine.model_validate_json(raw)
    except ValueError as exc:
        first = str(exc).splitlines()[0]
        raise RunFolderError(f"{path}:{number} is not an episode line: {first}") from exc


def records_sha256(folder: Path) -> str:
    """SHA-256 of the episode lines' bytes as read (uncompressed, complete lines only)."""
    hasher = hashlib.sha256()
    path = _episodes_path(folder)
    if path is not None:
        try:
            with _open(path) as fh:
                for _, raw in _lines(fh):
                    hasher.update(raw)
        except _UNREADABLE as exc:
            raise _unreadable(path, exc) from exc
    return hasher.hexdigest()


# ------------------------------------------------------------------ the streamed, checked reader

_NONE = type(None)
# The JSON types each field of EpisodeLine (and of its usage and timing) is read from unchanged:
# a value of another type is coerced or refused by pydantic, so its line goes to EpisodeLine.
LINE_TYPES: dict[str, frozenset[type]] = {
    "arm_id": frozenset({str}),
    "seed": frozenset({int}),
    "attempt": frozenset({int}),
    "task_id": frozenset({str}),
    "session": frozenset({int}),
    "resumed": frozenset({bool}),
    "outcome": frozenset({str}),
    "strict_label": frozenset({str}),
    "leaky_pass": frozenset({bool}),
    "passed": frozenset({bool}),
    "malformed_clause": frozenset({int, _NONE}),
    "min_calls": frozenset({int}),
    "tool_calls": frozenset({int}),
    "model_calls": frozenset({int}),
    "goal_stages": frozenset({list}),
    "usage": frozenset({dict}),
    "timing": frozenset({dict}),
    "system_fingerprints": frozenset({list}),
    "finish_reasons": frozenset({list}),
    "unparsed_text_calls": frozenset({int}),
    "context_overflow": frozenset({bool}),
    "error": frozenset({str, _NONE}),
    "transcript": frozenset({dict}),
}
USAGE_TYPES: dict[str, frozenset[type]] = {
    name: frozenset({float if name == "provider_cost_usd" else int, _NONE})
    for name in (*Usage.model_fields, *USAGE_UNCACHED_KEYS)
}
TIMING_TYPES: dict[str, frozenset[type]] = {
    name: frozenset({float, _NONE}) for name in Timing.model_fields
}
_REQUIRED = frozenset(
    name for name, field in EpisodeLine.model_fields.items() if field.is_required()
)
_OUTCOME_NAMES = frozenset(OUTCOMES)
_INTS = frozenset({int})
_STRS = frozenset({str})
_FINGERPRINTS = frozenset({str, _NONE})
_NOTHING: Mapping[str, Any] = {}
_EMPTY: list[Any] = []
_SHAPES_KEPT = 256  # distinct key-and-type layouts remembered (a runner writes one or two)
_SHAPES: dict[tuple[tuple[Any, ...], ...], bool] = {}


def _fields_ok(
    names: tuple[str, ...], kinds: tuple[type, ...], types: Mapping[str, frozenset[type]]
) -> bool:
    return all(
        name in types and kind in types[name] for name, kind in zip(names, kinds, strict=True)
    )


def _plain(doc: Any) -> bool:
    """Whether an orjson-parsed line is an EpisodeLine exactly as the runner writes one: every key
    known, every required key there, every value of its field's own JSON type and every outcome a
    known one (so pydantic would read it unchanged). A line that is not plain is not necessarily
    bad: it goes to EpisodeLine, which reads or refuses it. The keys and value types of a line
    (with its usage and timing) are judged once per layout: a runner writes one or two."""
    if type(doc) is not dict:
        return False
    get = doc.get
    usage = get("usage", _NOTHING)
    timing = get("timing", _NOTHING)
    if type(usage) is not dict or type(timing) is not dict:
        return False
    shape = (
        tuple(doc),
        tuple(map(type, doc.values())),
        tuple(usage),
        tuple(map(type, usage.values())),
        tuple(timing),
        tuple(map(type, timing.values())),
    )
    ok = _SHAPES.get(shape)
    if ok is None:
        ok = (
            doc.keys() >= _REQUIRED
            and _fields_ok(shape[0], shape[1], LINE_TYPES)
            and _fields_ok(shape[2], shape[3], USAGE_TYPES)
            and _fields_ok(shape[4], shape[5], TIMING_TYPES)
        )
        if len(_SHAPES) < _SHAPES_KEPT:
            _SHAPES[shape] = ok
    if not ok:
        return False
    stages = get("goal_stages", _EMPTY)
    reasons = get("finish_reasons", _EMPTY)
    fingerprints = get("system_fingerprints", _EMPTY)
    return (
        doc["outcome"] in _OUTCOME_NAMES
        and doc["strict_label"] in _OUTCOME_NAMES
        and (not stages or set(map(type, stages)) <= _INTS)
        and (not reasons or set(map(type, reasons)) <= _STRS)
        and (not fingerprints or set(map(type, fingerprints)) <= _FINGERPRINTS)
    )


class RecordStream:
    """One pass over a run folder's episode lines (episodes.jsonl, or episodes.jsonl.gz).

    Iterating yields (line number, fields) for every complete line, each hashed as it is read;
    the fields are EpisodeLine's, as a plain dict (usage and timing as dicts, absent optional
    keys left absent). Once the pass is over, `sha256` is records_sha256's digest of the same
    bytes and `written` counts the lines of each session. A line that is not an episode line is
    refused with the same RunFolderError as episode_lines gives.
    """

    def __init__(self, folder: Path) -> None:
        self.path = _episodes_path(folder)
        self.written: dict[int, int] = {}
        self.read_by_pydantic = 0  # lines not in the runner's own form (coerced, or refused)
        self._hasher = hashlib.sha256()

    @property
    def sha256(self) -> str:
        return self._hasher.hexdigest()

    def __iter__(self) -> Iterator[tuple[int, Mapping[str, Any]]]:
        path = self.path
        if path is None:
            return
        update, written = self._hasher.update, self.written
        try:
            with _open(path) as fh:
                for number, raw in enumerate(lines_limited(fh, LINE_MAX_BYTES), start=1):
                    if not raw.endswith(b"\n"):
                        break  # a torn last line (a kill mid-write) is never read
                    update(raw)
                    try:
                        doc = orjson.loads(raw)
                    except orjson.JSONDecodeError:
                        doc = None
                    if not _plain(doc):
                        self.read_by_pydantic += 1
                        doc = _episode_line(path, number, raw).model_dump()
                    session = doc["session"]
                    written[session] = written.get(session, 0) + 1
                    yield number, doc
        except _UNREADABLE as exc:
            raise _unreadable(path, exc) from exc


def _dialects(transcript: Any) -> list[str]:
    """The dialects the runner named for the episode's text calls (its transcript's
    `text_call_dialects`); empty where the harness recorded none."""
    named = transcript.get("text_call_dialects") if type(transcript) is dict else None
    if type(named) is not list:
        return _EMPTY_DIALECTS
    return [dialect for dialect in named if type(dialect) is str]


_EMPTY_DIALECTS: list[str] = []


def _rate_limited(transcript: Any) -> int:
    """How many of the episode's failed responses were 429 (its transcript's
    `failed_responses`); 0 where the harness recorded none."""
    failed = transcript.get("failed_responses") if type(transcript) is dict else None
    if type(failed) is not list or not failed:
        return 0
    return sum(1 for f in failed if type(f) is dict and f.get("status") == 429)


class _Plan(PlanSlots):
    """The header's plan (runfolder.PlanSlots, the check `run --resume` runs too), each checked
    line made a row."""

    def check(self, source: str, number: int, doc: Mapping[str, Any]) -> EpisodeRow:
        """One checked row; a line outside the header's plan, or a second scored line for one
        attempt, is a damaged folder (named `source:number` in the error)."""
        arm, seed, attempt = doc["arm_id"], doc["seed"], doc["attempt"]
        outcome, label = doc["outcome"], doc["strict_label"]
        spec = self.check_slot(source, number, arm, seed, attempt, doc["min_calls"], outcome)
        instrument = outcome in INSTRUMENT_OUTCOMES
        usage = doc.get("usage", _NOTHING)
        timing = doc.get("timing", _NOTHING)
        transcript = doc.get("transcript", _NOTHING)
        return EpisodeRow(
            arm_id=arm,
            knob=spec.knob,
            level=spec.level,
            control=spec.is_control,
            seed=seed,
            attempt=attempt,
            task_id=doc["task_id"],
            session=doc["session"],
            resumed=doc["resumed"],
            outcome=outcome,
            instrument=instrument,
            strict_pass=not instrument and label == "passed",
            leaky_pass=not instrument and doc["leaky_pass"],
            # the card's overshoot: reached every goal, then carried a record past it
            overshoot=not instrument and label == "overshoot" and doc["leaky_pass"],
            tool_calls=doc["tool_calls"],
            model_calls=doc["model_calls"],
            min_calls=doc["min_calls"],
            uncached_input_tokens=uncached_input(usage),
            cached_input_tokens=usage.get("cached_input_tokens"),
            completion_tokens=usage.get("completion_tokens"),
            reasoning_tokens=usage.get("reasoning_tokens"),
            provider_cost_usd=usage.get("provider_cost_usd"),
            episode_s=timing.get("episode_s"),
            model_s=timing.get("model_s"),
            harness_s=timing.get("harness_s"),
            setup_s=timing.get("setup_s"),
            estimated_tokens=usage.get("estimated_tokens"),
            context_overflow=doc.get("context_overflow", False),
            system_fingerprints=doc.get("system_fingerprints", []),
            malformed_clause=doc.get("malformed_clause"),
            text_calls=doc.get("unparsed_text_calls", 0),
            text_call_dialects=_dialects(transcript),
            first_request_tokens=usage.get("first_request_tokens"),
            first_request_pinned_tokens=usage.get("first_request_pinned_tokens"),
            rate_limited=_rate_limited(transcript),
        )


def episode_rows(
    lines: Iterable[tuple[int, Mapping[str, Any]]], header: RunHeader, source: str = EPISODES
) -> Iterator[EpisodeRow]:
    """Checked rows in file order from (line number, EpisodeLine fields); an attempt scored
    twice (not an instrument retry) is refused, and so is a line outside the header's plan."""
    plan = _Plan(header)
    for number, doc in lines:
        yield plan.check(source, number, doc)


def records_from_lines(
    lines: Iterable[tuple[int, EpisodeLine]], header: RunHeader, source: str = EPISODES
) -> list[EpisodeRecord]:
    """Records in file order; an attempt scored twice (not an instrument retry) is refused."""
    fields = ((number, line.model_dump()) for number, line in lines)
    return [EpisodeRecord.model_validate(vars(row)) for row in episode_rows(fields, header, source)]


def records_from_run(folder: Path | str) -> list[EpisodeRecord]:
    """Every episode of a run folder as a typed record, checked against the header's plan."""
    path = Path(folder)
    header = read_header(path)
    rows = episode_rows(RecordStream(path), header)
    return [EpisodeRecord.model_validate(vars(row)) for row in rows]
