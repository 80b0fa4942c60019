"""Negative controls: wrong answers built from the reference solution, keyed by the outcome each earns."""

from __future__ import annotations

from typing import Any, NamedTuple

from poisson_tasks.bundle import Episode, Goal, ToolCall, assembled
from poisson_tasks.domain.engine import chain_token
from poisson_tasks.domain.ledger import EngineConfig


class ControlPlan(NamedTuple):
    """One negative control before it is an Episode: its turns and how it ends."""

    turns: list[list[ToolCall]]
    ended_with_reply: bool = True
    turn_limit_hit: bool = False

    def episode(self) -> Episode:
        return assembled(
            Episode,
            {
                "turns": self.turns,
                "ended_with_reply": self.ended_with_reply,
                "turn_limit_hit": self.turn_limit_hit,
            },
        )

    def plain(self) -> dict[str, Any]:
        """The Episode's JSON form (its fields; each call its fields), for the task-id digest."""
        return {
            "turns": [[call.__dict__ for call in turn] for turn in self.turns],
            "ended_with_reply": self.ended_with_reply,
            "turn_limit_hit": self.turn_limit_hit,
        }


def _one_per_turn(calls: list[ToolCall]) -> list[list[ToolCall]]:
    return [[c] for c in calls]


def _call(name: str, arguments: dict[str, object]) -> ToolCall:
    return assembled(ToolCall, {"name": name, "arguments": arguments, "raw_arguments": None})


def _plan(turns: list[list[ToolCall]], reply: bool = True, limit: bool = False) -> ControlPlan:
    return ControlPlan(turns, reply, limit)


def _overshoot_call(config: EngineConfig, goal: Goal, last_stage_call: ToolCall) -> ToolCall | None:
    """The stage call one past the goal, when the block offers one."""
    for b in config.bindings:
        if b.kind == "stage" and b.ledger == goal.ledger and b.stage == goal.stage + 1:
            args = dict(last_stage_call.arguments or {})
            args["token"] = chain_token(config.key, goal.ledger, goal.record_id, goal.stage)
            args["record_id"] = goal.record_id
            return _call(b.name, args)
    return None


def negative_controls(
    config: EngineConfig,
    tool_names: set[str],
    goals: list[Goal],
    reference: list[ToolCall],
    bystander: ToolCall,
) -> dict[str, Episode]:
    """Every wrong answer this task admits, each keyed by the outcome it must earn."""
    plans = control_plans(config, tool_names, goals, reference, bystander)
    return {outcome: plan.episode() for outcome, plan in plans.items()}


def control_plans(
    config: EngineConfig,
    tool_names: set[str],
    goals: list[Goal],
    reference: list[ToolCall],
    bystander: ToolCall,
) -> dict[str, ControlPlan]:
    """negative_controls' episodes as plans: what the task id digests, built into models on demand."""
    first = reference[0]
    args = dict(first.arguments or {})
    out: dict[str, ControlPlan] = {}
    rest = reference[1:]

    unknown = first.name + "_v2"
    while unknown in tool_names:
        unknown += "x"
    out["malformed_call_clause_2"] = _plan(
        turns=_one_per_turn([_call(unknown, arguments=args), *reference])
    )
    missing = dict(args)
    missing.pop(sorted(missing)[-1])
    out["malformed_call_clause_3"] = _plan(
        turns=_one_per_turn([_call(first.name, arguments=missing), *rest])
    )
    out["malformed_call_clause_4"] = _plan(
        turns=_one_per_turn([_call(first.name, arguments={**args, "note": "rush"}), *rest])
    )
    stage_calls = [c for c in reference if (b := config.binding(c.name)) and b.kind == "stage"]
    last = stage_calls[-1]
    goal = next(g for g in goals if g.record_id == (last.arguments or {}).get("record_id"))
    over = _overshoot_call(config, goal, last)
    if over is not None:
        out["overshoot"] = _plan(_one_per_turn([*reference, over]))
    cut = len(reference) - 1 - reference[::-1].index(last)
    short = reference[:cut]
    out["wrong_state"] = _plan(_one_per_turn(short))
    out["collateral_mutation"] = _plan(_one_per_turn([*reference, bystander]))
    out["turn_limit"] = _plan(_one_per_turn(short), reply=False, limit=True)
    return out
