"""The seven newer knobs: every arm's reference passes, every negative control earns its key, and
each knob does what its pin-ledger rows say (KNOBS.md); knob_status() and `poisson-tasks knobs`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from poisson_tasks.arms import (
    KNOB_DEFS,
    KNOBS,
    SHIPPED_KNOBS,
    ArmSpec,
    all_arms,
    levels,
    parse_arm_id,
)
from poisson_tasks.bundle import TaskBundle, ToolCall
from poisson_tasks.cli import app
from poisson_tasks.domain.engine import apply, initial_state, line_status
from poisson_tasks.domain.vocabulary import CLASSES, EVAL_WORDS, EXTRA_FIELDS, TRAIN_WORDS
from poisson_tasks.errors import ArmError
from poisson_tasks.generator import generate
from poisson_tasks.generator.assemble import BUILDERS
from poisson_tasks.generator.faults import failed_exchanges, failed_messages
from poisson_tasks.generator.scenario import READ_NAMES, draw_scenario
from poisson_tasks.generator.similarity import lookalike_numbers
from poisson_tasks.generator.tools import block_tokens, stage_tool, stage_tool_name
from poisson_tasks.knobtable import knob_status
from poisson_tasks.probe import published
from poisson_tasks.probe.figures import ProbeCell
from poisson_tasks.tokens import count_tokens
from poisson_tasks.transcript import history_tokens
from poisson_tasks.verifier import verify

NEW_KNOBS = ("similarity", "faults", "history", "block", "arguments", "shape", "spread")
NEW_ARMS = [a.id for k in NEW_KNOBS for a in all_arms(k)]
FAST_SEEDS = (0, 7, 123)
runner = CliRunner()


def _bundle(arm: str, seed: int, split: str = "eval") -> TaskBundle:
    return generate(replace(parse_arm_id(arm), split=split), seed)  # type: ignore[arg-type]


def _expected(key: str) -> str:
    return "malformed_call" if key.startswith("malformed_call") else key


def _check(b: TaskBundle) -> None:
    v = verify(b, [[c] for c in b.reference_calls], True, False)
    assert v.outcome == "passed", (b.arm_id, b.seed, v)
    assert v.passed and v.leaky_pass
    assert v.observations == b.reference_observations
    assert [list(r) for r in v.final_state] == [list(r) for r in b.expected_final_state]
    assert len(b.reference_calls) == b.min_calls == b.reference_turns - 1
    assert {
        "malformed_call_clause_2",
        "malformed_call_clause_3",
        "malformed_call_clause_4",
        "wrong_state",
        "collateral_mutation",
        "turn_limit",
    } <= set(b.negative_controls)
    for key, ep in b.negative_controls.items():
        got = verify(b, ep.turns, ep.ended_with_reply, ep.turn_limit_hit)
        assert got.outcome == _expected(key), (b.arm_id, b.seed, key, got)
        if key.startswith("malformed_call_clause_"):
            assert got.malformed_clause == int(key.rsplit("_", 1)[1])


def _prompt_text(b: TaskBundle) -> str:
    if isinstance(b.prompt, str):
        return b.prompt
    return str(b.prompt[0]["content"])


def _seeded(b: TaskBundle) -> list[dict[str, Any]]:
    return [] if isinstance(b.prompt, str) else list(b.prompt[1:])


def _status(line: str) -> str:
    return line_status(line)


# --- every arm: reference passes, controls earn their keys -------------------------------------


@pytest.mark.parametrize("arm", NEW_ARMS)
@pytest.mark.parametrize("split", ["eval", "train"])
def test_reference_and_controls(arm: str, split: str) -> None:
    for seed in FAST_SEEDS:
        _check(_bundle(arm, seed, split))


@pytest.mark.slow
@pytest.mark.parametrize("arm", NEW_ARMS)
@pytest.mark.parametrize("split", ["eval", "train"])
def test_reference_and_controls_every_seed(arm: str, split: str) -> None:
    for seed in range(200):
        _check(_bundle(arm, seed, split))


def test_every_knob_is_generated() -> None:
    assert set(BUILDERS) == set(KNOBS)


@pytest.mark.parametrize("knob", NEW_KNOBS)
def test_same_bytes_twice_and_user_prompt_held(knob: str) -> None:
    """Byte-equal regeneration, and N6: the template and each non-knob slot held across arms."""
    for seed in FAST_SEEDS:
        bundles = [generate(a, seed) for a in all_arms(knob)]
        again = [generate(a, seed).canonical() for a in all_arms(knob)]
        assert [b.canonical() for b in bundles] == again
        held = [
            (
                b.prompt_parts.template,
                {
                    k: v
                    for k, v in b.prompt_parts.slots.items()
                    if k not in b.prompt_parts.knob_slots
                },
            )
            for b in bundles
        ]
        assert all(h == held[0] for h in held), knob
        assert bundles[0].system_prompt.startswith(bundles[-1].system_prompt[:200])


# --- faults ------------------------------------------------------------------------------------


@pytest.mark.parametrize("level", [0, 1, 2, 3, 4, 7])
def test_faults_planned_unavailable_answers_happen(level: int) -> None:
    for seed in FAST_SEEDS:
        b = generate(f"faults:f{level}", seed)
        stage_names = [c.name for c in b.reference_calls]
        first, second = stage_names[0], stage_names[-1]
        plans = {f.tool: f.count for f in b.engine.faults}
        assert plans == {first: (level + 1) // 2, second: level // 2}
        statuses = [_status(o) for o in b.reference_observations]
        assert statuses.count("unavailable") == level
        assert statuses.count("ok") == 2
        assert b.reference_turns == 3 + level
        # each failure is followed by the same call again
        for i, s in enumerate(statuses):
            if s == "unavailable":
                assert b.reference_calls[i + 1] == b.reference_calls[i]


@pytest.mark.parametrize("level", [1, 2, 4])
def test_faults_reference_without_retry_fails(level: int) -> None:
    for seed in FAST_SEEDS:
        b = generate(f"faults:f{level}", seed)
        once: list[ToolCall] = []
        for c in b.reference_calls:
            if c not in once:
                once.append(c)
        assert len(once) == 2
        v = verify(b, [[c] for c in once], True, False)
        assert v.outcome == "wrong_state"


def test_faults_prompt_is_the_same_at_every_level() -> None:
    texts = {_prompt_text(generate(a, 7)) for a in all_arms("faults")}
    assert len(texts) == 1
    assert "unavailable; make it again" in texts.pop()


@pytest.mark.parametrize("arm", ["faults:f0+len(f4)", "faults:f0+len(f1)", "faults:f1+len(f4)"])
def test_faults_control_matches_the_failed_calls(arm: str) -> None:
    spec = parse_arm_id(arm)
    assert spec.control is not None
    for split in ("eval", "train"):
        for seed in FAST_SEEDS:
            b = _bundle(arm, seed, split)
            sc = draw_scenario(split, seed)
            right = {s: stage_tool(sc.cls, s) for s in (1, 2)}
            target = history_tokens(failed_exchanges(sc, right, spec.control)) - history_tokens(
                failed_exchanges(sc, right, spec.level)
            )
            high = _bundle(f"faults:f{spec.control}", seed, split)
            assert failed_messages(high) == failed_exchanges(sc, right, spec.control)
            seeded = _seeded(b)
            assert abs(history_tokens(seeded) - target) <= 2
            _seeded_reads_answered_ok(b)
            assert b.engine.start_seq == len(seeded) // 2
            assert _status(b.reference_observations[0]) in ("ok", "unavailable")
            assert int(b.reference_observations[0][:6]) == b.engine.start_seq + 1


def _seeded_reads_answered_ok(b: TaskBundle) -> None:
    """N24: every seeded call is a read tool of the block, answered ok, with matching ids."""
    reads = {
        t["function"]["name"]
        for t in b.tools
        if "query" in t["function"]["parameters"]["properties"]
    }
    seeded = _seeded(b)
    assert len(seeded) % 2 == 0
    for call_msg, tool_msg in zip(seeded[::2], seeded[1::2], strict=True):
        (tc,) = call_msg["tool_calls"]
        assert tc["function"]["name"] in reads
        assert tool_msg["tool_call_id"] == tc["id"]
        assert _status(tool_msg["content"]) == "ok"
        assert len(tool_msg["content"]) == 52
        args = json.loads(tc["function"]["arguments"])
        _, line = apply(b.engine, initial_state(b.engine), tc["function"]["name"], args)
        assert line[7:] == tool_msg["content"][7:]  # the engine's own answer, bar the sequence


# --- history -----------------------------------------------------------------------------------


@pytest.mark.parametrize("level", [0, 100, 300, 600, 1200, 2400, 5000])
def test_history_tokens_are_the_level(level: int) -> None:
    for split in ("eval", "train"):
        for seed in FAST_SEEDS:
            b = _bundle(f"history:t{level}", seed, split)
            seeded = _seeded(b)
            assert abs(history_tokens(seeded) - level) <= 2
            _seeded_reads_answered_ok(b)
            if level == 0:
                assert isinstance(b.prompt, str)
            assert b.engine.start_seq == len(seeded) // 2


def test_history_tokens_counts_each_message_as_canonical_json() -> None:
    b = generate("history:t300", 3)
    seeded = _seeded(b)
    from poisson_tasks.bundle import canonical_json

    assert history_tokens(seeded) == sum(count_tokens(canonical_json(m).decode()) for m in seeded)
    assert history_tokens(seeded[:-1]) < history_tokens(seeded)


def test_history_below_the_smallest_call_is_refused() -> None:
    with pytest.raises(ArmError, match="cannot be built"):
        generate("history:t40", 0)  # refused by parse_arm_id: no seed builds it


# --- block -------------------------------------------------------------------------------------


def test_block_sizes_and_right_slots() -> None:
    for seed in FAST_SEEDS:
        slots: set[tuple[int, int]] = set()
        for k in (8, 9, 16, 32, 64, 100, 258):
            b = generate(f"block:k{k}", seed)
            names = b.tool_names
            assert len(names) == k == len(set(names))
            first, second = (c.name for c in b.reference_calls)
            pos = (names.index(first), names.index(second))
            assert max(pos) < 8
            slots.add(pos)
            if k == 258:
                assert sorted(n for n in names if n not in (first, second)) == sorted(READ_NAMES)
        assert len(slots) == 1
        assert generate("block:k64", seed).tool_names[:8] == generate("block:k8", seed).tool_names


@pytest.mark.parametrize("arm", ["block:k8+len(k64)", "block:k16+len(k258)", "block:k8+len(k9)"])
def test_block_control_filler_matches_the_extra_block(arm: str) -> None:
    spec = parse_arm_id(arm)
    for seed in FAST_SEEDS:
        c = generate(arm, seed)
        low = generate(f"block:k{spec.level}", seed)
        high = generate(f"block:k{spec.control}", seed)
        assert c.tools == low.tools
        extra = block_tokens(list(high.engine.bindings)) - block_tokens(list(low.engine.bindings))
        assert abs(count_tokens(c.system_filler) - extra) <= 2
        in_place = count_tokens(c.system_prompt) - count_tokens(low.system_prompt)
        assert abs(in_place - extra) <= 2
        assert c.system_prompt == low.system_prompt + " " + c.system_filler
        assert c.prompt == low.prompt


# --- arguments ---------------------------------------------------------------------------------


_VALUE = re.compile(r"([a-z_]+)=([A-Z]{2}-\d{4})")


@pytest.mark.parametrize("level", [2, 3, 4, 6, 8])
def test_arguments_values_are_stated_and_checked(level: int) -> None:
    for seed in FAST_SEEDS:
        b = generate(f"arguments:a{level}", seed)
        stated = dict(_VALUE.findall(_prompt_text(b)))
        assert list(stated) == list(EXTRA_FIELDS[: level - 2])
        stage_calls = list(b.reference_calls)
        assert len(stage_calls) == 2
        for c in stage_calls:
            assert c.arguments is not None
            assert {k: c.arguments[k] for k in stated} == stated
            assert len(c.arguments) == level
        for value in stated.values():
            assert not any(value in n or value.lower() in n for n in b.tool_names)
        if level == 2:
            assert "=" not in _prompt_text(b)
            continue
        config = b.engine
        state = initial_state(config)
        first = b.reference_calls[0]
        assert first.arguments is not None
        field = next(iter(stated))
        value = stated[field]
        wrong = {**first.arguments, field: value[:-1] + str((int(value[-1]) + 1) % 10)}
        after, line = apply(config, state, first.name, wrong)
        assert _status(line) == "bad_args"
        assert after.rows == state.rows
        bad = ToolCall(name=first.name, arguments=wrong)
        turns = [[bad], *([c] for c in b.reference_calls[1:])]
        v = verify(b, turns, True, False)
        assert v.outcome == "wrong_state"


def test_arguments_schemas_differ_only_in_the_extra_fields() -> None:
    """N30: with the knob's fields removed, the stage tools' schemas are the same at every level."""
    for seed in FAST_SEEDS:
        seen = []
        for a in all_arms("arguments"):
            b = generate(a, seed)
            tools = []
            for t in b.tools:
                fn = t["function"]
                props = {
                    k: v for k, v in fn["parameters"]["properties"].items() if k not in EXTRA_FIELDS
                }
                req = [r for r in fn["parameters"]["required"] if r not in EXTRA_FIELDS]
                tools.append((fn["name"], fn["description"], props, req))
            seen.append(tools)
        assert all(s == seen[0] for s in seen)


@pytest.mark.parametrize(
    "arm", ["arguments:a2+len(a8)", "arguments:a2+len(a4)", "arguments:a4+len(a8)"]
)
def test_arguments_control_request_is_as_long(arm: str) -> None:
    spec = parse_arm_id(arm)
    for seed in FAST_SEEDS:
        c = generate(arm, seed)
        high = generate(f"arguments:a{spec.control}", seed)
        low = generate(f"arguments:a{spec.level}", seed)
        assert abs(count_tokens(_prompt_text(c)) - count_tokens(_prompt_text(high))) <= 2
        assert dict(_VALUE.findall(_prompt_text(c))) == dict(_VALUE.findall(_prompt_text(low)))
        assert c.tools == low.tools
        assert c.prompt_parts.knob_slots == ["extra"]


# --- shape -------------------------------------------------------------------------------------


@pytest.mark.parametrize("width", [1, 2, 4])
def test_shape_widths(width: int) -> None:
    for seed in FAST_SEEDS:
        b = generate(f"shape:w{width}", seed)
        assert len(b.tools) == 16
        assert len(b.goal) == width
        assert {g.stage for g in b.goal} == {4 // width}
        assert len({g.record_id for g in b.goal}) == width
        assert len(b.reference_calls) == 4
        v = verify(b, [[c] for c in b.reference_calls], True, False)
        assert v.goal_stages == [4 // width] * width
        text = _prompt_text(b)
        assert len(re.findall(r"Move \w+ record \S+ from stage 0 to stage \d", text)) == width
        for g in b.goal:
            assert f"record {g.record_id} from stage 0 to stage {g.stage} " in text
        sibling = draw_scenario("eval", seed).sibling_id
        assert sibling not in {g.record_id for g in b.goal}
        assert b.prompt_parts.knob_slots == ["goal_lines"]


def test_shape_control_request_is_as_long_as_w4() -> None:
    for arm in ("shape:w1+len(w4)", "shape:w2+len(w4)"):
        spec = parse_arm_id(arm)
        for seed in FAST_SEEDS:
            c = generate(arm, seed)
            w4 = generate("shape:w4", seed)
            low = generate(f"shape:w{spec.level}", seed)
            assert abs(count_tokens(_prompt_text(c)) - count_tokens(_prompt_text(w4))) <= 2
            assert c.goal == low.goal and c.tools == low.tools
            assert c.reference_calls == low.reference_calls


# --- similarity --------------------------------------------------------------------------------


@pytest.mark.parametrize("level", [0, 1, 2, 3])
def test_similarity_lookalikes(level: int) -> None:
    for split in ("eval", "train"):
        for seed in FAST_SEEDS:
            sc = draw_scenario(split, seed)
            b = _bundle(f"similarity:s{level}", seed, split)
            n = str(sc.ledger_number)
            numbers = lookalike_numbers(sc, level)
            assert len(numbers) == 6 == len(set(numbers))
            for m in map(str, numbers):
                assert len(m) == 4 and m[0] != "0" and m != n
                assert sum(a == b_ for a, b_ in zip(m, n, strict=True)) == level
            right = {c.name for c in b.reference_calls}
            assert right == {f"review_{sc.cls}_{n}", f"sample_{sc.cls}_{n}"}
            lookalike_tools = [
                t
                for t in b.tool_names
                if re.fullmatch(rf"\w+_{sc.cls}_\d{{4}}", t) and t not in right
            ]
            assert len(lookalike_tools) == 12
            assert {t[-4:] for t in lookalike_tools} == set(map(str, numbers))
            assert len(b.tools) == 16
            text = _prompt_text(b)
            assert f"{sc.cls} ledger {n}" in text
            assert not any(str(m) in text for m in numbers)


def test_similarity_right_tools_and_block_tokens_held() -> None:
    """N22 and N20: the right tools' schemas, and the block's token count, equal at every level."""
    for split in ("eval", "train"):
        for seed in range(12):
            bundles = [_bundle(f"similarity:s{lv}", seed, split) for lv in range(4)]
            right = [
                [t for t in b.tools if t["function"]["name"] in {c.name for c in b.reference_calls}]
                for b in bundles
            ]
            assert all(r == right[0] for r in right)
            slots = [[b.tool_names.index(c.name) for c in b.reference_calls] for b in bundles]
            assert all(s == slots[0] for s in slots)
            tokens = {block_tokens(list(b.engine.bindings)) for b in bundles}
            assert len(tokens) == 1


# --- spread ------------------------------------------------------------------------------------


@pytest.mark.parametrize("level", [1, 2, 3, 4])
def test_spread_parts_join_to_the_entry_code(level: int) -> None:
    for split in ("eval", "train"):
        for seed in FAST_SEEDS:
            sc = draw_scenario(split, seed)
            b = _bundle(f"spread:p{level}", seed, split)
            assert sc.entry_code not in _prompt_text(b)
            assert sc.entry_code not in str(b.prompt_parts.slots)
            reads = b.reference_calls[:4]
            assert all(c.arguments is not None and set(c.arguments) == {"query"} for c in reads)
            pieces: dict[int, str] = {}
            for obs in b.reference_observations[:4]:
                m = re.fullmatch(r"part_(\d)_of_(\d)", _status(obs))
                if m:
                    assert int(m[2]) == level
                    pieces[int(m[1])] = obs[20:][: 12 // level]
                else:
                    assert _status(obs) == "ok"
            assert sorted(pieces) == list(range(1, level + 1))
            assert "".join(pieces[i] for i in sorted(pieces)) == sc.entry_code
            assert b.reference_turns == 7
            # the reads named in the prompt, in block order, are the reads the reference calls
            named = re.search(r"call (.+) \(any query\)", _prompt_text(b))
            assert named is not None
            assert re.split(r", | and ", named[1]) == [c.name for c in reads]
            order = [b.tool_names.index(c.name) for c in reads]
            assert order == sorted(order)


def test_spread_same_four_reads_and_block_at_every_level() -> None:
    for seed in FAST_SEEDS:
        bundles = [generate(a, seed) for a in all_arms("spread")]
        assert all(b.tools == bundles[0].tools for b in bundles)
        assert all(b.reference_calls[:4] == bundles[0].reference_calls[:4] for b in bundles)
        assert len({_prompt_text(b) for b in bundles}) == 1


# --- the CLI and the refusals ------------------------------------------------------------------


@pytest.mark.parametrize("arm", NEW_ARMS)
def test_generate_show_works(arm: str) -> None:
    res = runner.invoke(app, ["generate", arm, "--seed", "5", "--show"])
    assert res.exit_code == 0, res.output
    b = generate(arm, 5)
    assert b.task_id in res.output
    assert "== reference solution" in res.output
    for obs in b.reference_observations:
        assert obs in res.output
    assert "-> passed" not in res.output.split("== negative controls")[1]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("arguments:a1", "2 to 8"),
        ("spread:p0", "1 to 4"),
        ("shape:w8", "1, 2 or 4"),
        ("faults:f4+len(f2)", "must be higher"),
        ("block:k64+len(k64)", "must be higher"),
        ("shape:w4+len(w2)", "must be higher"),
        ("arguments:a2+len(a9)", "2 to 8"),
    ],
)
def test_more_refusals(text: str, fragment: str) -> None:
    with pytest.raises(ArmError, match=re.escape(fragment)):
        parse_arm_id(text)


@pytest.mark.parametrize(("knob", "level"), [("faults", -1), ("history", -300), ("similarity", -1)])
def test_negative_levels_refused_by_the_constructor(knob: str, level: int) -> None:
    with pytest.raises(ArmError, match="outside"):
        ArmSpec(knob=knob, level=level)  # type: ignore[arg-type]


# --- record-id words and tool names ------------------------------------------------------------


def _tool_name_universe() -> set[str]:
    names = {stage_tool_name(c, s) for c in CLASSES for s in range(1, 9)}
    names |= {stage_tool_name(c, s, n) for c in CLASSES for s in (1, 2) for n in (1000, 4821, 9999)}
    names |= set(READ_NAMES)
    for knob in KNOBS:
        for a in all_arms(knob):
            for split in ("eval", "train"):
                for seed in (0, 7, 199):
                    names |= set(_bundle(a.id, seed, split).tool_names)
    return names


def test_no_record_id_word_or_stated_value_is_in_a_tool_name() -> None:
    names = _tool_name_universe()
    assert len(names) > 300
    words = set(EVAL_WORDS) | set(TRAIN_WORDS)
    assert len(words) == 512
    hits = sorted((w, n) for w in words for n in names if w in n)
    assert hits == []
    values = {
        v
        for split in ("eval", "train")
        for seed in range(200)
        for v in draw_scenario(split, seed).extra_values
    }
    assert not [(v, n) for v in values for n in names if v in n or v.lower() in n]


# --- knob_status() and `poisson-tasks knobs` ---------------------------------------------------

PUBLISHED = {
    ("similarity", "gpt-5-nano"): "does not bite: Δ −0.050 [−0.150, 0.042]",
    ("similarity", "Qwen3-8B"): "does not bite: Δ 0.000 [0.000, 0.000]",
    ("faults", "gpt-5-nano"): "does not bite: Δ 0.400 [0.300, 0.500], control 0.142 [0.033, 0.250]",
    ("faults", "Qwen3-8B"): "bites: Δ 0.825 [0.742, 0.900], control 0.308 [0.150, 0.458]",
    ("history", "gpt-5-nano"): "bites: Δ 0.683 [0.608, 0.750]",
    ("history", "Qwen3-8B"): "bites: Δ 0.308 [0.217, 0.417]",
    (
        "block",
        "gpt-5-nano",
    ): "does not bite: Δ −0.067 [−0.142, 0.000], control −0.008 [−0.058, 0.042]",
    ("block", "Qwen3-8B"): "does not bite: Δ 0.000 [0.000, 0.000], control 0.000 [0.000, 0.000]",
    (
        "arguments",
        "gpt-5-nano",
    ): "does not bite: Δ 0.092 [0.000, 0.183], control 0.000 [−0.108, 0.100]",
    (
        "arguments",
        "Qwen3-8B",
    ): "does not bite: Δ 0.150 [0.067, 0.242], control 0.100 [0.017, 0.183]",
    (
        "shape",
        "gpt-5-nano",
    ): "does not bite: Δ −0.300 [−0.425, −0.175], length control 0.158 [0.058, 0.258]",
    (
        "shape",
        "Qwen3-8B",
    ): "bites: Δ 0.358 [0.233, 0.483], length control 0.000 [−0.033, 0.033]; shape:w4 harder",
    ("spread", "gpt-5-nano"): "top easier: Δ −0.250 [−0.358, −0.142]",
    ("spread", "Qwen3-8B"): "cannot tell: base passed 0.008; Δ 0.008 [0.000, 0.033]",
}


def test_knob_status_is_the_published_table() -> None:
    status = knob_status()
    assert [r.knob for r in status.rows] == list(NEW_KNOBS)
    assert status.row("depth") is None and status.row("distractor") is None
    got = {(r.knob, c.model): c.text for r in status.rows for c in r.cells}
    assert got == PUBLISHED
    assert set(status.shipped) == set(SHIPPED_KNOBS)
    assert all(r.shipped == (r.knob in SHIPPED_KNOBS) for r in status.rows)
    assert status.row("faults").control_arm == "faults:f0+len(f4)"  # type: ignore[union-attr]
    assert status.row("history").top_arm == "history:t2400"  # type: ignore[union-attr]


def test_knob_status_imports_in_a_fresh_process() -> None:
    """knobtable.knob_status() (the spec's arms.knob_status, moved above arms by issue 35) imports
    beside the calibration package with no cycle; issue 22 named this very line."""
    script = (
        "from poisson_tasks.knobtable import knob_status\n"
        "from poisson_tasks.calibration import run_arm\n"
        "print(len(knob_status().rows))\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["7"]


def test_the_published_figures_import_no_arms() -> None:
    """probe.published imports no arms (the table is joined in knobtable, and no cycle)."""
    script = (
        "import sys\nimport poisson_tasks.probe.published\n"
        "print('poisson_tasks.arms' in sys.modules)\n"
    )
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert res.stdout.split() == ["False"]
    assert not hasattr(published, "knob_status")


def test_the_generator_hash_files_load_no_probe_code() -> None:
    """arms.py is in the generator hash: it and a generated task import nothing of the probe, so
    rewording the probe's report changes no task id and makes no card stale (issue 35)."""
    script = (
        "import sys\nfrom poisson_tasks.generator import generate\n"
        "generate('faults:f2', 3)\n"
        "print(sorted(m for m in sys.modules if m.startswith('poisson_tasks.probe')))\n"
    )
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert res.stdout.split() == ["[]"]


def test_a_published_row_for_an_unknown_knob_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    cells = {**published.CELLS, "depthh": published.CELLS["faults"]}
    monkeypatch.setattr(published, "CELLS", cells)
    with pytest.raises(ArmError, match=r"'depthh', which is not a knob of this build; valid knobs"):
        knob_status()


def _bites(knob: str, c: ProbeCell) -> bool:
    d = c.delta
    if knob == "shape":
        lc = c.length_control
        return (
            lc is not None
            and abs(lc.value) < 0.15
            and abs(d.value) >= 0.15
            and (d.low > 0 or d.high < 0)
        )
    ok = d.value >= 0.15 and d.low > 0
    if knob in ("faults", "block", "arguments"):
        ok = ok and c.control is not None and c.control.value >= 0.15 and c.control.low > 0
    return ok


def test_knob_status_verdicts_and_shipping_follow_the_rule() -> None:
    status = knob_status()
    for r in status.rows:
        for c in r.cells:
            if c.verdict == "cannot tell":
                assert c.base_pass is not None and c.base_pass < 0.15
                continue
            top_easier = r.knob != "shape" and c.delta.value <= -0.15 and c.delta.high < 0
            expect = (
                "bites" if _bites(r.knob, c) else "top easier" if top_easier else "does not bite"
            )
            assert c.verdict == expect, (r.knob, c.model)
        ships = any(c.verdict == "bites" for c in r.cells) and not any(
            c.verdict == "top easier" for c in r.cells
        )
        assert ships == r.shipped, r.knob


def test_knob_status_states_its_provenance() -> None:
    status = knob_status()
    assert status.measured_on_this_build is False
    for needle in (
        "another (earlier) build",
        "gpt-5-nano",
        "Qwen3-8B",
        "60 tasks",
        "2 attempts",
        "strict pass@1",
        "not a measurement of this build",
    ):
        assert needle in status.provenance
    assert status.tasks == 60 and status.attempts == 2 and status.metric == "strict pass@1"
    one, two, three = status.disclosures
    assert "2026-10-13" in one and "1 of 21" in one
    assert "similarity:s0" in two and "$1.5981" in two and "0.104" in two
    assert "14 of its 18 arms" in three and "2.56 hours" in three


def test_knobs_cli_prints_every_knob_with_provenance() -> None:
    res = runner.invoke(app, ["knobs"])
    assert res.exit_code == 0, res.output
    out = res.output
    for knob in KNOBS:
        assert re.search(rf"^{knob}: ", out, re.M), knob
    assert out.count("shipped  yes") == len(SHIPPED_KNOBS)
    assert "another (earlier) build" in out
    for text in PUBLISHED.values():
        assert text in out
    assert "published-card knob" in out
    one = runner.invoke(app, ["knobs", "faults"])
    assert one.exit_code == 0 and "faults: " in one.output and "history: " not in one.output
    bad = runner.invoke(app, ["knobs", "warp"])
    assert bad.exit_code == 2
    assert "error: knob 'warp' is unknown" in bad.output


def test_knobs_says_any_valid_level_is_an_arm() -> None:
    # issue 34 item 5: the table showed only the candidate levels, as if no other level were an arm
    out = runner.invoke(app, ["knobs"]).output
    for knob in KNOBS:
        block = out if out.startswith(f"{knob}: ") else out.split(f"\n{knob}: ", 1)[1]
        line = next(x for x in block.splitlines() if x.startswith("  arms     "))
        definition = KNOB_DEFS[knob]
        assert definition.valid_text in line, line
        example = re.search(r"\(e\.g\. (\S+)\)$", line)
        if example is None:  # shape and similarity: the candidates are every valid level
            assert "the candidates are every valid level" in line
            continue
        spec = parse_arm_id(example.group(1))
        assert spec.knob == knob and spec.level not in levels(knob)
        generate(example.group(1), 0)  # an arm outside the candidates generates


_NAME_SWITCH = re.compile(
    r"knob\s*(?:==|!=)\s*\"(?:" + "|".join(KNOBS) + r")\""
    r"|knob\s+(?:not\s+)?in\s+[A-Z_]+_KNOBS\b"
    r"|frozenset\(\{\"(?:" + "|".join(KNOBS) + r")\""
)


def test_knob_behaviour_is_switched_on_knobdef_fields_not_on_names() -> None:
    """What a knob does outside its generator module is a KnobDef field (read_on, overshoots,
    probe_control, schema_changes, filler_control), never an if on the knob's name (issue 35). The
    depth note, which is about depth alone, is the one place a card names a knob."""
    root = Path(__file__).resolve().parent.parent / "src" / "poisson_tasks"
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel == "arms.py" or rel.startswith("generator/"):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if (
                _NAME_SWITCH.search(line)
                and 'c.knob == "depth" and c.level == TOP_DEPTH' not in line
            ):
                found.append(f"{rel}:{number}: {line.strip()}")
    assert found == []
