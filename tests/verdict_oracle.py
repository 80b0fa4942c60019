"""A second reading of the verdict, written from the spec's text alone, so every verdict is read twice.

Sources: the spec's "What a task is" (the ordered outcome table, the four format clauses, strict and
leaky) and "Reading a card", plus the project's documented decisions on what the spec leaves open
(docs/what-a-task-is.md, "The verdict"). It shares nothing with `poisson_tasks.verifier` but the
engine that applies one call; tests/test_verdict_oracle.py drives both over the same episodes and
compares every field. Where a rule below is a decision rather than the spec's words, its comment
says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from poisson_tasks.bundle import TaskBundle, ToolCall
from poisson_tasks.domain.engine import apply, initial_state
from poisson_tasks.domain.ledger import Row

# The spec's closed vocabulary, in its order: the first label that matches wins.
ORDER: tuple[str, ...] = (
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
)
# Labels the instrument assigns outside the verdict: the five arguments cannot see them.
NEVER_FROM_THE_VERDICT = frozenset({"replay_mismatch", "api_error", "wall_timeout"})
# Strict labels under which the goal was reached: a leaky verifier passes these.
REACHED_LABELS = frozenset({"overshoot", "collateral_mutation", "passed"})


class ClauseOneReport(Protocol):
    """What the serving side saw of format clause 1 (the verifier's FormatReport reads this way)."""

    @property
    def unparsed_calls(self) -> int: ...

    @property
    def clause1_counts(self) -> bool: ...


@dataclass(frozen=True)
class OracleVerdict:
    """The oracle's reading of one episode: the fields the spec defines, and the replay behind them.

    goal_stages, observations and final_state are None on verifier_error (no verdict was reached).
    """

    outcome: str
    strict_label: str
    leaky_pass: bool
    passed: bool
    malformed_clause: int | None
    calls: int
    goal_stages: tuple[int, ...] | None
    observations: tuple[str, ...] | None
    final_state: tuple[Row, ...] | None


@dataclass(frozen=True)
class Signature:
    """One tool of the block as its JSON schema states it: the names it requires and allows.

    allowed is None when the schema lets any name through (additionalProperties absent, true, or
    itself a schema: JSON Schema's default is to allow).
    """

    required: frozenset[str]
    allowed: frozenset[str] | None


def block_signatures(tools: Sequence[Mapping[str, Any]]) -> dict[str, Signature]:
    """The tool block the model was shown, by name (clauses 2 to 4 are judged against this)."""
    out: dict[str, Signature] = {}
    for tool in tools:
        function = tool["function"]
        params = function.get("parameters") or {}
        properties = params.get("properties") or {}
        extra = params.get("additionalProperties", True)
        out[function["name"]] = Signature(
            required=frozenset(params.get("required") or ()),
            allowed=frozenset(properties) if extra is False else None,
        )
    return out


def broken_clause(call: ToolCall, block: Mapping[str, Signature]) -> int | None:
    """The format clause this one call breaks, or None, judged against the block the model saw.

    Clause 2: a tool outside the block. Clause 1 (the project's decision): arguments that did not
    parse as JSON, whatever the run says of text calls. Clause 3: a required argument missing.
    Clause 4: an argument name the schema does not allow. A value of the wrong type breaks none of
    them (the project's decision: the engine answers it and nothing moves). The spec does not order
    the clauses inside one call; the name is judged first, since a call's arguments are read against
    the tool it names, then the arguments (1, then 3, then 4).
    """
    signature = block.get(call.name)
    if signature is None:
        return 2
    if call.arguments is None:
        return 1
    names = set(call.arguments)
    if signature.required - names:
        return 3
    if signature.allowed is not None and names - signature.allowed:
        return 4
    return None


def _instrument(label: str, calls: int) -> OracleVerdict:
    return OracleVerdict(label, label, False, False, None, calls, None, None, None)


def judge(
    bundle: TaskBundle,
    turns: Sequence[Sequence[ToolCall]],
    ended_with_reply: bool,
    turn_limit_hit: bool,
    fmt: ClauseOneReport | None = None,
) -> OracleVerdict:
    """The verdict as the spec reads it; never raises (an unexpected failure is verifier_error)."""
    calls = [call for turn in turns for call in turn]
    # Decision (project): an episode that neither replied nor ran out of turns has no verdict.
    if not ended_with_reply and not turn_limit_hit:
        return _instrument("verifier_error", len(calls))
    try:
        return _judge(bundle, calls, turn_limit_hit, fmt)
    except Exception:
        return _instrument("verifier_error", len(calls))


def _judge(
    bundle: TaskBundle,
    calls: list[ToolCall],
    turn_limit_hit: bool,
    fmt: ClauseOneReport | None,
) -> OracleVerdict:
    # Replay every call, malformed or not: the engine answered each one during the episode.
    state = initial_state(bundle.engine)
    observations: list[str] = []
    for call in calls:
        state, line = apply(bundle.engine, state, call.name, call.arguments)
        observations.append(line)
    final = {(r.ledger, r.record_id): r.stage for r in state.rows}
    start = {(r.ledger, r.record_id): r.stage for r in bundle.initial_state}
    goals = {(g.ledger, g.record_id): g.stage for g in bundle.goal}
    if any((g.ledger, g.record_id) not in final for g in bundle.goal):
        # A goal no ledger row holds: no model could reach it, so the task, not the episode, is at
        # fault, an instrument condition.
        return _instrument("verifier_error", len(calls))
    goal_stages = tuple(final[(g.ledger, g.record_id)] for g in bundle.goal)

    # Format (the project's decision): calls the serving side left as text make the episode
    # malformed with clause 1 where the run counts clause 1; otherwise the first malformed call, in
    # the order the calls were made, names the clause.
    text_calls = fmt is not None and fmt.clause1_counts and fmt.unparsed_calls > 0
    clause: int | None = 1 if text_calls else None
    if clause is None:
        block = block_signatures(bundle.tools)
        for call in calls:
            clause = broken_clause(call, block)
            if clause is not None:
                break

    over = any(stage > goal.stage for stage, goal in zip(goal_stages, bundle.goal, strict=True))
    short = any(stage < goal.stage for stage, goal in zip(goal_stages, bundle.goal, strict=True))
    moved = any(
        final.get(key) != start.get(key) for key in set(final) | set(start) if key not in goals
    )
    label: str
    if clause is not None:
        label = "malformed_call"
    elif turn_limit_hit:
        label = "turn_limit"
    elif over:
        label = "overshoot"
    elif short:
        label = "wrong_state"
    elif moved:
        label = "collateral_mutation"
    else:
        label = "passed"
    # Leaky: every goal record at or past its goal stage, whatever else moved (and nothing earlier
    # in the order, such as a malformed call or the turn limit, decided the episode).
    leaky = not short and label in REACHED_LABELS
    passed = label == "passed" if bundle.verifier == "strict" else leaky
    return OracleVerdict(
        outcome=label,
        strict_label=label,
        leaky_pass=leaky,
        passed=passed,
        malformed_clause=clause,
        calls=len(calls),
        goal_stages=goal_stages,
        observations=tuple(observations),
        final_state=tuple(sorted(state.rows)),
    )
