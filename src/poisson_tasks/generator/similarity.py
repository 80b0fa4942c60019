"""Similarity: how many digits each lookalike ledger's number shares, in place, with the target's.

The target ledger is `<cls>-<n>`, n = sc.ledger_number (1000..9999), with stage tools
review_<cls>_<n> and sample_<cls>_<n>; the prompt names it "<cls> ledger <n>" (the `ledger` slot
of prompts.LEDGER_CLIMB, a level-independent template). Six lookalike ledgers, each numbered
with exactly L digits of n in place, none starting with 0, all distinct (N21), drawn from
Draws("knob", "similarity", split, seed, L): the only level-specific draw. Each lookalike gets a
review_ and a sample_ tool: twelve lookalike tools (N19), with the two right tools at
sc.layout[0..1] and, in the rest of the layout, the lookalikes' tools (ledger by ledger, review
then sample) and two reads (sc.reads[:2]). Only the target ledger holds rows, so a lookalike
tool answers no_record and changes nothing. Block tokens are held (N20) without measuring at
generation time: o200k splits every four-digit number into the same two tokens (three digits,
then one) whatever its digits, so the block's token count depends only on the number of digits;
the tests hold it across levels.
"""

from __future__ import annotations

from poisson_tasks.arms import ArmSpec
from poisson_tasks.bundle import Goal
from poisson_tasks.domain.ledger import ToolBinding
from poisson_tasks.generator.draft import (
    BASE_GOAL,
    Draft,
    base_rows,
    climb,
    climb_slots,
    lay_out,
    stage_call,
)
from poisson_tasks.generator.draw import Draws
from poisson_tasks.generator.prompts import LEDGER_CLIMB
from poisson_tasks.generator.scenario import Scenario
from poisson_tasks.generator.tools import read_tool, stage_tool

LOOKALIKES = 6
DIGITS = "0123456789"


def lookalike_numbers(sc: Scenario, shared: int) -> list[int]:
    """Six distinct four-digit numbers, each sharing exactly `shared` digits in place with n."""
    target = str(sc.ledger_number)
    d = Draws("knob", "similarity", sc.split, sc.seed, shared)
    out: list[int] = []
    while len(out) < LOOKALIKES:
        keep = d.sample(range(4), shared)
        digits = [
            target[p]
            if p in keep
            else d.choice([c for c in DIGITS if c != target[p] and (p > 0 or c != "0")])
            for p in range(4)
        ]
        number = int("".join(digits))
        if number not in out:
            out.append(number)
    return out


def ledger_tools(cls: str, number: int) -> dict[int, ToolBinding]:
    """The review and sample tools of ledger `<cls>-<number>`."""
    return {s: stage_tool(cls, s, ledger=f"{cls}-{number}", ledger_number=number) for s in (1, 2)}


def build(spec: ArmSpec, sc: Scenario) -> Draft:
    n = sc.ledger_number
    ledger = f"{sc.cls}-{n}"
    right = ledger_tools(sc.cls, n)
    numbers = lookalike_numbers(sc, spec.level)
    lookalikes = [t for m in numbers for t in ledger_tools(sc.cls, m).values()]
    block = lay_out(sc, [right[1], right[2]], [*lookalikes, *(read_tool(r) for r in sc.reads[:2])])
    slots = climb_slots(sc)
    slots["ledger"] = f"{sc.cls} ledger {n}"
    return Draft(
        bindings=block,
        rows=base_rows(sc, ledger),
        goals=[Goal(ledger=ledger, record_id=sc.record_id, stage=BASE_GOAL)],
        reference=climb(sc, right, sc.record_id, sc.entry_code, 0, BASE_GOAL),
        template=LEDGER_CLIMB,
        slots=slots,
        knob_slots=[],
        bystander=stage_call(right[1], sc.sibling_id, sc.sibling_code),
    )
