"""verify(): ordered outcomes, strict and leaky, never raises, a pure function of its inputs."""

from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from poisson_tasks.bundle import ToolCall
from poisson_tasks.domain.engine import apply, initial_state, line_status
from poisson_tasks.generator import generate
from poisson_tasks.verifier import OUTCOMES, FormatReport, verify

BUNDLES = [generate(a, s) for a in ("depth:d3", "depth:d1+h8", "distractor:r8@k16") for s in (0, 1)]


def _ref(b):  # type: ignore[no-untyped-def]
    return [[c] for c in b.reference_calls]


def test_order_malformed_beats_wrong_state() -> None:
    b = generate("depth:d3", 0)
    bad = ToolCall(name="nope", arguments={})
    v = verify(b, [[bad]], True, False)
    assert v.outcome == "malformed_call" and v.malformed_clause == 2


def test_unparsed_arguments_are_malformed() -> None:
    b = generate("depth:d3", 0)
    call = ToolCall(name=b.reference_calls[0].name, arguments=None, raw_arguments="{oops")
    v = verify(b, [[call], *_ref(b)[1:]], True, False)
    assert v.outcome == "malformed_call"


def test_clause1_through_fmt() -> None:
    b = generate("depth:d3", 0)
    v = verify(b, _ref(b), True, False, FormatReport(unparsed_calls=1))
    assert v.outcome == "malformed_call" and v.malformed_clause == 1
    v = verify(b, _ref(b), True, False, FormatReport(unparsed_calls=1, clause1_counts=False))
    assert v.outcome == "passed"


def test_turn_limit_beats_a_reached_goal() -> None:
    b = generate("depth:d3", 0)
    assert verify(b, _ref(b), False, True).outcome == "turn_limit"


def test_strict_and_leaky_reported_both() -> None:
    strict = generate("depth:d2", 3)
    leaky = generate("depth:d2/leaky", 3)
    for b in (strict, leaky):
        ep = b.negative_controls["overshoot"]
        v = verify(b, ep.turns, ep.ended_with_reply, ep.turn_limit_hit)
        assert v.strict_label == "overshoot" and v.leaky_pass
        assert v.passed == (b.verifier == "leaky")
        ep = b.negative_controls["collateral_mutation"]
        v = verify(b, ep.turns, True, False)
        assert v.strict_label == "collateral_mutation" and v.leaky_pass
        ep = b.negative_controls["wrong_state"]
        v = verify(b, ep.turns, True, False)
        assert not v.leaky_pass and not v.passed


def test_no_ending_is_a_verifier_error() -> None:
    b = generate("depth:d3", 0)
    v = verify(b, _ref(b), False, False)
    assert v.outcome == "verifier_error"


def test_never_returns_runner_only_outcomes_on_controls() -> None:
    for b in BUNDLES:
        for ep in b.negative_controls.values():
            v = verify(b, ep.turns, ep.ended_with_reply, ep.turn_limit_hit)
            assert v.outcome not in ("replay_mismatch", "api_error", "wall_timeout")


_names = st.sampled_from(
    [*sorted({n for b in BUNDLES for n in b.tool_names}), "ghost_tool", "", "review_"]
)
_values = st.one_of(
    st.text(max_size=40), st.integers(), st.none(), st.lists(st.integers(), max_size=3)
)
_args = st.one_of(
    st.none(),
    st.dictionaries(
        st.sampled_from(["record_id", "token", "query", "note", "cost_center"]), _values, max_size=4
    ),
)
_calls = st.builds(ToolCall, name=_names, arguments=_args)
_turns = st.lists(st.lists(_calls, min_size=0, max_size=3), max_size=8)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    idx=st.integers(0, len(BUNDLES) - 1),
    turns=_turns,
    reply=st.booleans(),
    limit=st.booleans(),
    unparsed=st.integers(0, 2),
)
def test_random_episodes_never_raise_and_are_pure(
    idx: int, turns: list[list[ToolCall]], reply: bool, limit: bool, unparsed: int
) -> None:
    b = BUNDLES[idx]
    fmt = FormatReport(unparsed_calls=unparsed)
    v1 = verify(b, turns, reply, limit, fmt)
    v2 = verify(copy.deepcopy(b), copy.deepcopy(turns), reply, limit, fmt)
    assert v1 == v2
    assert v1.outcome in OUTCOMES
    assert v1.outcome not in ("replay_mismatch", "api_error", "wall_timeout")
    if v1.outcome == "passed":
        assert v1.leaky_pass


