"""The scenario: every seed-drawn field of a task, drawn from (split, seed) alone.

Two arms of one knob at one seed share their scenario byte for byte; that is pin-ledger row N1.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import lru_cache

from poisson_tasks.bundle import digest
from poisson_tasks.domain.vocabulary import (
    CLASSES,
    EVAL_WORDS,
    EXTRA_FIELDS,
    LADDER,
    READ_NOUNS,
    READ_VERBS,
    TRAIN_WORDS,
)
from poisson_tasks.errors import SeedError
from poisson_tasks.generator.draw import Draws

READ_NAMES: tuple[str, ...] = tuple(f"{v}_{n}" for v in READ_VERBS for n in READ_NOUNS)
STAGE_NAMES: tuple[str, ...] = tuple(f"{s}_{c}" for s in LADDER for c in CLASSES)
ENTRY_CODE_HEX = 12
_ID_SPACE = 256 * 256
_ID_MULT = 40503  # odd, so seed -> index is a bijection modulo 65536


def record_id(words: tuple[str, ...], index: int) -> str:
    """An injective record id from an index: two words, then a round number past 65,535."""
    k = (index * _ID_MULT + 12345) % _ID_SPACE
    base = f"{words[k >> 8]}-{words[k & 255]}"
    return base if index < _ID_SPACE else f"{base}-{index // _ID_SPACE}"


@dataclass(frozen=True, slots=True)
class Scenario:
    """Seed-drawn material every knob builds on; knob modules add only level-dependent parts."""

    split: str
    seed: int
    cls: str
    record_id: str
    sibling_id: str
    peer_ids: tuple[str, ...]
    entry_code: str
    sibling_code: str
    peer_codes: tuple[str, ...]
    key: str
    reads: tuple[str, ...]
    other_classes: tuple[str, ...]
    layout: tuple[int, ...]
    extra_values: tuple[str, ...]
    queries: tuple[str, ...]
    ledger_number: int

    def digest(self) -> str:
        return digest(asdict(self))


MAX_SEED = 2**63 - 1  # seeds are written as JSON integers; wider ones do not fit a signed int64


def check_seed(seed: object) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise SeedError(f"seed must be a non-negative integer, got {type(seed).__name__}")
    if not 0 <= seed <= MAX_SEED:
        shown = str(seed) if seed.bit_length() <= 64 else f"a {seed.bit_length()}-bit integer"
        raise SeedError(
            f"seed must be a non-negative integer up to {MAX_SEED} (2^63 - 1), got {shown}"
        )
    return seed


@lru_cache(maxsize=1024)
def draw_scenario(split: str, seed: int) -> Scenario:
    """Draw the scenario of task `seed` in `split`; eval and train use disjoint record-id words."""
    check_seed(seed)
    words = EVAL_WORDS if split == "eval" else TRAIN_WORDS
    d = Draws("scenario", split, seed)
    rid = record_id(words, seed)
    w = rid.split("-")
    # Bystander records reuse the task's own words so no two tasks' ids collide by construction.
    sibling = f"{w[1]}-{w[0]}" if w[0] != w[1] else f"{w[0]}-{words[(words.index(w[1]) + 1) % 256]}"
    peers = tuple(f"{sibling}-{i + 2}" for i in range(3))
    cls = d.choice(CLASSES)
    values = tuple(f"{f.split('_')[0][:2].upper()}-{d.below(9000) + 1000}" for f in EXTRA_FIELDS)
    return Scenario(
        split=split,
        seed=seed,
        cls=cls,
        record_id=rid,
        sibling_id=sibling,
        peer_ids=peers,
        entry_code=d.hex(ENTRY_CODE_HEX),
        sibling_code=d.hex(ENTRY_CODE_HEX),
        peer_codes=tuple(d.hex(ENTRY_CODE_HEX) for _ in peers),
        key=d.hex(32),
        reads=tuple(d.shuffled(READ_NAMES)),
        other_classes=tuple(d.shuffled([c for c in CLASSES if c != cls])),
        layout=tuple(d.shuffled(range(16))),
        extra_values=values,
        queries=tuple(d.hex(32) for _ in range(64)),
        ledger_number=1000 + d.below(9000),
    )
