"""Depth: how many chained stage calls the goal is away (d1..d8), and its history controls (d1+h8, d2+h5)."""

from __future__ import annotations

from poisson_tasks.arms import ArmSpec
from poisson_tasks.bundle import Goal
from poisson_tasks.domain.ledger import ToolBinding
from poisson_tasks.generator.draft import (
    Draft,
    base_rows,
    climb,
    climb_slots,
    seeded_history,
    stage_call,
)
from poisson_tasks.generator.prompts import CLIMB
from poisson_tasks.generator.scenario import Scenario
from poisson_tasks.generator.tools import read_tool, stage_tool


def ladder_block(sc: Scenario) -> tuple[list[ToolBinding], dict[int, ToolBinding]]:
    """The whole eight-stage ladder of the task's class and eight read tools, laid out by the scenario."""
    stages = {s: stage_tool(sc.cls, s) for s in range(1, 9)}
    reads = [read_tool(n) for n in sc.reads[:8]]
    pool = [stages[s] for s in range(1, 9)] + reads
    block: list[ToolBinding | None] = [None] * 16
    for slot, b in zip(sc.layout, pool, strict=True):
        block[slot] = b
    return [b for b in block if b is not None], stages


def build(spec: ArmSpec, sc: Scenario) -> Draft:
    block, stages = ladder_block(sc)
    goal = spec.level
    slots = climb_slots(sc, goal=goal)
    history = []
    if spec.control is not None:
        reads = [b.name for b in block if b.kind == "read"]
        history = seeded_history(sc, reads, spec.control - spec.level)
    return Draft(
        bindings=block,
        rows=base_rows(sc),
        goals=[Goal(ledger=sc.cls, record_id=sc.record_id, stage=goal)],
        reference=climb(sc, stages, sc.record_id, sc.entry_code, 0, goal),
        template=CLIMB,
        slots=slots,
        knob_slots=["goal"],
        bystander=stage_call(stages[1], sc.sibling_id, sc.sibling_code),
        history=history,
    )
