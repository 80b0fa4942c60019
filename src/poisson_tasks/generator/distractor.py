"""Distractor (decoy tools): how many of the sixteen tools are other ledgers' stage tools (r0..r14)."""

from __future__ import annotations

from functools import lru_cache

from poisson_tasks.arms import ArmSpec
from poisson_tasks.bundle import Goal, canonical_json
from poisson_tasks.domain.ledger import ToolBinding
from poisson_tasks.generator.draft import Draft, base_rows, climb, climb_slots, stage_call
from poisson_tasks.generator.prompts import CLIMB, filler
from poisson_tasks.generator.scenario import Scenario
from poisson_tasks.generator.tools import read_tool, schema, stage_tool
from poisson_tasks.tokens import count_tokens

GOAL = 2


def decoy_block(sc: Scenario, decoys: int) -> tuple[list[ToolBinding], dict[int, ToolBinding]]:
    """Two right tools in the scenario's slots; `decoys` other-class stage tools and reads in the rest."""
    right = {s: stage_tool(sc.cls, s) for s in (1, 2)}
    decoy_pool = [stage_tool(c, s) for c in sc.other_classes[:7] for s in (1, 2)]
    fill = decoy_pool[:decoys] + [read_tool(n) for n in sc.reads[: 14 - decoys]]
    block: list[ToolBinding | None] = [None] * 16
    block[sc.layout[0]] = right[1]
    block[sc.layout[1]] = right[2]
    for slot, b in zip(sc.layout[2:], fill, strict=True):
        block[slot] = b
    return [b for b in block if b is not None], right


def block_tokens(block: list[ToolBinding]) -> int:
    """Tokens of the tool block as the model receives it (canonical JSON of the schemas)."""
    return _block_tokens(tuple(block))


@lru_cache(maxsize=4096)
def _block_tokens(block: tuple[ToolBinding, ...]) -> int:
    return count_tokens(canonical_json([schema(b) for b in block]).decode())


def build(spec: ArmSpec, sc: Scenario) -> Draft:
    block, right = decoy_block(sc, spec.level)
    fill = ""
    if spec.control is not None:
        higher, _ = decoy_block(sc, spec.control)
        fill = filler(block_tokens(higher) - block_tokens(block))
    slots = climb_slots(sc, goal=GOAL)
    return Draft(
        bindings=block,
        rows=base_rows(sc),
        goals=[Goal(ledger=sc.cls, record_id=sc.record_id, stage=GOAL)],
        reference=climb(sc, right, sc.record_id, sc.entry_code, 0, GOAL),
        template=CLIMB,
        slots=slots,
        knob_slots=[],
        bystander=stage_call(right[1], sc.sibling_id, sc.sibling_code),
        system_filler=fill,
    )
