"""verify(): the pure judge of one episode, and the closed, ordered outcome vocabulary.

The first outcome that matches wins. verify itself never returns replay_mismatch, api_error or
wall_timeout: whatever ran the episode assigns those, since verify's inputs cannot see them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from poisson_tasks.bundle import TaskBundle, ToolCall, assembled
from poisson_tasks.domain.engine import apply, initial_state
from poisson_tasks.domain.ledger import EngineConfig, Row

Outcome = Literal[
    "verifier_error",
    "replay_mismatch",
    "api_error",
    "wall_timeout",
    "malformed_call",
    "turn_limit",
    "overshoot",
    "wrong_state",
    "collateral_mutation",
    "passed",
]
# The vocabulary in its order: the first outcome that matches an episode wins.
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)
INSTRUMENT_OUTCOMES: frozenset[str] = frozenset(
    {"verifier_error", "replay_mismatch", "api_error", "wall_timeout"}
)
# The labels a leaky reading can pass; it passes one only when every goal record reached its goal
# stage (an overshoot of one goal record with another short of its goal is no leaky pass).
LEAKY_PASSES: frozenset[str] = frozenset({"overshoot", "collateral_mutation", "passed"})


class FormatReport(BaseModel):
    """What the serving side saw of format clause 1 (tool calls its parser missed, left as plain text)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    unparsed_calls: int = Field(default=0, ge=0)
    clause1_counts: bool = True


class EpisodeVerdict(BaseModel):
    """The judgement of one episode: the strict label, the leaky reading, and what the replay found."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    outcome: Outcome
    strict_label: Outcome
    leaky_pass: bool
    passed: bool
    malformed_clause: int | None = None
    calls: int
    goal_stages: list[int]
    observations: list[str]
    final_state: list[Row]
    detail: str = ""


def _malformed_clause(call: ToolCall, config: EngineConfig) -> int | None:
    """Clauses 2-4 at the call level (clause 1 comes in through `fmt`).

    The block's schemas are generated from the engine's bindings, so a binding's parameters are
    exactly the schema's required and allowed properties.
    """
    binding = config.binding(call.name)
    if binding is None:
        return 2
    if call.arguments is None:
        return 1
    allowed = binding.parameters
    if call.arguments.keys() == set(allowed):  # the usual case: exactly the schema's parameters
        return None
    if any(r not in call.arguments for r in allowed):
        return 3
    if any(k not in allowed for k in call.arguments):
        return 4
    return None


_NO_FORMAT_NOTES = FormatReport()  # frozen, so one instance serves every verify() without a report


def _error(detail: str) -> EpisodeVerdict:
    return EpisodeVerdict(
        outcome="verifier_error",
        strict_label="verifier_error",
        leaky_pass=False,
        passed=False,
        calls=0,
        goal_stages=[],
        observations=[],
        final_state=[],
        detail=detail,
    )


def verify(
    bundle: TaskBundle,
    turns: Sequence[Sequence[ToolCall]],
    ended_with_reply: bool,
    turn_limit_hit: bool,
    fmt: FormatReport | None = None,
) -> EpisodeVerdict:
    """Judge one episode by replaying its calls through the engine; never raises."""
    try:
        return _verify(bundle, turns, ended_with_reply, turn_limit_hit, fmt or _NO_FORMAT_NOTES)
    except Exception as exc:  # an instrument condition, never the model's fault
        return _error(f"{type(exc).__name__}: {exc}")


def _collateral(
    stages: dict[tuple[str, str], int], goal_keys: set[tuple[str, str]], rows: list[Row]
) -> bool:
    """Whether a row no goal names ends at another stage than it started at."""
    before = {(r.ledger, r.record_id): r.stage for r in rows}
    return any(stage != before.get(key) for key, stage in stages.items() if key not in goal_keys)


def _verify(
    bundle: TaskBundle,
    turns: Sequence[Sequence[ToolCall]],
    ended_with_reply: bool,
    turn_limit_hit: bool,
    fmt: FormatReport,
) -> EpisodeVerdict:
    if not ended_with_reply and not turn_limit_hit:
        return _error("the episode neither ended with a reply nor hit the turn limit")
    config = bundle.engine
    state = initial_state(config)
    observations: list[str] = []
    clause: int | None = 1 if fmt.clause1_counts and fmt.unparsed_calls > 0 else None
    calls = 0
    for turn in turns:
        for call in turn:
            calls += 1
            malformed = _malformed_clause(call, config)
            if malformed is not None and clause is None:
                clause = malformed
            state, line = apply(config, state, call.name, call.arguments)
            observations.append(line)
    stages = {(r.ledger, r.record_id): r.stage for r in state.rows}
    goal_stages: list[int] = []
    goal_keys: set[tuple[str, str]] = set()
    reached, over = True, False
    for goal in bundle.goal:
        key = (goal.ledger, goal.record_id)
        goal_keys.add(key)
        stage = stages.get(key)
        if stage is None:  # no model can reach it: the task is at fault, not the episode
            return _error(f"the goal record {goal.ledger} {goal.record_id} is in no ledger row")
        goal_stages.append(stage)
        reached = reached and stage >= goal.stage
        over = over or stage > goal.stage
    label: Outcome
    if clause is not None:
        label = "malformed_call"
    elif turn_limit_hit:
        label = "turn_limit"
    elif over:
        label = "overshoot"
    elif not reached:
        label = "wrong_state"
    elif _collateral(stages, goal_keys, bundle.initial_state):
        label = "collateral_mutation"
    else:
        label = "passed"
    leaky = reached and label in LEAKY_PASSES
    return assembled(
        EpisodeVerdict,
        {
            "outcome": label,
            "strict_label": label,
            "leaky_pass": leaky,
            "passed": (label == "passed") if bundle.verifier == "strict" else leaky,
            "malformed_clause": clause if label == "malformed_call" else None,
            "calls": calls,
            "goal_stages": goal_stages,
            "observations": observations,
            "final_state": list(state.rows),
            "detail": "",
        },
    )
