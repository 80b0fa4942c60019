"""JSON that another program sent (a server's answer, a model's tool-call arguments), read within
bounds: nested at most MAX_DEPTH levels, and a lone surrogate escape read as U+FFFD.

Everything downstream of a parsed answer (the key scrubber, the episode line's serializer, the
card's and the view's readers) walks it level by level, and each has a limit of its own (orjson
writes at most 254 levels, pydantic a few hundred, Python's recursion 1,000). A value past them
ended a run in an internal error, so the depth is checked once where the value enters, here, and a
value nested deeper is refused as `TooDeep` (a ValueError, as a body that is not JSON is).
docs/commands.md ("Responses a server sends") says what a refused answer becomes.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

__all__ = ["MAX_DEPTH", "TooDeep", "depth_exceeds", "loads"]

# The deepest JSON a server may send: a chat completion nests about eight levels down to a tool
# call's arguments, and a user's own tool schemas at most eight more (owntools.MAX_DEPTH).
MAX_DEPTH = 64


class TooDeep(ValueError):
    """JSON nested deeper than the bound it is read within."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"JSON nested deeper than {limit} levels")
        self.limit = limit


def depth_exceeds(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether a parsed JSON value nests lists and objects more than `limit` levels deep (a
    scalar is 0 levels, `[]` one). Iterative, and it stops at the first level past the limit."""
    if not isinstance(value, dict | list):
        return False
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, level = stack.pop()
        children = node.values() if isinstance(node, dict) else node
        if level > limit:
            return True
        stack.extend((child, level + 1) for child in children if isinstance(child, dict | list))
    return False


def _could_exceed(text: bytes | str, limit: int) -> bool:
    """Whether `text` has more opening brackets than `limit` (else it cannot nest deeper): one
    count in C, which spares nearly every answer the walk."""
    if isinstance(text, bytes):
        return text.count(b"[") + text.count(b"{") > limit
    return text.count("[") + text.count("{") > limit


def _clean_surrogates(obj: Any) -> Any:
    """Lone surrogates (a JSON escape like \\ud800 with no pair) become U+FFFD, so they can be kept."""
    if isinstance(obj, str):
        return obj.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(obj, dict):
        return {_clean_surrogates(k): _clean_surrogates(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_clean_surrogates(v) for v in obj]
    return obj


def loads(text: bytes | str, limit: int = MAX_DEPTH) -> Any:
    """`text` parsed as orjson reads it, refused (TooDeep) when nested deeper than `limit`; a
    text orjson refuses only for a lone surrogate escape is read by the standard library and its
    lone surrogates replaced. Raises ValueError when it is not JSON."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        if "depth" in str(exc) or "recursion" in str(exc):  # orjson stops at 1,024 levels
            raise TooDeep(limit) from None
        raw = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
        try:
            value = json.loads(raw)
        except RecursionError:
            raise TooDeep(limit) from None
        if _could_exceed(text, limit) and depth_exceeds(value, limit):
            raise TooDeep(limit) from None
        return _clean_surrogates(value)
    if _could_exceed(text, limit) and depth_exceeds(value, limit):
        raise TooDeep(limit)
    return value
