"""Shape: how many records four stage calls advance side by side (w1, w2, w4), and w1+len(w4).

Four stage calls and sixteen tools at every width (N33): stage tools 1..4 of sc.cls at
sc.layout[0..3] and twelve reads (sc.reads[:12]) in the rest. Width W advances W records, each
from stage 0 to 4/W: w1 the goal record 0->4, w2 the goal record and peer 1 0->2, w4 the goal
record and peers 1..3 0->1 (ids and entry codes from sc.record_id / sc.peer_ids and
sc.entry_code / sc.peer_codes). Only the records a width names are rows, beside the untouched
bystander sc.sibling_id. The knob slot `goal_lines` holds one prompts.GOAL_LINE per record;
bundle.goal holds W Goals; the reference advances record by record. The control w1+len(w4) is
the w1 task with neutral filler words after its goal line, so the whole user prompt is as long
as w4's within two tokens (N34).
"""

from __future__ import annotations

from functools import lru_cache

from poisson_tasks.arms import ArmSpec
from poisson_tasks.bundle import Goal, ToolCall
from poisson_tasks.domain.ledger import Row
from poisson_tasks.domain.vocabulary import LADDER
from poisson_tasks.generator.draft import Draft, check_band, climb, lay_out, stage_call
from poisson_tasks.generator.prompts import GOAL_LINE, SHAPE, padding
from poisson_tasks.generator.scenario import Scenario
from poisson_tasks.generator.tools import read_tool, stage_tool
from poisson_tasks.tokens import count_tokens

STAGE_CALLS = 4


def records(sc: Scenario, width: int) -> list[tuple[str, str]]:
    """The (record_id, entry code) pairs a width advances: the goal record first, then peers."""
    return [(sc.record_id, sc.entry_code), *zip(sc.peer_ids, sc.peer_codes, strict=True)][:width]


def goal_lines(sc: Scenario, width: int) -> str:
    """One GOAL_LINE per record: 'Move <cls> record <id> from stage 0 to stage S (name); its
    entry code is C.'"""
    stage = STAGE_CALLS // width
    return " ".join(
        GOAL_LINE.format(
            ledger=sc.cls, record_id=rid, goal=f"{stage} ({LADDER[stage - 1]})", code=code
        )
        for rid, code in records(sc, width)
    )


def slots(sc: Scenario, lines: str) -> dict[str, str]:
    return {
        "goal_lines": lines,
        "sibling_id": sc.sibling_id,
        "sibling_code": sc.sibling_code,
        "ledger": sc.cls,
    }


def prompt_tokens(sc: Scenario, lines: str) -> int:
    return count_tokens(SHAPE.format(**slots(sc, lines)))


@lru_cache(maxsize=1024)
def control_lines(sc: Scenario, width: int, higher: int) -> str:
    """The control's goal lines: its own, then filler words to the `higher` width's length."""
    own = goal_lines(sc, width)
    target = prompt_tokens(sc, goal_lines(sc, higher))
    words = padding(target, lambda text: prompt_tokens(sc, f"{own} {text}".rstrip()))
    lines = f"{own} {words}".rstrip()
    what = f"shape w{width}+len(w{higher}) seed {sc.seed}: request"
    check_band(what, prompt_tokens(sc, lines), target)
    return lines


def build(spec: ArmSpec, sc: Scenario) -> Draft:
    width = spec.level
    stage = STAGE_CALLS // width
    tools = {s: stage_tool(sc.cls, s) for s in range(1, STAGE_CALLS + 1)}
    block = lay_out(sc, list(tools.values()), [read_tool(n) for n in sc.reads[:12]])
    lines = goal_lines(sc, width)
    if spec.control is not None:
        lines = control_lines(sc, width, spec.control)
    advanced = records(sc, width)
    reference: list[ToolCall] = []
    for rid, code in advanced:
        reference += climb(sc, tools, rid, code, 0, stage)
    return Draft(
        bindings=block,
        rows=[
            *(Row(sc.cls, rid, 0, code) for rid, code in advanced),
            Row(sc.cls, sc.sibling_id, 0, sc.sibling_code),
        ],
        goals=[Goal(ledger=sc.cls, record_id=rid, stage=stage) for rid, _ in advanced],
        reference=reference,
        template=SHAPE,
        slots=slots(sc, lines),
        knob_slots=["goal_lines"],
        bystander=stage_call(tools[1], sc.sibling_id, sc.sibling_code),
    )
