"""Negative controls: wrong answers built from the reference solution, keyed by the outcome each earns."""

from __future__ import annotations

from poisson_tasks.bundle import Episode, Goal, ToolCall
from poisson_tasks.domain.engine import chain_token
from poisson_tasks.domain.ledger import EngineConfig


def _one_per_turn(calls: list[ToolCall]) -> list[list[ToolCall]]:
    return [[c] for c in calls]


def _call(name: str, arguments: dict[str, object]) -> ToolCall:
    return ToolCall.model_construct(name=name, arguments=arguments, raw_arguments=None)


def _episode(turns: list[list[ToolCall]], reply: bool = True, limit: bool = False) -> Episode:
    return Episode.model_construct(turns=turns, ended_with_reply=reply, turn_limit_hit=limit)


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
    first = reference[0]
    args = dict(first.arguments or {})
    out: dict[str, Episode] = {}
    rest = reference[1:]

    unknown = first.name + "_v2"
    while unknown in tool_names:
        unknown += "x"
    out["malformed_call_clause_2"] = _episode(
        turns=_one_per_turn([_call(unknown, arguments=args), *reference])
    )
    missing = dict(args)
    missing.pop(sorted(missing)[-1])
    out["malformed_call_clause_3"] = _episode(
        turns=_one_per_turn([_call(first.name, arguments=missing), *rest])
    )
    out["malformed_call_clause_4"] = _episode(
        turns=_one_per_turn([_call(first.name, arguments={**args, "note": "rush"}), *rest])
    )
    stage_calls = [c for c in reference if (b := config.binding(c.name)) and b.kind == "stage"]
    last = stage_calls[-1]
    goal = next(g for g in goals if g.record_id == (last.arguments or {}).get("record_id"))
    over = _overshoot_call(config, goal, last)
    if over is not None:
        out["overshoot"] = _episode(_one_per_turn([*reference, over]))
    cut = len(reference) - 1 - reference[::-1].index(last)
    short = reference[:cut]
    out["wrong_state"] = _episode(_one_per_turn(short))
    out["collateral_mutation"] = _episode(_one_per_turn([*reference, bystander]))
    out["turn_limit"] = _episode(_one_per_turn(short), reply=False, limit=True)
    return out
