"""Counter-based random draws keyed by a purpose string: the only source of randomness in the generator.

Every value is a SHA-256 of (key, counter), so the same key gives the same draws in every process,
platform and Python version; nothing reads Python's hash(), set order or the global random.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


class Draws:
    """A stream of draws for one purpose, e.g. Draws("scenario", "eval", 7)."""

    __slots__ = ("_counter", "_key")

    def __init__(self, *parts: object) -> None:
        self._key = "|".join(str(p) for p in parts).encode()
        self._counter = 0

    def _next(self) -> int:
        self._counter += 1
        digest = hashlib.sha256(self._key + b"#" + str(self._counter).encode()).digest()
        return int.from_bytes(digest[:8], "big")

    def below(self, n: int) -> int:
        """A uniform integer in [0, n), by rejection so no value is favoured."""
        if n <= 0:
            raise ValueError("n must be positive")
        limit = (1 << 64) - ((1 << 64) % n)
        while True:
            x = self._next()
            if x < limit:
                return x % n

    def choice(self, items: Sequence[T]) -> T:
        return items[self.below(len(items))]

    def sample(self, items: Sequence[T], k: int) -> list[T]:
        """k distinct items, in draw order."""
        pool = list(items)
        return [pool.pop(self.below(len(pool))) for _ in range(k)]

    def shuffled(self, items: Sequence[T]) -> list[T]:
        return self.sample(items, len(items))

    def hex(self, n: int) -> str:
        out = ""
        while len(out) < n:
            self._counter += 1
            out += hashlib.sha256(self._key + b"#" + str(self._counter).encode()).hexdigest()
        return out[:n]
