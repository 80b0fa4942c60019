"""The mock ledger's engine: 52-byte answers, chain tokens, nothing half-applied."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from poisson_tasks.domain.engine import (
    LINE_BYTES,
    LedgerState,
    apply,
    chain_token,
    format_line,
    initial_state,
    line_status,
)
from poisson_tasks.domain.ledger import EngineConfig, FaultPlan
from poisson_tasks.domain.vocabulary import CLASSES, EVAL_WORDS, LADDER, TRAIN_WORDS
from poisson_tasks.generator import generate
from poisson_tasks.generator.scenario import READ_NAMES, STAGE_NAMES


def _status(line: str) -> str:
    return line_status(line)


def test_vocabulary_shape() -> None:
    assert len(CLASSES) == 12
    assert LADDER == (
        "review",
        "sample",
        "measure",
        "monitor",
        "compare",
        "bundle",
        "route",
        "label",
    )
    assert len(EVAL_WORDS) == len(set(EVAL_WORDS)) == 256
    assert len(TRAIN_WORDS) == len(set(TRAIN_WORDS)) == 256
    assert not set(EVAL_WORDS) & set(TRAIN_WORDS)
    assert len(READ_NAMES) == len(set(READ_NAMES)) == 256


def test_no_record_word_is_a_substring_of_a_tool_name() -> None:
    names = READ_NAMES + STAGE_NAMES
    bad = [(w, n) for w in EVAL_WORDS + TRAIN_WORDS for n in names if w in n]
    assert bad == []


def test_reference_climb_and_wrong_calls() -> None:
    b = generate("depth:d3", 11)
    cfg = b.engine
    state = initial_state(cfg)
    rid = b.goal[0].record_id
    first = b.reference_calls[0]
    # A bad token, an absent record, an unknown tool, a stage not ready, extra args: each changes nothing.
    wrong = [
        (first.name, {"record_id": rid, "token": "0" * 12}, "bad_token"),
        (first.name, {"record_id": "nobody-here", "token": "x"}, "no_record"),
        ("teleport_record", {"record_id": rid}, "unknown_tool"),
        (b.reference_calls[2].name, {"record_id": rid, "token": "x"}, "not_ready"),
        (first.name, {"record_id": rid, "token": first.arguments["token"], "x": "1"}, "bad_args"),  # type: ignore[index]
        (first.name, None, "bad_args"),
    ]
    for name, args, status in wrong:
        after, line = apply(cfg, state, name, args)
        assert len(line.encode()) == LINE_BYTES
        assert _status(line) == status
        assert after.rows == state.rows
        assert after.seq == state.seq + 1
        state = after
    for call, expected in zip(b.reference_calls, b.reference_observations, strict=True):
        state, line = apply(cfg, state, call.name, call.arguments)
        assert _status(line) == "ok"
        assert line[20:] == expected[20:]
    # Replaying the first call again: the record is past it.
    _, line = apply(cfg, state, first.name, first.arguments)
    assert _status(line) == "already_done"


def test_chain_token_is_keyed() -> None:
    a = chain_token("k1", "invoice", "r", 1)
    assert len(a) == 32
    assert a != chain_token("k2", "invoice", "r", 1)
    assert a != chain_token("k1", "invoice", "r", 2)
    assert a != chain_token("k1", "payment", "r", 1)


@pytest.mark.parametrize("arm", ["depth:d2", "distractor:r4@k16"])
def test_reads_mutate_nothing(arm: str) -> None:
    b = generate(arm, 3)
    state = initial_state(b.engine)
    for binding in b.engine.bindings:
        if binding.kind == "read":
            after, line = apply(b.engine, state, binding.name, {"query": "anything"})
            assert _status(line) == "ok"
            assert after.rows == state.rows
            _, line2 = apply(b.engine, state, binding.name, {"query": "anything"})
            assert line2 == line


# ------------------------------------------------------------------ what the mutants showed (issue 32)
# Each test below kills mutants of domain/engine.py or domain/ledger.py that the suite let through
# (docs/mutation.md).


def _line(seq: int, status: str, payload: str) -> str:
    """The 52-byte answer as what-a-task-is.md draws it, written out by hand."""
    return str(seq).rjust(6, "0")[-6:] + " " + status + " " * (12 - len(status)) + " " + payload


def test_a_planned_fault_answers_unavailable_its_count_then_the_call_works() -> None:
    b = generate("faults:f4", 0)
    cfg = b.engine
    goal = b.goal[0]
    plans = {f.tool: f.count for f in cfg.faults}
    assert plans == {"review_budget": 2, "sample_budget": 2}
    state = initial_state(cfg)
    assert dict(state.faults) == plans
    call = b.reference_calls[0]
    for left in (1, 0):
        after, line = apply(cfg, state, call.name, call.arguments)
        assert line == _line(state.seq + 1, "unavailable", "0" * 32)
        assert after.rows == state.rows  # nothing moved
        assert dict(after.faults) == ({call.name: left} if left else {}) | {"sample_budget": 2}
        state = after
    after, line = apply(cfg, state, call.name, call.arguments)
    assert _status(line) == "ok" and after.stage_of(goal.ledger, goal.record_id) == 1
    assert after.faults == (("sample_budget", 2),)  # the other tool's plan is untouched


def test_only_faults_still_to_answer_are_in_the_state() -> None:
    """A plan of no failures (or fewer) has nothing left to answer: the state holds none of it,
    before any call and once a plan is used up."""
    b = generate("faults:f1", 0)
    assert {f.tool: f.count for f in b.engine.faults} == {"review_budget": 1, "sample_budget": 0}
    state = initial_state(b.engine)
    assert state.faults == (("review_budget", 1),)
    state, _ = apply(b.engine, state, "review_budget", b.reference_calls[0].arguments)
    assert state.faults == ()
    negative = b.engine.model_copy(update={"faults": (FaultPlan(tool="review_budget", count=-1),)})
    assert initial_state(negative).faults == ()


def test_sequence_numbers_count_every_call_and_wrap_at_six_digits() -> None:
    b = generate("depth:d2", 0)
    cfg = b.engine.model_copy(update={"start_seq": 999_998})
    state = initial_state(cfg)
    lines = []
    for call in b.reference_calls:
        state, line = apply(cfg, state, call.name, call.arguments)
        lines.append(line)
    assert [line[:7] for line in lines] == ["999999 ", "000000 "]
    assert all(len(line.encode()) == LINE_BYTES for line in lines)
    assert state.seq == 1_000_000
    assert LedgerState(state.rows).seq == 0  # a state with no call made yet has made none
    _, line = apply(b.engine, LedgerState(state.rows), "no_such_tool", {})
    assert line == _line(1, "unknown_tool", "0" * 32)


def test_every_answer_is_the_drawn_line() -> None:
    b = generate("spread:p4", 3)
    state = initial_state(b.engine)
    for call in b.reference_calls:
        before = state.seq
        state, line = apply(b.engine, state, call.name, call.arguments)
        status, payload = line[7:19].strip(), line[20:]
        assert line == _line(before + 1, status, payload)
    parts = sorted((bd.part_status, bd.part) for bd in b.engine.bindings if bd.part is not None)
    for part_status, part in parts:
        name = next(bd.name for bd in b.engine.bindings if bd.part == part)
        _, line = apply(b.engine, state, name, {"query": "anything"})
        assert line == _line(state.seq + 1, part_status, part + "0" * (32 - len(part)))


def test_a_fixed_value_must_be_exactly_the_stated_one() -> None:
    """arguments knob: a stage call carrying any other value, missing one, or a non-string,
    answers bad_args and changes nothing, whether the wrong value sorts before or after."""
    b = generate("arguments:a6", 0)
    cfg = b.engine
    state = initial_state(cfg)
    call = b.reference_calls[0]
    args = dict(call.arguments or {})
    field, value = next(iter(cfg.binding(call.name).fixed))  # type: ignore[union-attr]
    for wrong in ("", "A" + value, value + "0", "ZZ", value.lower()):
        after, line = apply(cfg, state, call.name, {**args, field: wrong})
        assert _status(line) == "bad_args" and after.rows == state.rows, wrong
    after, line = apply(cfg, state, call.name, {k: v for k, v in args.items() if k != field})
    assert _status(line) == "bad_args"
    after, line = apply(cfg, state, call.name, {**args, "token": 7})
    assert _status(line) == "bad_args"
    after, line = apply(cfg, state, call.name, args)
    assert _status(line) == "ok"


def test_a_config_read_back_from_json_answers_the_same() -> None:
    """A bundle's engine config written out and read back (new string objects) replays its
    reference to the same answers."""
    for arm in ("depth:d3", "arguments:a4", "faults:f2", "spread:p2"):
        b = generate(arm, 1)
        again = EngineConfig.model_validate_json(b.engine.model_dump_json())
        state = initial_state(again)
        for call, expected in zip(b.reference_calls, b.reference_observations, strict=True):
            state, line = apply(again, state, call.name, call.arguments)
            assert line == expected, arm


def _fresh(text: str) -> str:
    """An equal string that is another object, as one read back from JSON is."""
    return text.encode().decode()


def test_stage_of_names_exactly_one_record() -> None:
    b = generate("similarity:s2", 2)
    state = initial_state(b.engine)
    ledgers = sorted({x.ledger for x in b.engine.bindings if x.kind == "stage"})
    assert len(ledgers) == 7  # the target's ledger and six lookalikes, sorting on both sides
    for row in state.rows:
        assert state.stage_of(_fresh(row.ledger), _fresh(row.record_id)) == row.stage
        for other in [*ledgers, "", "zzzz"]:
            if other != row.ledger:
                assert state.stage_of(other, row.record_id) is None, other
    goal = b.goal[0]
    climbed, _ = apply(b.engine, state, b.reference_calls[0].name, b.reference_calls[0].arguments)
    assert climbed.stage_of(goal.ledger, goal.record_id) == 1
    for record in ("", "a", "zzzzzzzz", goal.record_id + "x", goal.record_id[:-1]):
        assert state.stage_of(goal.ledger, record) is None, record


def test_a_record_is_found_only_in_the_ledger_its_tool_names() -> None:
    """A lookalike ledger's stage tool, called with the target record's id and its right token,
    finds no record there: no_record, and nothing moves."""
    b = generate("similarity:s3", 4)
    state = initial_state(b.engine)
    goal = b.goal[0]
    entry = next(r.token for r in state.rows if r.record_id == goal.record_id)
    others = [
        x
        for x in b.engine.bindings
        if x.kind == "stage" and x.stage == 1 and x.ledger != goal.ledger
    ]
    assert len(others) == 6
    assert any(x.ledger < goal.ledger for x in others) and any(
        x.ledger > goal.ledger for x in others
    )
    for binding in others:
        after, line = apply(
            b.engine, state, binding.name, {"record_id": goal.record_id, "token": entry}
        )
        assert _status(line) == "no_record" and after.rows == state.rows, binding.ledger


def test_a_stage_call_answers_by_where_the_record_stands() -> None:
    """At the stage below the call's: ok with the right token, bad_token with any other (before or
    after it in sort order); at the call's stage or past it: already_done; two or more below:
    not_ready."""
    b = generate("depth:d3", 5)
    cfg, calls = b.engine, b.reference_calls
    state = initial_state(cfg)
    assert _status(apply(cfg, state, calls[2].name, calls[0].arguments)[1]) == "not_ready"
    assert _status(apply(cfg, state, calls[1].name, calls[0].arguments)[1]) == "not_ready"
    right = str((calls[0].arguments or {})["token"])
    for wrong in (
        "",
        "0" * len(right),
        "f" * len(right),
        right[:-1],
        right + "0",
        _fresh(right).upper(),
    ):
        if wrong != right:
            after, line = apply(
                cfg, state, calls[0].name, {**(calls[0].arguments or {}), "token": wrong}
            )
            assert _status(line) == "bad_token" and after.rows == state.rows, wrong
    for call in calls:
        state, line = apply(cfg, state, call.name, call.arguments)
        assert _status(line) == "ok"
        again, line = apply(cfg, state, call.name, call.arguments)  # the same call, at its stage
        assert _status(line) == "already_done" and again.rows == state.rows
    for call in calls[:-1]:  # and past it
        assert _status(apply(cfg, state, call.name, call.arguments)[1]) == "already_done"


def test_a_read_tool_names_no_stage_and_the_first_answer_is_number_one() -> None:
    for arm in ("depth:d3", "distractor:r8@k16", "spread:p4"):
        b = generate(arm, 0)
        for binding in b.engine.bindings:
            if binding.kind == "read":
                assert binding.stage == 0 and binding.ledger == "", binding.name
            else:
                assert 1 <= binding.stage <= 8, binding.name
        assert b.engine.start_seq == 0 and initial_state(b.engine).seq == 0
        assert b.reference_observations[0].startswith("000001 ")


def test_a_line_that_would_not_be_52_bytes_is_refused() -> None:
    assert format_line(7, "ok", "0" * 32) == _line(7, "ok", "0" * 32)
    with pytest.raises(AssertionError):
        format_line(7, "x" * 13, "0" * 32)  # 53 bytes
    with pytest.raises(AssertionError):
        format_line(7, "ok", "0" * 31)  # 51 bytes


def test_a_copy_with_other_bindings_answers_from_them() -> None:
    b = generate("depth:d3", 0)
    cfg = b.engine
    first = b.reference_calls[0].name
    assert cfg.binding(first) is not None  # the lookup is built and kept
    fewer = tuple(x for x in cfg.bindings if x.name != first)
    copy = cfg.model_copy(update={"bindings": fewer})
    assert copy.binding(first) is None
    assert cfg.binding(first) is not None
    renamed = tuple(x.model_copy(update={"name": "z_" + x.name}) for x in cfg.bindings)
    assert cfg.model_copy(update={"bindings": renamed}).binding("z_" + first) is not None


def test_engine_records_are_frozen() -> None:
    b = generate("depth:d3", 0)
    with pytest.raises(ValidationError):
        b.engine.bindings = ()  # type: ignore[misc]
    with pytest.raises(ValidationError):
        b.engine.bindings[0].stage = 9  # type: ignore[misc]
    with pytest.raises(ValidationError):
        FaultPlan(tool="x", count=1).count = 2  # type: ignore[misc]


def test_a_call_missing_an_argument_answers_bad_args() -> None:
    """Exactly the schema's parameters, no fewer: a stage call without its token or record, or a
    read without its query, answers bad_args and changes nothing."""
    b = generate("distractor:r2@k16", 1)
    cfg, state = b.engine, initial_state(b.engine)
    call = b.reference_calls[0]
    args = dict(call.arguments or {})
    for dropped in ("token", "record_id"):
        after, line = apply(cfg, state, call.name, {k: v for k, v in args.items() if k != dropped})
        assert _status(line) == "bad_args" and after.rows == state.rows, dropped
    renamed = {("tok" if k == "token" else k): v for k, v in args.items()}  # as many, one wrong
    assert _status(apply(cfg, state, call.name, renamed)[1]) == "bad_args"
    read = next(x.name for x in cfg.bindings if x.kind == "read")
    assert _status(apply(cfg, state, read, {})[1]) == "bad_args"
    assert _status(apply(cfg, state, read, {"q": "x"})[1]) == "bad_args"


def test_a_stage_call_more_than_one_stage_ahead_is_not_ready_at_any_height() -> None:
    b = generate("depth:d5", 3)
    cfg, calls = b.engine, b.reference_calls
    state = initial_state(cfg)
    for done in range(len(calls)):
        for ahead in range(done + 1, len(calls)):
            after, line = apply(cfg, state, calls[ahead].name, calls[ahead].arguments)
            assert _status(line) == "not_ready" and after.rows == state.rows, (done, ahead)
        state, _ = apply(cfg, state, calls[done].name, calls[done].arguments)


def test_a_config_that_declares_no_earlier_call_answers_first_with_number_one() -> None:
    b = generate("depth:d2", 0)
    bare = EngineConfig(key=b.engine.key, rows=b.engine.rows, bindings=b.engine.bindings)
    state, line = apply(
        bare, initial_state(bare), b.reference_calls[0].name, b.reference_calls[0].arguments
    )
    assert line.startswith("000001 ok ") and state.seq == 1
