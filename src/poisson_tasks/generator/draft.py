"""The draft a knob module returns, and the helpers every knob shares (climbs, base rows, seeded history)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from poisson_tasks.bundle import Goal, ToolCall
from poisson_tasks.domain.engine import chain_token, format_line, read_payload
from poisson_tasks.domain.ledger import FaultPlan, Row, ToolBinding
from poisson_tasks.generator.scenario import Scenario


@dataclass
class Draft:
    """Everything that differs between knobs, before assembly turns it into a TaskBundle."""

    bindings: list[ToolBinding]
    rows: list[Row]
    goals: list[Goal]
    reference: list[ToolCall]
    template: str
    slots: dict[str, str]
    knob_slots: list[str]
    bystander: ToolCall
    history: list[dict[str, Any]] = field(default_factory=list)
    system_filler: str = ""
    faults: list[FaultPlan] = field(default_factory=list)


def base_rows(sc: Scenario, ledger: str | None = None) -> list[Row]:
    """The goal record and its bystander, both at stage 0, holding their entry codes."""
    led = ledger or sc.cls
    return [
        Row(led, sc.record_id, 0, sc.entry_code),
        Row(led, sc.sibling_id, 0, sc.sibling_code),
    ]


def token_for(sc: Scenario, ledger: str, record_id: str, code: str, stage: int) -> str:
    """The token a call advancing to `stage` must carry: the entry code, then the chain."""
    return code if stage == 1 else chain_token(sc.key, ledger, record_id, stage - 1)


def climb(
    sc: Scenario,
    tools: dict[int, ToolBinding],
    record_id: str,
    code: str,
    start: int,
    goal: int,
    extra: dict[str, str] | None = None,
) -> list[ToolCall]:
    """The calls that move one record from `start` to `goal`, one stage at a time."""
    calls = []
    for s in range(start + 1, goal + 1):
        b = tools[s]
        args = {"record_id": record_id, "token": token_for(sc, b.ledger, record_id, code, s)}
        if extra:
            args.update(extra)
        calls.append(ToolCall(name=b.name, arguments=args))
    return calls


def seeded_history(
    sc: Scenario, reads: list[str], count: int, first_seq: int = 1
) -> list[dict[str, Any]]:
    """`count` earlier read calls, each answered ok, as assistant/tool message pairs."""
    out: list[dict[str, Any]] = []
    for i in range(count):
        name = reads[i % len(reads)]
        query = sc.queries[i % len(sc.queries)]
        call_id = f"call_seed_{i + 1}"
        out.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps({"query": query})},
                    }
                ],
            }
        )
        line = format_line(first_seq + i, "ok", read_payload(sc.key, name, query))
        out.append({"role": "tool", "tool_call_id": call_id, "content": line})
    return out
