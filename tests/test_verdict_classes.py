"""One named test per class of disagreement that reading the verdict twice found (issue 32, item 2).

Each class is an episode on which verify() and tests/verdict_oracle.py first gave different answers.
Each test states the answer decided (the spec's, or the project's documented decision where the spec
is silent) and holds both readings to it; docs/what-a-task-is.md ("The verdict, read twice") lists
the classes with their counts.
"""

from __future__ import annotations

from verdict_episodes import Case, World
from verdict_oracle import judge

from poisson_tasks.bundle import TaskBundle, ToolCall
from poisson_tasks.generator import generate
from poisson_tasks.verifier import FormatReport, verify


def _both(
    bundle: TaskBundle,
    turns: list[list[ToolCall]],
    reply: bool = True,
    limit: bool = False,
    fmt: FormatReport | None = None,
) -> list[tuple[str, int | None, bool]]:
    """(outcome, malformed clause, leaky pass) from the oracle, then from verify."""
    return [
        (v.outcome, v.malformed_clause, v.leaky_pass)
        for v in (
            judge(bundle, turns, reply, limit, fmt),
            verify(bundle, turns, reply, limit, fmt),
        )
    ]


def _reference(bundle: TaskBundle) -> list[list[ToolCall]]:
    return [[c] for c in bundle.reference_calls]


def test_class_text_calls_name_clause_1_even_beside_a_parsed_malformed_call() -> None:
    """Calls the serving side left as text (FormatReport, clause 1 counted) beside a parsed call to a
    tool outside the block: the episode is malformed with clause 1 (the project's decision: such a
    report makes the episode malformed_call with clause 1), not with the parsed call's clause 2."""
    b = generate("depth:d1", 2)
    stray = ToolCall(name="no_such_tool", arguments={"query": "x"})
    turns = [*_reference(b), [stray]]
    assert _both(b, turns, fmt=FormatReport(unparsed_calls=1)) == [("malformed_call", 1, False)] * 2
    assert _both(b, turns) == [("malformed_call", 2, False)] * 2


def test_class_unparsed_arguments_are_clause_1_when_text_calls_do_not_count() -> None:
    """Arguments that did not parse as JSON make the call malformed, clause 1, even where the run
    says text calls do not count (clause1_counts=False covers FormatReport's count only): the
    project's decision. The first reading had left such a call to the engine's bad_args."""
    b = generate("depth:d2", 4)
    first = b.reference_calls[0]
    unparsed = ToolCall(name=first.name, arguments=None, raw_arguments='{"record_id": ')
    turns = [[unparsed], *_reference(b)]
    for fmt in (
        FormatReport(clause1_counts=False),
        FormatReport(unparsed_calls=2, clause1_counts=False),
    ):
        assert _both(b, turns, fmt=fmt) == [("malformed_call", 1, False)] * 2
    # the same reference with text calls that do not count passes
    assert (
        _both(b, _reference(b), fmt=FormatReport(unparsed_calls=2, clause1_counts=False))
        == [("passed", None, True)] * 2
    )


def test_class_a_tool_outside_the_block_with_unparsed_arguments_is_clause_2() -> None:
    """One call that both names a tool outside the block and carries arguments that did not parse.
    The spec orders no clauses inside one call; the project judges the name first (a call's
    arguments are read against the tool it names), so the clause is 2."""
    b = generate("depth:d1+h8", 9)
    call = ToolCall(name="review_nothing", arguments=None, raw_arguments="{")
    assert _both(b, [*_reference(b), [call]]) == [("malformed_call", 2, False)] * 2
    inside = ToolCall(name=b.reference_calls[0].name, arguments=None, raw_arguments="{")
    assert _both(b, [*_reference(b), [inside]]) == [("malformed_call", 1, False)] * 2


def test_class_one_goal_record_over_another_short_is_no_leaky_pass() -> None:
    """The defect issue 32 item 1 fixed, as the oracle meets it: on shape:w2 one goal record carried
    past its goal and the other left short is overshoot (the first label that applies) and no leaky
    pass, on the strict and the /leaky arm alike."""
    for arm in ("shape:w2", "shape:w2/leaky"):
        b = generate(arm, 11)
        world = World(b)
        over, short = world.goals
        calls = list(b.reference_calls)
        last = max(
            i for i, c in enumerate(calls) if (c.arguments or {}).get("record_id") == short[1]
        )
        calls = calls[:last] + calls[last + 1 :]
        state, _ = world.replay(calls)
        calls.append(world.stage_call(state, over))  # the engine's token, one stage past the goal
        turns = [[c] for c in calls]
        v = verify(b, turns, True, False)
        assert v.goal_stages == [b.goal[0].stage + 1, b.goal[1].stage - 1]
        assert _both(b, turns) == [("overshoot", None, False)] * 2
        assert not v.passed


def test_no_replay_is_compared_on_a_verifier_error() -> None:
    """An episode that neither replied nor hit the turn limit is verifier_error under both readings;
    verify then reports no replay (0 calls, no observations), which the sweep does not compare: the
    spec defines no replay for an episode that has no verdict."""
    from test_verdict_oracle import read_twice

    b = generate("faults:f2", 5)
    episode = Case("neither", tuple((c,) for c in b.reference_calls), False, False, None)
    _, diff = read_twice(b, episode)
    assert diff == []
    v = verify(b, episode.turns, False, False)
    assert (v.outcome, v.calls, v.observations) == ("verifier_error", 0, [])
    assert judge(b, episode.turns, False, False).calls == len(b.reference_calls)


def test_class_a_goal_the_ledger_does_not_hold_is_a_verifier_error() -> None:
    """A bundle whose goal names a record no ledger row holds (no generated bundle does; a bundle
    built or edited by hand can): no model can reach that goal, so the verdict is verifier_error,
    an instrument condition, and not the model's wrong_state."""
    b = generate("depth:d3", 7)
    goal = b.goal[0].model_copy(update={"record_id": "nobody-here"})
    broken = b.model_copy(update={"goal": [goal]})
    for v in (
        judge(broken, _reference(b), True, False),
        verify(broken, _reference(b), True, False),
    ):
        assert (v.outcome, v.leaky_pass, v.passed) == ("verifier_error", False, False)
    assert "nobody-here" in verify(broken, _reference(b), True, False).detail
