"""The mock ledger's engine: 52-byte answers, chain tokens, nothing half-applied."""

from __future__ import annotations

import pytest

from poisson_tasks.domain.engine import LINE_BYTES, apply, chain_token, initial_state, line_status
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
