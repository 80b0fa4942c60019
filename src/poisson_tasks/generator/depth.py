"""Depth: how many chained stage calls the goal is away (d1..d8), and its history controls (d1+h8, d2+h5).

A control dL+hH is the depth-L task with a seeded history of ok read calls (which move nothing)
whose history_tokens are T(H) - T(L) within two, T(d) being the tokens of depth d's reference
transcript (its calls and answers, rendered as seeded history is): the control ends its own
episode as long as a depth-H episode ends, and is as deep as depth L (pin N9).
"""

from __future__ import annotations

from poisson_tasks.arms import ArmSpec, arm_id
from poisson_tasks.bundle import Goal
from poisson_tasks.domain.engine import apply, initial_state
from poisson_tasks.domain.ledger import EngineConfig, ToolBinding
from poisson_tasks.errors import ArmError
from poisson_tasks.generator.draft import (
    Draft,
    base_rows,
    climb,
    climb_slots,
    padded_history,
    stage_call,
)
from poisson_tasks.generator.prompts import CLIMB
from poisson_tasks.generator.scenario import Scenario
from poisson_tasks.generator.tools import read_tool, stage_tool
from poisson_tasks.transcript import call_transcript, history_tokens


def ladder_block(sc: Scenario) -> tuple[list[ToolBinding], dict[int, ToolBinding]]:
    """The whole eight-stage ladder of the task's class and eight read tools, laid out by the scenario."""
    stages = {s: stage_tool(sc.cls, s) for s in range(1, 9)}
    reads = [read_tool(n) for n in sc.reads[:8]]
    pool = [stages[s] for s in range(1, 9)] + reads
    block: list[ToolBinding | None] = [None] * 16
    for slot, b in zip(sc.layout, pool, strict=True):
        block[slot] = b
    return [b for b in block if b is not None], stages


def climb_tokens(
    sc: Scenario, block: list[ToolBinding], stages: dict[int, ToolBinding], goal: int
) -> int:
    """T(goal): the tokens of the depth-`goal` reference transcript at this scenario, its calls
    answered by the engine as the depth-`goal` task answers them."""
    config = EngineConfig(key=sc.key, rows=tuple(sorted(base_rows(sc))), bindings=tuple(block))
    state = initial_state(config)
    calls = climb(sc, stages, sc.record_id, sc.entry_code, 0, goal)
    lines = []
    for call in calls:
        state, line = apply(config, state, call.name, call.arguments)
        lines.append(line)
    return history_tokens(call_transcript(calls, lines))


def build(spec: ArmSpec, sc: Scenario) -> Draft:
    block, stages = ladder_block(sc)
    goal = spec.level
    slots = climb_slots(sc, goal=goal)
    history = []
    if spec.control is not None:
        reads = [b.name for b in block if b.kind == "read"]
        target = climb_tokens(sc, block, stages, spec.control) - climb_tokens(
            sc, block, stages, goal
        )
        try:
            history = padded_history(sc, reads, target)
        except ValueError as exc:
            raise ArmError(f"{arm_id(spec)} at seed {sc.seed}: {exc}") from None
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