@settings(max_examples=100, deadline=None)
@given(prefix=st.integers(0, 3), extra=st.lists(st.sampled_from(["dup", "read"]), max_size=3))
def test_reference_with_harmless_reads_still_passes(prefix: int, extra: list[str]) -> None:
    b = generate("distractor:r2@k16", 5)
    read = next(x.name for x in b.engine.bindings if x.kind == "read")
    calls = [[ToolCall(name=read, arguments={"query": "q"})] for _ in extra]
    v = verify(b, [*calls[:prefix], *_ref(b), *calls[prefix:]], True, False)
    assert v.outcome == "passed"


def _climb(bundle, record_id: str, entry_code: str, names: list[str]):  # type: ignore[no-untyped-def]
    """Calls that carry one record up through `names`, each with the token the engine's last
    answer gave (the payload of its 52-byte line)."""
    state, calls, token = initial_state(bundle.engine), [], entry_code
    for name in names:
        call = ToolCall(name=name, arguments={"record_id": record_id, "token": token})
        state, line = apply(bundle.engine, state, name, call.arguments)
        assert line_status(line) == "ok", line
        calls.append(call)
        token = line.split()[-1]
    return calls


def test_one_goal_record_over_and_another_untouched_is_no_leaky_pass() -> None:
    """shape:w2 seed 7 (issue 32): the first goal record carried from stage 0 to 3, the second never
    touched. The strict label is overshoot (the first label of the ordered vocabulary that matches:
    a goal record went past its goal stage), and the leaky reading fails it: not every goal record
    reached its goal stage."""
    b = generate("shape:w2", 7)
    first, second = b.goal
    assert (first.stage, second.stage) == (2, 2)
    entry = {r.record_id: r.token for r in b.initial_state}
    climb = _climb(
        b,
        first.record_id,
        entry[first.record_id],
        ["review_permit", "sample_permit", "measure_permit"],
    )
    v = verify(b, [[c] for c in climb], True, False)
    assert v.goal_stages == [3, 0]
    assert v.strict_label == "overshoot" and v.outcome == "overshoot"
    assert v.leaky_pass is False and v.passed is False
    # stopped at its goal instead: wrong_state, and no leaky pass either
    v = verify(b, [[c] for c in climb[:2]], True, False)
    assert v.strict_label == "wrong_state" and v.leaky_pass is False
    # the same episode on the /leaky arm does not pass
    lb = generate("shape:w2/leaky", 7)
    v = verify(lb, [[c] for c in climb], True, False)
    assert v.strict_label == "overshoot" and not v.leaky_pass and not v.passed


def test_overshoot_with_every_goal_reached_is_a_leaky_pass() -> None:
    """The other side of the rule: both goal records reached, one carried past it -> leaky pass."""
    b = generate("shape:w2", 7)
    first, second = b.goal
    entry = {r.record_id: r.token for r in b.initial_state}
    climb = _climb(
        b,
        first.record_id,
        entry[first.record_id],
        ["review_permit", "sample_permit", "measure_permit"],
    )
    climb += _climb(
        b, second.record_id, entry[second.record_id], ["review_permit", "sample_permit"]
    )
    v = verify(b, [[c] for c in climb], True, False)
    assert v.goal_stages == [3, 2]
    assert v.strict_label == "overshoot" and v.leaky_pass


# ------------------------------------------------------------------ what the mutants showed (issue 32)
# Each test below kills mutants of verifier.py that the suite let through (docs/mutation.md).


