"""episodes.jsonl: the one reader of a run folder's episode lines (writer.py appends them).

Every command reads the lines here: `episode_lines` (parsed, plain or gzip-packed, line
numbers kept), `iter_episodes` (the runner's own file, on resume) and `RecordStream` (the card's
one streamed pass: each complete line is hashed as it is read, parsed with orjson, and a line in
the runner's own form is checked field by field against EpisodeLine's types, keys and outcome
names; any other line, a coerced value, an unknown key, invalid JSON, goes through EpisodeLine
itself, so it is read or refused exactly as pydantic would). A torn last line (a kill mid-write)
is never read; every line is read within LINE_MAX_BYTES from a regular file only.
"""

from __future__ import annotations

import gzip
import hashlib
import zlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from poisson_tasks.errors import RunFolderError
from poisson_tasks.files import lines_limited, open_regular, os_problem
from poisson_tasks.runfolder.schema import (
    EPISODES,
    EPISODES_GZ,
    LINE_MAX_BYTES,
    USAGE_UNCACHED_KEYS,
    EpisodeLine,
    Timing,
    Usage,
)
from poisson_tasks.verifier import OUTCOMES


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
    if path is not None:
        yield from _parsed(path)


def iter_episodes(folder: Path) -> Iterator[EpisodeLine]:
    """Every complete line of the episodes.jsonl a run appends to (the writer's own reading, on
    resume); anything but a file there is refused, never waited on."""
    path = folder / EPISODES
    if not path.exists():
        return
    if not path.is_file():
        raise RunFolderError(f"{path} is not a file: a run folder's {EPISODES} holds episode lines")
    for _, line in _parsed(path):
        yield line


def _parsed(path: Path) -> Iterator[tuple[int, EpisodeLine]]:
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


# ------------------------------------------------------------------ the card's streamed, checked pass

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
