"""The few facts serve-local reads from a GGUF file's metadata before the model loads.

A GGUF file opens with a header (magic `GGUF`, version, tensor count, key-value count) and its
metadata as typed key-value pairs (ggml's gguf format, versions 2 and 3, little-endian). Only the
metadata is read, never the tensors: the model's architecture, name and base name, its own chat template
(`tokenizer.chat_template`, absent from many files) and its vocabulary (`tokenizer.ggml.tokens`),
which says whether a chat template's turn markers are tokens this model knows.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

from poisson_tasks.errors import LocalServeError

MAGIC = b"GGUF"
VERSIONS = (2, 3)
ARCHITECTURE = "general.architecture"
NAME = "general.name"
BASENAME = "general.basename"
CHAT_TEMPLATE = "tokenizer.chat_template"
TOKENS = "tokenizer.ggml.tokens"

# value type -> struct format of one fixed-size item (gguf_type in ggml's gguf.h)
_FIXED = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9
_U64 = struct.Struct("<Q")
_MAX_KEYS = 1 << 16  # a real file has tens; more means the header is not a GGUF header


@dataclass(frozen=True, slots=True)
class GgufMetadata:
    """What serve-local needs from a GGUF's metadata; None where the file does not say."""

    architecture: str | None
    name: str | None
    chat_template: str | None
    tokens: frozenset[str]
    basename: str | None = None


class _Truncated(Exception):
    """The file ended (or named a size past its end) inside the metadata."""


class _Reader:
    """Little-endian reads from a GGUF file mapped in memory, each checked against its size."""

    def __init__(self, data: mmap.mmap) -> None:
        self.data = data
        self.at = 0

    def take(self, count: int) -> bytes:
        end = self.at + count
        if count < 0 or end > len(self.data):
            raise _Truncated
        chunk = self.data[self.at : end]
        self.at = end
        return chunk

    def skip(self, count: int) -> None:
        if count < 0 or self.at + count > len(self.data):
            raise _Truncated
        self.at += count

    def fixed(self, fmt: str) -> int | float | bool:
        value: int | float | bool = struct.unpack("<" + fmt, self.take(struct.calcsize(fmt)))[0]
        return value

    def count(self) -> int:
        return int(self.fixed("Q"))

    def string(self) -> str:
        return self.take(self.count()).decode("utf-8", errors="replace")

    def skip_string(self) -> None:
        self.skip(self.count())

    def strings(self, length: int, keep: bool) -> list[str] | None:
        """An array of strings (a vocabulary has 10^4 to 10^5): one tight loop, no calls."""
        data, at, end, unpack = self.data, self.at, len(self.data), _U64.unpack_from
        out: list[str] = []
        for _ in range(length):
            if at + 8 > end:
                raise _Truncated
            (size,) = unpack(data, at)
            at += 8
            if keep:
                out.append(data[at : at + size].decode("utf-8", errors="replace"))
            at += size
        if at > end:
            raise _Truncated
        self.at = at
        return out if keep else None


def _value(reader: _Reader, kind: int, keep: bool) -> object:
    """One value of a given type; strings and string arrays only when `keep` (else skipped)."""
    if kind in _FIXED:
        return reader.fixed(_FIXED[kind])
    if kind == _STRING:
        if keep:
            return reader.string()
        reader.skip_string()
        return None
    if kind == _ARRAY:
        item, length = int(reader.fixed("I")), reader.count()
        if item in _FIXED:
            reader.skip(length * struct.calcsize(_FIXED[item]))
            return None
        if item == _STRING:
            return reader.strings(length, keep)
        if item == _ARRAY:  # nested arrays: read (and drop) each
            for _ in range(length):
                _value(reader, _ARRAY, False)
            return None
    raise _Truncated


def read_gguf_metadata(path: Path) -> GgufMetadata:
    """The architecture, names, chat template and vocabulary of a GGUF file, from its metadata."""
    wanted = {ARCHITECTURE, NAME, BASENAME, CHAT_TEMPLATE, TOKENS}
    found: dict[str, object] = {}
    fix = "give the path of a .gguf model file"
    try:
        with (
            path.open("rb") as stream,
            mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ) as data,
        ):
            reader = _Reader(data)
            if reader.take(4) != MAGIC:
                raise LocalServeError(
                    f"{path}: not a GGUF file (it does not start with GGUF); {fix}"
                )
            version = int(reader.fixed("I"))
            if version not in VERSIONS:
                raise LocalServeError(
                    f"{path}: GGUF version {version} is not one llama.cpp reads "
                    f"({', '.join(map(str, VERSIONS))}); convert the model again with llama.cpp"
                )
            reader.count()  # tensors: not read
            keys = reader.count()
            if keys > _MAX_KEYS:
                raise _Truncated
            for _ in range(keys):
                key = reader.string()
                kind = int(reader.fixed("I"))
                value = _value(reader, kind, key in wanted)
                if key in wanted:
                    found[key] = value
    except _Truncated:
        raise LocalServeError(f"{path}: its GGUF metadata is cut short or damaged; {fix}") from None
    except (OSError, ValueError, struct.error) as exc:  # ValueError: mmap of an empty file
        raise LocalServeError(f"{path}: cannot be read as a GGUF file ({exc}); {fix}") from None
    tokens = found.get(TOKENS)
    return GgufMetadata(
        architecture=_text(found.get(ARCHITECTURE)),
        name=_text(found.get(NAME)),
        chat_template=_text(found.get(CHAT_TEMPLATE)),
        tokens=frozenset(t for t in tokens if isinstance(t, str))
        if isinstance(tokens, list)
        else frozenset(),
        basename=_text(found.get(BASENAME)),
    )


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