def test_a_verifier_error_is_never_a_pass_and_carries_no_replay() -> None:
    """An episode verify cannot judge is an instrument condition: it passes neither reading, and
    it reports nothing it did not replay."""
    b = generate("depth:d3", 0)
    for verdict in (verify(b, _ref(b), False, False), verify(b, [None], True, False)):  # type: ignore[list-item]
        assert verdict.outcome == verdict.strict_label == "verifier_error"
        assert verdict.passed is False and verdict.leaky_pass is False
        assert verdict.calls == 0 and verdict.malformed_clause is None
        assert (
            verdict.goal_stages == [] and verdict.observations == [] and verdict.final_state == []
        )


def test_verify_never_raises_on_what_it_cannot_read() -> None:
    """A turn that is not a list of calls breaks the replay inside verify: the verdict is
    verifier_error, naming the exception, and nothing escapes."""
    b = generate("depth:d3", 0)
    v = verify(b, [[object()]], True, False)  # type: ignore[list-item]
    assert v.outcome == "verifier_error" and v.detail.startswith("AttributeError: ")
    v = verify(b, [None], True, False)  # type: ignore[list-item]
    assert v.outcome == "verifier_error" and v.detail.startswith("TypeError: ")


def test_verdicts_and_format_reports_are_frozen() -> None:
    b = generate("depth:d3", 0)
    v = verify(b, _ref(b), True, False)
    with pytest.raises(ValidationError):
        v.outcome = "wrong_state"  # type: ignore[misc]
    fmt = FormatReport()
    with pytest.raises(ValidationError):
        fmt.unparsed_calls = 3  # type: ignore[misc]


def test_a_format_report_counts_calls_from_zero() -> None:
    """No report is no unparsed call: the default counts none, and a negative count is refused."""
    assert FormatReport() == FormatReport(unparsed_calls=0, clause1_counts=True)
    with pytest.raises(ValidationError):
        FormatReport(unparsed_calls=-1)


def test_arguments_that_did_not_parse_are_clause_1() -> None:
    """A call whose arguments did not parse as JSON is the parser's clause, 1, like a call left
    as text; the card counts it there."""
    b = generate("depth:d3", 0)
    call = ToolCall(name=b.reference_calls[0].name, arguments=None, raw_arguments="{oops")
    v = verify(b, [[call], *_ref(b)[1:]], True, False)
    assert v.outcome == "malformed_call" and v.malformed_clause == 1


def test_the_first_malformed_call_names_the_clause() -> None:
    """One clause per episode: clause 1 from the serving side first, then the first malformed call
    in the order the calls were made."""
    b = generate("depth:d3", 0)
    first = b.reference_calls[0]
    outside = ToolCall(name="teleport_record", arguments={})  # clause 2
    missing = ToolCall(name=first.name, arguments={"record_id": "x"})  # clause 3: no token
    extra = ToolCall(name=first.name, arguments={**(first.arguments or {}), "note": "x"})  # 4
    assert verify(b, [[outside], [missing]], True, False).malformed_clause == 2
    assert verify(b, [[missing, outside]], True, False).malformed_clause == 3
    assert verify(b, [[extra], [outside], [missing]], True, False).malformed_clause == 4
    fmt = FormatReport(unparsed_calls=1)
    assert verify(b, [[outside]], True, False, fmt).malformed_clause == 1
    # a well-formed call before the malformed one does not reset the clause
    assert verify(b, [[first], [missing], _ref(b)[1]], True, False).malformed_clause == 3


def test_calls_counts_every_call_of_every_turn() -> None:
    b = generate("depth:d3", 0)
    assert verify(b, _ref(b), True, False).calls == len(b.reference_calls) == 3
    together = [list(b.reference_calls)]
    v = verify(b, together, True, False)
    assert v.calls == 3 and v.outcome == "passed"
    assert verify(b, [], True, False).calls == 0
    assert verify(b, [[], []], True, False).calls == 0
