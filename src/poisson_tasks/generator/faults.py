"""Faults: how many calls on the way answer `unavailable` and must be made again (f0..f4).

The base task (two chained stage calls, sixteen tools) with a FaultPlan on its two right tools:
F unavailable answers, ceil(F/2) on the first (review) and floor(F/2) on the second (sample),
so the first takes the odd one (N25). Both plans are always present, a zero count included,
so every level states its split. The reference makes each failed call again, unchanged:
3 + F turns. The prompt carries one retry sentence in `extra`, the same at every level and in
the control, so the user prompt is held (N6). The control f0+len(fH) is the f0 task with a
seeded history of ok read calls (N24) whose history_tokens match the H failed call/answer
pairs of fH's reference, within two (N26); those pairs are rendered with the seq numbers they
take in fH's episode and call ids call_seed_1..H, the same rendering the seeded history uses.
A control on a higher base (f1+len(f4)) keeps its own faults and seeds the difference: the
tokens of fH's failed pairs less those of its own level's.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from poisson_tasks.arms import ArmSpec
from poisson_tasks.bundle import TaskBundle, ToolCall
from poisson_tasks.domain.engine import ZERO_PAYLOAD, format_line, line_status
from poisson_tasks.domain.ledger import FaultPlan, ToolBinding
from poisson_tasks.generator.draft import (
    BASE_GOAL,
    Draft,
    base_block,
    base_task,
    climb,
    climb_slots,
    padded_history,
)
from poisson_tasks.generator.prompts import RETRY_NOTE
from poisson_tasks.generator.scenario import Scenario
from poisson_tasks.generator.tools import stage_tool
from poisson_tasks.transcript import exchange, history_tokens


def split(faults: int) -> tuple[int, int]:
    """The planned unavailable answers on (review, sample): the first takes the odd one."""
    return (faults + 1) // 2, faults // 2


def with_retries(calls: list[ToolCall], counts: tuple[int, ...]) -> list[ToolCall]:
    """Each call preceded by its planned failures: the same call, made again until it works."""
    out: list[ToolCall] = []
    for call, n in zip(calls, counts, strict=True):
        out += [call] * (n + 1)
    return out


def failed_exchanges(
    sc: Scenario, right: dict[int, ToolBinding], faults: int
) -> list[dict[str, Any]]:
    """The failed call/answer pairs of the f<faults> reference, as messages a control matches."""
    counts = split(faults)
    reference = with_retries(climb(sc, right, sc.record_id, sc.entry_code, 0, BASE_GOAL), counts)
    out: list[dict[str, Any]] = []
    done: dict[str, int] = {}
    for seq, call in enumerate(reference, start=1):
        k = done.get(call.name, 0)
        done[call.name] = k + 1
        planned = counts[0] if call.name == right[1].name else counts[1]
        if k < planned:
            args = {str(a): str(v) for a, v in (call.arguments or {}).items()}
            line = format_line(seq, "unavailable", ZERO_PAYLOAD)
            out += exchange(f"call_seed_{len(out) // 2 + 1}", call.name, args, line)
    return out


def failed_messages(bundle: TaskBundle) -> list[dict[str, Any]]:
    """A bundle's failed reference calls (answered unavailable) as messages, rendered exactly as
    failed_exchanges renders them: what the pin ledger measures a faults control against (N26)."""
    out: list[dict[str, Any]] = []
    for call, line in zip(bundle.reference_calls, bundle.reference_observations, strict=True):
        if line_status(line) == "unavailable":
            args = {str(a): str(v) for a, v in (call.arguments or {}).items()}
            out += exchange(f"call_seed_{len(out) // 2 + 1}", call.name, args, line)
    return out


def build(spec: ArmSpec, sc: Scenario) -> Draft:
    right = {s: stage_tool(sc.cls, s) for s in (1, 2)}
    block = base_block(sc, right)
    counts = split(spec.level)
    history: list[dict[str, Any]] = []
    if spec.control is not None:
        target = history_tokens(failed_exchanges(sc, right, spec.control)) - history_tokens(
            failed_exchanges(sc, right, spec.level)
        )
        reads = [b.name for b in block if b.kind == "read"]
        history = padded_history(sc, reads, target)
    base = base_task(sc, block, right)
    return replace(
        base,
        reference=with_retries(base.reference, counts),
        slots=climb_slots(sc, RETRY_NOTE),
        history=history,
        faults=[
            FaultPlan(tool=right[1].name, count=counts[0]),
            FaultPlan(tool=right[2].name, count=counts[1]),
        ],
    )
