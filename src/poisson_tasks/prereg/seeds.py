"""The seed list a design derives (never typed in) and its hash; the rule is in the package
docstring."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from poisson_tasks.bundle import canonical_json

RANGE_SEEDS = "range"
SEED_MODULUS = 2**31


def derive_seeds(seed_string: str, tasks: int) -> list[int]:
    """The seed list a seed string gives (see the module docstring for the rule)."""
    if seed_string == RANGE_SEEDS:
        return list(range(tasks))
    out: list[int] = []
    seen: set[int] = set()
    index = 0
    while len(out) < tasks:
        hashed = hashlib.sha256(f"{seed_string}|{index}".encode()).digest()
        seed = int.from_bytes(hashed[:8], "big") % SEED_MODULUS
        if seed not in seen:
            seen.add(seed)
            out.append(seed)
        index += 1
    return out


def seed_list_hash(seeds: Sequence[int]) -> str:
    """sha256 of the seed list's canonical JSON."""
    return hashlib.sha256(canonical_json(list(seeds))).hexdigest()
