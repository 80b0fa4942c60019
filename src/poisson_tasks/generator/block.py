"""Block: how many tools are offered (k8 ... k64, any K in 8..258), and kL+len(kH).

Exactly K tools (N27): the two right stage tools sit in the first two slots of the scenario's
layout that fall inside the first eight (N28), the same slots at every K; every other slot, in
slot order, holds the next read of sc.reads (256 names, so K=258 uses them all). The smaller
block is therefore a prefix of every larger one. The control kL+len(kH) is kL's block with a
system-prompt filler whose tokens, counted alone, equal the extra block tokens of kH over kL
within two (N29), or the generator refuses with GeneratorFault.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from poisson_tasks.arms import ArmSpec
from poisson_tasks.domain.ledger import ToolBinding
from poisson_tasks.generator.draft import (
    Draft,
    base_task,
    check_band,
)
from poisson_tasks.generator.prompts import exact_filler
from poisson_tasks.generator.scenario import Scenario
from poisson_tasks.generator.tools import block_tokens, read_tool, stage_tool
from poisson_tasks.tokens import count_tokens

FIRST = 8  # the right tools sit inside the first eight slots at every size


def right_slots(sc: Scenario) -> tuple[int, int]:
    """The slots of the two right tools: the first two layout entries inside the first eight."""
    inside = [s for s in sc.layout if s < FIRST]
    return inside[0], inside[1]


def sized_block(sc: Scenario, size: int) -> tuple[list[ToolBinding], dict[int, ToolBinding]]:
    """A block of exactly `size` tools: right tools in right_slots, reads in every other slot."""
    right = {s: stage_tool(sc.cls, s) for s in (1, 2)}
    first, second = right_slots(sc)
    reads = iter(sc.reads)
    block = [
        right[1] if i == first else right[2] if i == second else read_tool(next(reads))
        for i in range(size)
    ]
    return block, right


@lru_cache(maxsize=1024)
def control_filler(sc: Scenario, size: int, higher: int) -> str:
    """The control's system filler: as many tokens as the `higher` block adds over `size`'s."""
    extra = block_tokens(sized_block(sc, higher)[0]) - block_tokens(sized_block(sc, size)[0])
    fill = exact_filler(extra)
    what = f"block k{size}+len(k{higher}) seed {sc.seed}: system filler"
    check_band(what, count_tokens(fill), extra)
    return fill


def build(spec: ArmSpec, sc: Scenario) -> Draft:
    block, right = sized_block(sc, spec.level)
    base = base_task(sc, block, right)
    if spec.control is None:
        return base
    return replace(base, system_filler=control_filler(sc, spec.level, spec.control))
