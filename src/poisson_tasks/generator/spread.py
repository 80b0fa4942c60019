"""Spread: how many tool answers the entry code is split across (p1 ... p4).

The base task, but the goal record's entry code is not in the prompt (prompts.SPREAD, a
level-independent template). Four reads of the block, the same four at every level (N35):
sc.reads[:4], named in the prompt in block order. The first P of them in sc.reads order carry
the code's pieces 1..P (12/P hex digits each), answering status part_<i>_of_<P> with the piece
left-aligned in a zero-padded payload; the other 4-P answer ok with a catalogue payload. Parts
are thus placed by the scenario, not by block order, so joining needs the i in the status.
The reference calls all four in block order (query: the scenario's queries), then the two
stage calls: seven turns at every level.
"""

from __future__ import annotations

from dataclasses import replace

from poisson_tasks.arms import ArmSpec
from poisson_tasks.bundle import ToolCall
from poisson_tasks.domain.ledger import ToolBinding
from poisson_tasks.generator.draft import (
    Draft,
    base_block,
    base_task,
    climb_slots,
)
from poisson_tasks.generator.prompts import SPREAD, listing
from poisson_tasks.generator.scenario import ENTRY_CODE_HEX, Scenario
from poisson_tasks.generator.tools import read_tool, stage_tool

READS = 4


def pieces(code: str, parts: int) -> list[str]:
    """The entry code cut into `parts` equal pieces, in order."""
    size = len(code) // parts
    return [code[i * size : (i + 1) * size] for i in range(parts)]


def part_reads(sc: Scenario, parts: int) -> dict[str, ToolBinding]:
    """The four reads by name: the first `parts` (in sc.reads order) carry pieces 1..parts."""
    out: dict[str, ToolBinding] = {}
    for i, name in enumerate(sc.reads[:READS]):
        if i < parts:
            piece = pieces(sc.entry_code, parts)[i]
            out[name] = read_tool(name, part=piece, part_status=f"part_{i + 1}_of_{parts}")
        else:
            out[name] = read_tool(name)
    return out


def build(spec: ArmSpec, sc: Scenario) -> Draft:
    assert ENTRY_CODE_HEX % spec.level == 0, "every spread level divides the entry code"
    right = {s: stage_tool(sc.cls, s) for s in (1, 2)}
    spread = part_reads(sc, spec.level)
    block = base_block(sc, right, [*spread.values(), *(read_tool(n) for n in sc.reads[READS:14])])
    in_order = [b.name for b in block if b.name in spread]
    slots = climb_slots(sc)
    del slots["entry_code"], slots["extra"]
    slots["reads"] = listing(in_order)
    reads = [
        ToolCall(name=name, arguments={"query": sc.queries[i]}) for i, name in enumerate(in_order)
    ]
    base = base_task(sc, block, right)
    return replace(base, reference=[*reads, *base.reference], template=SPREAD, slots=slots)
