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

    __slots__ = ("_block", "_buffer", "_key")

    def __init__(self, *parts: object) -> None:
        self._key = "|".join(str(p) for p in parts).encode()
        self._block = 0
        self._buffer: list[int] = []

    def _next(self) -> int:
        """The next 64-bit value: SHAKE-256 of (key, block number), 64 values a block, in order."""
        if not self._buffer:
            self._block += 1
            raw = hashlib.shake_256(self._key + b"#" + str(self._block).encode()).digest(512)
            self._buffer = [int.from_bytes(raw[i : i + 8], "big") for i in range(504, -8, -8)]
        return self._buffer.pop()

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
        """n lowercase hex digits."""
        out = ""
        while len(out) < n:
            out += f"{self._next():016x}"
        return out[:n]
