"""The pin ledger: every row measured or unmeasured, sweeps that hold, breaks that refuse."""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from poisson_tasks.arms import KNOBS, ArmSpec, all_arms, arm_id
from poisson_tasks.bundle import PromptParts, TaskBundle
from poisson_tasks.cli import app
from poisson_tasks.domain.engine import LINE_BYTES, apply, format_line, initial_state, read_payload
from poisson_tasks.domain.ledger import EngineConfig, FaultPlan, ToolBinding
from poisson_tasks.errors import PinError
from poisson_tasks.generator import generate
from poisson_tasks.generator.assemble import BUILDERS
from poisson_tasks.generator.scenario import Scenario, draw_scenario
from poisson_tasks.pins import (
    BY_ID,
    ROW_IDS,
    ROWS,
    PinReport,
    PinRow,
    check_pins,
    check_plan,
    measure_pins,
    parse_seeds,
    pin_targets,
    views,
)
from poisson_tasks.pins.check import figure
from poisson_tasks.pins.holding import Outcome, PinMeasurement, within
from poisson_tasks.prereg import load_preregistration
from poisson_tasks.transcript import BAND, exchange, history_tokens

ROOT = Path(__file__).resolve().parents[1]
THIRTY = tuple(f"N{i}" for i in (*range(1, 14), *range(19, 36)))
REFUSING = (
    "N1",
    "N2",
    "N3",
    "N4",
    "N6",
    "N7",
    "N8",
    "N9",
    "N11",
    "N12",
    *(f"N{i}" for i in range(19, 36) if i not in (29, 33)),
    "N29",
    "N33",
)
FAST_SEEDS = range(3)
Bundles = dict[str, TaskBundle]


def contrast(knob: str, seed: int = 0, only: tuple[str, ...] | None = None) -> Bundles:
    """Every arm of `knob` (levels and controls) at `seed`, or just the arm ids in `only`."""
    ids = list(only) if only is not None else [arm_id(s) for s in all_arms(knob)]
    return {a: generate(a, seed) for a in ids}


# ------------------------------------------------------------------ the table


def test_the_table_has_the_thirty_rows_in_order() -> None:
    assert ROW_IDS == THIRTY
    assert len({r.id for r in ROWS}) == 30


def test_every_measurable_row_carries_its_measure_hold_and_figure() -> None:
    for row in ROWS:
        parts = (row.measure, row.figure, row.hold)
        if row.measurable:
            assert all(p is not None for p in parts), row.id
        else:
            assert all(p is None for p in parts), row.id


def test_a_row_is_one_object_that_refuses_to_be_half_defined() -> None:
    with pytest.raises(ValueError, match="N99: a measured row needs"):
        PinRow(id="N99", name="x", holds="x", who=("depth",), mode="refused", figure=lambda v: v)
    with pytest.raises(ValueError, match="N98: an unmeasured row has no"):
        PinRow(
            id="N98",
            name="x",
            holds="x",
            who=("at run time",),
            mode="refused",
            unmeasured_reason="read off the run",
            hold=lambda c: Outcome(),
        )


def test_only_the_block_row_reports_without_controls_and_only_shape_reports_another_figure() -> (
    None
):
    assert [r.id for r in ROWS if r.reports_without_controls] == ["N29"]
    assert [r.id for r in ROWS if r.reported_figure is not None] == ["N33"]


def test_modes_and_who_as_designed() -> None:
    assert BY_ID["N5"].mode == "reported" and BY_ID["N5"].who == ("distractor",)
    assert BY_ID["N7"].report_only_for == ("shape",) and BY_ID["N7"].knobs() == KNOBS
    assert BY_ID["N29"].mode == BY_ID["N33"].mode == "reported-and-refused"
    assert BY_ID["N9"].knobs() == ("depth",) and BY_ID["N9"].controls_only("depth")
    assert not BY_ID["N4"].controls_only("depth")
    assert {r.id for r in ROWS if not r.measurable} == {"N10", "N13"}
    assert BY_ID["N4"].knobs() == ("depth", "faults", "history", "arguments", "spread")


# ------------------------------------------------------------------ measure_pins


@pytest.mark.parametrize("knob", KNOBS)
def test_every_row_is_measured_or_unmeasured_exactly_once(knob: str) -> None:
    for spec in all_arms(knob):
        m = measure_pins(generate(spec, 1))
        assert set(m.measured) | set(m.unmeasured) == set(ROW_IDS)
        assert not set(m.measured) & set(m.unmeasured)
        assert set(m.unmeasured) == {"N10", "N13"}
        assert all("generation time" in r or "trace" in r for r in m.unmeasured.values())


def test_rows_of_other_knobs_are_still_measured() -> None:
    m = measure_pins(generate("depth:d3", 0))
    assert m.value("N27") == {"tools": 16}
    assert m.value("N8")["sizes"] == [LINE_BYTES]
    assert m.value("N11") == {"verifier": "strict"}
    assert m.value("N19") == {"lookalike_tools": 0}
    assert m.value("N33")["stage_calls"] == 3
    leaky = measure_pins(generate("depth:d3/leaky", 0))
    assert leaky.value("N11") == {"verifier": "leaky"}


@pytest.mark.parametrize("knob", KNOBS)
def test_every_reference_and_seeded_answer_is_52_bytes(knob: str) -> None:
    for spec in all_arms(knob):
        assert measure_pins(generate(spec, 2)).value("N8")["sizes"] == [LINE_BYTES]


@pytest.mark.parametrize("knob", KNOBS)
def test_block_tokens_tool_by_tool_equal_the_whole_blocks_count(knob: str) -> None:
    from poisson_tasks.bundle import canonical_json
    from poisson_tasks.tokens import count_tokens

    for spec in all_arms(knob):
        for seed in (0, 11):
            b = generate(spec, seed)
            whole = count_tokens(canonical_json(b.tools).decode())
            assert views.block_tokens(b) == whole
            flipped = b.model_copy(update={"tools": b.tools[::-1]})
            flipped_whole = count_tokens(canonical_json(flipped.tools).decode())
            assert views.block_tokens(flipped) == flipped_whole
    odd = generate("depth:d1", 0)
    odd = odd.model_copy(update={"tools": [{"name": "x"}, *odd.tools]})
    assert views.block_tokens(odd) == count_tokens(canonical_json(odd.tools).decode())


def test_block_digests_are_the_bundles_own_digests() -> None:
    from poisson_tasks.bundle import digest

    for arm in ("arguments:a6", "depth:d3", "spread:p4"):
        b = generate(arm, 3)
        v = measure_pins(b).value("N4")
        reads = [t for t in b.tools if views.bindings(b)[t["function"]["name"]].kind != "stage"]
        assert v == {"block": digest(b.tools), "names_and_reads": digest([b.tool_names, reads])}


def test_hashes_and_seeded_tokens_are_read_off_the_bundle() -> None:
    b = generate("depth:d1+h8", 4)
    m = measure_pins(b)
    assert m.value("N12")["generator_hash"] == b.generator_hash
    assert m.value("N9")["seeded_tokens"] == history_tokens(b.prompt[1:])  # type: ignore[index]
    assert m.value("N9")["seeded_tokens"] > 0
    assert measure_pins(generate("depth:d1", 4)).value("N9")["seeded_tokens"] == 0


# ------------------------------------------------------------------ sweeps that hold


@pytest.mark.parametrize("knob", KNOBS)
def test_each_knobs_sweep_holds_on_a_few_seeds(knob: str) -> None:
    for seed in FAST_SEEDS:
        report = check_pins(contrast(knob, seed))
        assert not report.refused, report.message()
        assert len(report.arms) == len(all_arms(knob))
        assert [r.row for r in report.rows] == list(ROW_IDS)
        assert {r.row for r in report.rows if r.verdict == "unmeasured"} == {"N10", "N13"}


@pytest.mark.slow
def test_every_knob_holds_over_the_sixty_eval_seeds() -> None:
    arms = [a for k in KNOBS for a in all_arms(k)]
    report = check_plan(arms, range(60))
    assert len(report.contrasts) == len(KNOBS)
    assert not report.refused, report.message()


def test_who_column_decides_what_applies() -> None:
    report = check_pins(contrast("depth"))
    verdicts = {r.row: r.verdict for r in report.rows}
    assert verdicts["N9"] == "held"
    for row in ("N5", "N19", "N23", "N27", "N29", "N35", "N26"):
        assert verdicts[row] == "not applicable"
    for row in ("N1", "N2", "N3", "N4", "N6", "N7", "N8", "N11", "N12"):
        assert verdicts[row] == "held"


def test_control_rows_do_not_apply_without_a_control() -> None:
    report = check_pins(contrast("faults", only=("faults:f0", "faults:f4")))
    assert report.verdict("N26") == "not applicable"
    assert report.verdict("N25") == "held"


def test_a_control_whose_higher_arm_is_absent_is_held_against_a_generated_one() -> None:
    calls: list[str] = []

    def companion(spec: ArmSpec) -> Any:
        calls.append(spec.id)
        return measure_pins(generate(spec, 0))

    report = check_pins(contrast("depth", only=("depth:d1", "depth:d1+h8")), companion=companion)
    assert report.verdict("N9") == "held"
    assert sorted(calls) == ["depth:d8"]


# ------------------------------------------------------------------ N9, N7, N5 as defined


@pytest.mark.parametrize("seed", [0, 7, 31])
def test_depth_band_is_the_higher_transcript_less_the_controls_own_within_two(seed: int) -> None:
    bundles = contrast("depth", seed)
    t = {
        arm: measure_pins(bundles[arm]).value("N9")["transcript_tokens"]
        for arm in ("depth:d2", "depth:d5", "depth:d8", "depth:d1+h8", "depth:d2+h5")
    }
    report = check_pins(bundles)
    detail = next(r.detail for r in report.rows if r.row == "N9")
    d1h8 = re.search(r"depth:d1\+h8 (-?\d+)<=(\d+)<=(\d+)", detail)
    d2h5 = re.search(r"depth:d2\+h5 (-?\d+)<=(\d+)<=(\d+)", detail)
    assert d1h8 and d2h5
    want_d1h8 = t["depth:d8"] - t["depth:d1+h8"]
    want_d2h5 = t["depth:d5"] - t["depth:d2+h5"]
    assert (int(d1h8[1]), int(d1h8[3])) == (want_d1h8 - BAND, want_d1h8 + BAND)
    assert (int(d2h5[1]), int(d2h5[3])) == (want_d2h5 - BAND, want_d2h5 + BAND)
    assert report.verdict("N9") == "held"


def test_n9_refuses_a_control_seeded_one_read_call_per_missing_stage() -> None:
    """The depth controls were once seeded with one read call per stage they stand in for (seven
    for d1+h8): 48 to 106 tokens short of what a depth-8 episode adds, at seeds 0-59. N9 refuses
    that history; the generated control is held."""
    bundles = contrast("depth", 0)
    control = bundles["depth:d1+h8"]
    sc = draw_scenario("eval", 0)
    reads = [b.name for b in control.engine.bindings if b.kind == "read"]
    pairs: list[dict[str, Any]] = []
    for i in range(7):  # the old rule: the scenario's i-th query on the block's i-th read tool
        name, query = reads[i % len(reads)], sc.queries[i % len(sc.queries)]
        line = format_line(i + 1, "ok", read_payload(sc.key, name, query))
        pairs += exchange(f"call_seed_{i + 1}", name, {"query": query}, line)
    old = _history(control, pairs)
    assert check_pins(bundles).verdict("N9") == "held"
    report = check_pins({**bundles, old.arm_id: old})
    assert report.verdict("N9") == "violated"
    (problem,) = [v for v in report.violations if v.row == "N9"]
    assert "depth:d1+h8" in problem.arms


def _bystander_code(b: TaskBundle, code: str) -> TaskBundle:
    """The bundle whose bystander (the scenario's sibling record) holds another entry code."""
    sibling = draw_scenario(b.split, b.seed).sibling_id
    rows = [r._replace(token=code) if r.record_id == sibling else r for r in b.initial_state]
    return _engine(b, rows=tuple(sorted(rows))).model_copy(update={"initial_state": rows})


def _seeded_query(b: TaskBundle, query: str) -> TaskBundle:
    """The bundle whose first seeded read call asks another query (its answer left as it was)."""
    assert isinstance(b.prompt, list)
    ask = b.prompt[1]
    call = ask["tool_calls"][0]
    arguments = json.dumps({"query": query}, sort_keys=True)
    changed = {**call, "function": {**call["function"], "arguments": arguments}}
    return _history(b, [{**ask, "tool_calls": [changed]}, *b.prompt[2:]])


@pytest.mark.parametrize(
    ("knob", "arm", "tamper", "field"),
    [
        ("depth", "depth:d3", lambda b: _bystander_code(b, "0" * 12), "sibling_code"),
        ("history", "history:t600", lambda b: _seeded_query(b, "f" * 32), "queries"),
    ],
)
def test_n1_holds_every_seed_drawn_field_not_only_six(
    knob: str, arm: str, tamper: Callable[[TaskBundle], TaskBundle], field: str
) -> None:
    """N1 once measured six seed-drawn values (split, seed, key, class, record, entry code): a
    bundle whose bystander code or seeded query was not its scenario's passed it."""
    bundles = contrast(knob, 2)
    assert measure_pins(bundles[arm]).value("N1")["departures"] == []
    report = check_pins({**bundles, arm: tamper(bundles[arm])})
    assert "N1" in report.violated_rows
    (problem,) = [v for v in report.violations if v.row == "N1"]
    assert problem.arms == [arm] and field in problem.detail


def test_n1_reads_every_scenario_field_on_every_knob() -> None:
    """Every field of the scenario is either read off the bundle by N1 or is N2's (the layout)."""
    sc = draw_scenario("eval", 4)
    named = {"split", "seed", "layout"}
    for k in KNOBS:
        for spec in all_arms(k):
            value = measure_pins(generate(spec, 4)).value("N1")
            assert value["departures"] == [], spec.id
            assert value["scenario"] == sc.digest()
    source = (ROOT / "src/poisson_tasks/pins/rows/scenario.py").read_text(encoding="utf-8")
    read = {f for f in Scenario.__dataclass_fields__ if f"sc.{f}" in source}
    assert read | named == set(Scenario.__dataclass_fields__)


def test_n5_only_reports_even_when_the_block_grows() -> None:
    bundles = contrast("distractor", 0)
    report = check_pins(bundles)
    assert report.verdict("N5") == "reported"
    n5 = next(r for r in report.reported if r.row == "N5")
    assert len(set(n5.values.values())) > 1  # the block's tokens move with the level
    grown = dict(bundles)
    b = grown["distractor:r0@k16"]
    extra = {**b.tools[-1], "function": {**b.tools[-1]["function"], "description": "x " * 400}}
    grown[b.arm_id] = b.model_copy(update={"tools": [*b.tools[:-1], extra]})
    again = check_pins(grown)
    assert "N5" not in again.violated_rows and again.verdict("N5") == "reported"


def _add_to_instruction(b: TaskBundle, words: str) -> TaskBundle:
    """Append words to the template and the instruction alike, so N6 still renders."""
    parts = PromptParts(
        template=b.prompt_parts.template + words,
        slots=b.prompt_parts.slots,
        knob_slots=b.prompt_parts.knob_slots,
    )
    if isinstance(b.prompt, str):
        return b.model_copy(update={"prompt": b.prompt + words, "prompt_parts": parts})
    first = {**b.prompt[0], "content": b.prompt[0]["content"] + words}
    return b.model_copy(update={"prompt": [first, *b.prompt[1:]], "prompt_parts": parts})


def test_n7_counts_instruction_words_inside_tool_names() -> None:
    b = generate("distractor:r0@k16", 0)
    read = next(n for n in b.tool_names if views.bindings(b)[n].kind == "read")
    before = measure_pins(b).value("N7")
    after = measure_pins(_add_to_instruction(b, f" Ignore {read}.")).value("N7")
    assert after["count"] == before["count"] + len(views.words(read))


def test_n7_is_reported_not_refused_on_shape() -> None:
    bundles = contrast("shape", 0)
    b = bundles["shape:w4"]
    read = next(n for n in b.tool_names if views.bindings(b)[n].kind == "read")
    bundles = {
        k: _add_to_instruction(v, f" Ignore {read}.") if k == "shape:w4" else v
        for k, v in bundles.items()
    }
    report = check_pins(bundles)
    counts = {a: measure_pins(v).value("N7")["count"] for a, v in bundles.items()}
    assert len(set(counts.values())) > 1
    assert report.verdict("N7") == "reported"
    assert "N7" not in report.violated_rows
    assert any(r.row == "N7" for r in report.reported)


def _r14_contrast_n7(seeds: range) -> None:
    arms = list(all_arms("distractor"))
    assert any(s.level == 14 for s in arms)
    report = check_plan(arms, seeds)
    verdicts = {r.seed: r.verdict("N7") for r in report.contrasts[0].reports}
    assert set(verdicts.values()) == {"held"}, {s: v for s, v in verdicts.items() if v != "held"}


def test_n7_never_refuses_a_distractor_r14_contrast_on_twenty_seeds() -> None:
    _r14_contrast_n7(range(20))


@pytest.mark.slow
def test_n7_never_refuses_a_distractor_r14_contrast_on_seeds_0_to_199() -> None:
    _r14_contrast_n7(range(200))


# ------------------------------------------------------------------ breaks that refuse


def _engine(b: TaskBundle, **update: Any) -> TaskBundle:
    """The bundle with a rebuilt engine config (not model_copy: its binding cache would survive)."""
    e = b.engine
    fields = {
        "key": e.key,
        "rows": e.rows,
        "bindings": e.bindings,
        "faults": e.faults,
        "start_seq": e.start_seq,
        **update,
    }
    return b.model_copy(update={"engine": EngineConfig(**fields)})


def _tool(b: TaskBundle, name: str, fn: Callable[[dict[str, Any]], dict[str, Any]]) -> TaskBundle:
    tools = [
        {**t, "function": fn(dict(t["function"]))} if t["function"]["name"] == name else t
        for t in b.tools
    ]
    return b.model_copy(update={"tools": tools})


def _describe(b: TaskBundle, name: str, text: str) -> TaskBundle:
    return _tool(b, name, lambda f: {**f, "description": text})


def _history(b: TaskBundle, messages: list[dict[str, Any]]) -> TaskBundle:
    assert isinstance(b.prompt, list)
    return b.model_copy(update={"prompt": [b.prompt[0], *messages]})


def _swap(b: TaskBundle, i: int, j: int) -> TaskBundle:
    tools = list(b.tools)
    tools[i], tools[j] = tools[j], tools[i]
    binds = list(b.engine.bindings)
    bi = next(k for k, x in enumerate(binds) if x.name == b.tools[i]["function"]["name"])
    bj = next(k for k, x in enumerate(binds) if x.name == b.tools[j]["function"]["name"])
    binds[bi], binds[bj] = binds[bj], binds[bi]
    return _engine(b.model_copy(update={"tools": tools}), bindings=tuple(binds))


def _first_read(b: TaskBundle) -> str:
    return next(n for n in b.tool_names if views.bindings(b)[n].kind == "read")


def _set_slot(b: TaskBundle, slot: str, value: str) -> TaskBundle:
    """One prompt slot changed, and the instruction re-rendered from the template."""
    slots = {**b.prompt_parts.slots, slot: value}
    parts = b.prompt_parts.model_copy(update={"slots": slots})
    text = parts.template.format(**slots)
    if isinstance(b.prompt, str):
        return b.model_copy(update={"prompt": text, "prompt_parts": parts})
    return b.model_copy(
        update={"prompt": [{**b.prompt[0], "content": text}, *b.prompt[1:]], "prompt_parts": parts}
    )


def break_n1(c: Bundles) -> Bundles:
    return {"depth:d3": _engine(c["depth:d3"], key="0" * 32)}


def break_n2(c: Bundles) -> Bundles:
    b = c["distractor:r4@k16"]
    right = views.right_tools(b)[0]
    i = b.tool_names.index(right)
    return {b.arm_id: _swap(b, i, (i + 1) % len(b.tools))}


def break_n3(c: Bundles) -> Bundles:
    b = c["depth:d2"]
    return {b.arm_id: b.model_copy(update={"system_prompt": b.system_prompt + " Be quick."})}


def break_n4(c: Bundles) -> Bundles:
    b = c["depth:d3"]
    return {b.arm_id: _describe(b, _first_read(b), "Read-only lookup; changes nothing at all.")}


def break_n6(c: Bundles) -> Bundles:
    return {"depth:d1": _add_to_instruction(c["depth:d1"], " Thank you.")}


def break_n7(c: Bundles) -> Bundles:
    read = _first_read(c["distractor:r0@k16"])
    return {k: _add_to_instruction(v, f" Ignore {read}.") for k, v in c.items()}


def break_n8(c: Bundles) -> Bundles:
    b = c["depth:d1"]
    obs = [b.reference_observations[0] + " ", *b.reference_observations[1:]]
    return {b.arm_id: b.model_copy(update={"reference_observations": obs})}


def break_n9(c: Bundles) -> Bundles:
    b = c["depth:d1+h8"]
    assert isinstance(b.prompt, list)
    return {b.arm_id: _history(b, b.prompt[1:3])}


def break_n11(c: Bundles) -> Bundles:
    return {"depth:d3": c["depth:d3"].model_copy(update={"verifier": "leaky"})}


def break_n12(c: Bundles) -> Bundles:
    return {"depth:d3": c["depth:d3"].model_copy(update={"generator_hash": "0" * 64})}


def _lookalikes(b: TaskBundle) -> list[ToolBinding]:
    goal = b.goal[0].ledger
    return [x for x in b.engine.bindings if x.kind == "stage" and x.ledger != goal]


def break_n19(c: Bundles) -> Bundles:
    b = c["similarity:s2"]
    first = _lookalikes(b)[0]
    target = b.goal[0].ledger  # the tool now works the target's ledger: no longer a lookalike
    binds = tuple(
        x.model_copy(update={"ledger": target}) if x == first else x for x in b.engine.bindings
    )
    return {b.arm_id: _engine(b, bindings=binds)}


def break_n20(c: Bundles) -> Bundles:
    b = c["similarity:s1"]
    name = _lookalikes(b)[0].name
    return {b.arm_id: _describe(b, name, "A lookalike tool, described at much greater length.")}


def break_n21(c: Bundles) -> Bundles:
    b = c["similarity:s2"]
    old = _lookalikes(b)[0].ledger
    cls, target = b.goal[0].ledger.split("-")
    other = "".join(str((int(d) + 1) % 10 or 1) for d in target)  # shares no digit in place
    binds = tuple(
        x.model_copy(update={"ledger": f"{cls}-{other}"}) if x.ledger == old else x
        for x in b.engine.bindings
    )
    return {b.arm_id: _engine(b, bindings=binds)}


def break_n22(c: Bundles) -> Bundles:
    b = c["similarity:s1"]
    right = views.right_tools(b)[0]
    for old, new in (
        ("Advance", "Promote"),
        ("Advance", "Move"),
        ("record", "row"),
        ("stage 0", "stage 5"),
        ("Returns", "Gives"),
    ):
        edited = _tool(
            b, right, lambda f, o=old, n=new: {**f, "description": f["description"].replace(o, n)}
        )
        if edited.tools != b.tools and views.block_tokens(edited) == views.block_tokens(b):
            return {b.arm_id: edited}  # the right tool edited, the block's tokens kept (N20)
    raise AssertionError("no one-word edit keeps the block's tokens")


def break_n23(c: Bundles) -> Bundles:
    b = c["history:t600"]
    assert isinstance(b.prompt, list)
    return {b.arm_id: _history(b, b.prompt[1:-2])}


def break_n24(c: Bundles) -> Bundles:
    b = c["history:t600"]
    assert isinstance(b.prompt, list)
    history = list(b.prompt[1:])
    line = history[1]["content"]
    for digit in "0123456789abcdef":  # one payload digit changed, the history's tokens kept
        changed = line[:-1] + digit
        if changed == line:
            continue
        trial = [history[0], {**history[1], "content": changed}, *history[2:]]
        if history_tokens(trial) == history_tokens(history):
            return {b.arm_id: _history(b, trial)}
    raise AssertionError("no one-digit change keeps the history's tokens")


def break_n25(c: Bundles) -> Bundles:
    b = c["faults:f2"]
    review, sample = views.right_tools(b)[:2]
    faults = (FaultPlan(tool=review, count=2), FaultPlan(tool=sample, count=0))
    return {b.arm_id: _engine(b, faults=faults)}


def break_n26(c: Bundles) -> Bundles:
    b = c["faults:f0+len(f4)"]
    assert isinstance(b.prompt, list)
    return {b.arm_id: _history(b, b.prompt[1:-2])}


def break_n27(c: Bundles) -> Bundles:
    b = c["block:k32"]
    last = b.tool_names[-1]
    assert views.bindings(b)[last].kind == "read"
    return {
        b.arm_id: _engine(
            b.model_copy(update={"tools": b.tools[:-1]}),
            bindings=tuple(x for x in b.engine.bindings if x.name != last),
        )
    }


def break_n28(c: Bundles) -> Bundles:
    out = {}
    for a in ("block:k16", "block:k32", "block:k64"):
        b = c[a]
        for offset, right in enumerate(views.right_tools(b)):
            b = _swap(b, b.tool_names.index(right), 9 + offset)
        out[a] = b
    return out


def break_n29(c: Bundles) -> Bundles:
    b = c["block:k8+len(k64)"]
    half = " ".join(b.system_filler.split()[: len(b.system_filler.split()) // 2])
    system = b.system_prompt[: -len(b.system_filler)] + half
    return {b.arm_id: b.model_copy(update={"system_filler": half, "system_prompt": system})}


def break_n30(c: Bundles) -> Bundles:
    b = c["arguments:a4"]
    right = views.right_tools(b)[0]
    return {b.arm_id: _describe(b, right, "Advance a record; the description was edited.")}


def break_n31(c: Bundles) -> Bundles:
    b = c["arguments:a6"]
    fixed = views.bindings(b)[views.right_tools(b)[0]].fixed
    _, value = fixed[0]
    wrong = value[:-1] + ("1" if value[-1] != "1" else "2")
    return {b.arm_id: _set_slot(b, "extra", b.prompt_parts.slots["extra"].replace(value, wrong))}


def break_n32(c: Bundles) -> Bundles:
    b = c["arguments:a2+len(a8)"]
    extra = b.prompt_parts.slots["extra"]
    return {b.arm_id: _set_slot(b, "extra", extra[: len(extra) // 2].rstrip())}


def break_n33(c: Bundles) -> Bundles:
    b = c["shape:w2"]
    reads = [x.name for x in b.engine.bindings if x.kind == "read"]
    order = draw_scenario(b.split, b.seed).reads
    last = max(reads, key=order.index)  # the scenario's last read: the rest stay its first reads
    return {
        b.arm_id: _engine(
            b.model_copy(update={"tools": b.tools[:-1]}),
            bindings=tuple(x for x in b.engine.bindings if x.name != last),
        )
    }


def break_n34(c: Bundles) -> Bundles:
    b = c["shape:w1+len(w4)"]
    lines = b.prompt_parts.slots["goal_lines"]
    return {b.arm_id: _set_slot(b, "goal_lines", lines[: len(lines) * 2 // 3].rstrip())}


def break_n35(c: Bundles) -> Bundles:
    b = c["spread:p2"]
    binds = tuple(
        x.model_copy(update={"part": "ffffff"}) if x.part is not None else x
        for x in b.engine.bindings
    )
    return {b.arm_id: _engine(b, bindings=binds)}


# row -> (knob whose contrast is broken, seed, the break)
BREAKS: dict[str, tuple[str, int, Callable[[Bundles], Bundles]]] = {
    "N1": ("depth", 0, break_n1),
    "N2": ("distractor", 0, break_n2),
    "N3": ("depth", 0, break_n3),
    "N4": ("depth", 0, break_n4),
    "N6": ("depth", 0, break_n6),
    "N7": ("distractor", 0, break_n7),
    "N8": ("depth", 0, break_n8),
    "N9": ("depth", 0, break_n9),
    "N11": ("depth", 0, break_n11),
    "N12": ("depth", 0, break_n12),
    "N19": ("similarity", 0, break_n19),
    "N20": ("similarity", 0, break_n20),
    "N21": ("similarity", 0, break_n21),
    "N22": ("similarity", 0, break_n22),
    "N23": ("history", 0, break_n23),
    "N24": ("history", 0, break_n24),
    "N25": ("faults", 0, break_n25),
    "N26": ("faults", 0, break_n26),
    "N27": ("block", 0, break_n27),
    "N28": ("block", 0, break_n28),
    "N29": ("block", 0, break_n29),
    "N30": ("arguments", 0, break_n30),
    "N31": ("arguments", 0, break_n31),
    "N32": ("arguments", 0, break_n32),
    "N33": ("shape", 0, break_n33),
    "N34": ("shape", 0, break_n34),
    "N35": ("spread", 0, break_n35),
}
# N28's break moves the right tools past slot eight in every arm that has the room.
_WITHOUT = {"N28": ("block:k8", "block:k8+len(k64)")}


def test_every_refusing_row_has_a_break() -> None:
    assert set(BREAKS) == set(REFUSING)
    assert {r.id for r in ROWS if r.mode != "reported" and r.measurable} == set(REFUSING)


@pytest.mark.parametrize("row", sorted(BREAKS, key=lambda r: int(r[1:])))
def test_a_break_is_refused_by_exactly_its_row(row: str) -> None:
    knob, seed, brk = BREAKS[row]
    if knob not in BUILDERS:
        pytest.skip(f"generator/{knob}.py has not landed (no BUILDERS entry)")
    bundles = {a: b for a, b in contrast(knob, seed).items() if a not in _WITHOUT.get(row, ())}
    assert not check_pins(bundles).refused
    broken = {**bundles, **brk(bundles)}
    report = check_pins(broken)
    assert report.violated_rows == {row}, report.message()
    assert report.verdict(row) == "violated"
    v = next(v for v in report.violations if v.row == row)
    assert v.arms and set(v.values) <= set(v.arms)
    assert row in report.message() and any(a in report.message() for a in v.arms)


# ------------------------------------------------------------------ contrasts and plans


def test_check_pins_refuses_what_is_not_one_contrast() -> None:
    with pytest.raises(PinError, match="one knob"):
        check_pins({"depth:d1": generate("depth:d1", 0), "faults:f1": generate("faults:f1", 0)})
    with pytest.raises(PinError, match="one seed"):
        check_pins({"depth:d1": generate("depth:d1", 0), "depth:d2": generate("depth:d2", 1)})
    with pytest.raises(PinError, match="key each by its arm id"):
        check_pins({"depth:d2": generate("depth:d1", 0)})
    with pytest.raises(PinError, match="at least one"):
        check_pins({})


def test_a_contrast_of_mixed_splits_is_refused_by_the_scenario_row() -> None:
    report = check_pins(
        {"depth:d1": generate("depth:d1", 0), "depth:d3/train": generate("depth:d3/train", 0)}
    )
    assert "N1" in report.violated_rows


def test_check_plan_makes_one_contrast_per_knob_split_and_strictness() -> None:
    report = check_plan(["depth:d1", "depth:d3", "faults:f1", "depth:d1/leaky"], [0, 1])
    keys = [(c.knob, c.strictness, c.arms) for c in report.contrasts]
    assert keys == [
        ("depth", "strict", ["depth:d1", "depth:d3"]),
        ("faults", "strict", ["faults:f1"]),
        ("depth", "leaky", ["depth:d1/leaky"]),
    ]
    assert all(len(c.reports) == 2 for c in report.contrasts)
    assert not report.refused and "held" in report.message()


def test_report_lines_name_every_row() -> None:
    report: PinReport = check_pins(contrast("spread", 0))
    text = "\n".join(report.lines())
    for row in ROW_IDS:
        assert re.search(rf"^  {row}\s", text, re.M)
    assert "not refused" in text


def test_parse_seeds() -> None:
    assert parse_seeds("0-3") == [0, 1, 2, 3]
    assert parse_seeds("5,0-2,2") == [5, 0, 1, 2]
    for bad in ("a", "3-1", "1-", ""):
        with pytest.raises(PinError):
            parse_seeds(bad)


def test_pin_targets() -> None:
    assert pin_targets(arms="depth:d1, depth:d3", seeds="0-1") == (["depth:d1", "depth:d3"], [0, 1])
    assert pin_targets(arms="depth:d1")[1] == list(range(60))
    read: list[str] = []

    def smoke() -> tuple[list[str], list[int]]:
        read.append("smoke")
        plan = load_preregistration(ROOT / "preregistrations" / "smoke.yaml")
        return list(plan.arms), list(plan.seeds)

    with pytest.raises(PinError, match="not both"):
        pin_targets(arms="depth:d1", plan=smoke)
    with pytest.raises(PinError, match="put it in --arms"):
        pin_targets(arm="depth:d1", arms="depth:d3")
    assert read == []  # the plan is read only once the options fit together
    arms, seeds = pin_targets(plan=smoke)
    assert "depth:d1+h8" in arms and len(seeds) == 50


# ------------------------------------------------------------------ the command line


def test_cli_prints_every_row_and_exits_0() -> None:
    args = ["generate", "--arms", "spread:p1,spread:p4", "--seeds", "0-1"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "contrast spread (eval, strict)" in result.output
    for row in ROW_IDS:
        assert re.search(rf"^  {row}\s", result.output, re.M)
    assert re.search(r"^  N35  spread reads\s+held 2/2", result.output, re.M)


def test_cli_plan_reads_a_preregistration() -> None:
    smoke = ROOT / "preregistrations" / "smoke.yaml"
    result = CliRunner().invoke(app, ["generate", "--plan", str(smoke)])
    assert result.exit_code == 0, result.output
    assert "contrast depth" in result.output and "50 seeds" in result.output


def test_cli_exits_2_with_one_line_when_a_row_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(spec: ArmSpec | str, seed: int) -> TaskBundle:
        b = generate(spec, seed)
        if b.arm_id == "depth:d3":
            return b.model_copy(update={"system_prompt": b.system_prompt + " Hurry."})
        return b

    monkeypatch.setattr("poisson_tasks.pins.plan.generate", broken)
    result = CliRunner().invoke(app, ["generate", "--arms", "depth:d1,depth:d3", "--seeds", "0"])
    assert result.exit_code == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "N3 system prompt" in errors[0] and "depth" in errors[0]


def test_cli_bad_input_is_one_line_exit_2() -> None:
    runner = CliRunner()
    for args in (
        ["generate", "depth:d1", "--arms", "depth:d3"],
        ["generate", "--arms", "depth:d9"],
        ["generate", "--arms", "depth:d1", "--seeds", "9-1"],
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, args
        assert result.stderr.count("error:") == 1


def test_cli_single_arm_still_generates() -> None:
    result = CliRunner().invoke(app, ["generate", "depth:d3", "--seed", "2"])
    assert result.exit_code == 0 and "depth:d3  seed 2" in result.output


# ------------------------------------------------------------------ the doc


def _doc_rows() -> list[tuple[str, str, str, str]]:
    text = (ROOT / "docs" / "knobs-and-arms.md").read_text(encoding="utf-8")
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 5 and re.fullmatch(r"N\d+", cells[0]):
            rows.append((cells[0], cells[1], cells[3], cells[4]))
    return rows


def test_the_docs_pin_table_is_the_codes() -> None:
    assert _doc_rows() == [(r.id, r.name, r.who_text(), r.mode_text()) for r in ROWS]


def test_every_printed_row_names_itself() -> None:
    # issue 34 item 5: the ledger printed bare codes (`N5   not applicable 10/10 ...`)
    summary = check_plan(["depth:d1", "depth:d3", "depth:d1+h8", "depth:d2+h5"], [0, 1]).lines()
    one = check_pins({a: generate(a, 0) for a in ("faults:f0", "faults:f4")}).lines()
    for lines in (summary, one):
        printed = {line.split()[0]: line for line in lines if re.match(r"  N\d+ ", line)}
        assert set(printed) == {r.id for r in ROWS}
        for row in ROWS:
            assert printed[row.id].startswith(f"  {row.id:<4} {row.name} "), printed[row.id]
    names = [r.name for r in ROWS]
    assert len(set(names)) == len(names), "each row's name tells it apart"
    bundles = {s.id: generate(s, 3) for s in all_arms("history")}
    b = bundles["history:t600"]
    bundles["history:t600"] = b.model_copy(update={"prompt": b.prompt[:-2]})
    report = check_pins(bundles)
    assert "N23 history tokens refused (history:t600)" in report.message()


def test_the_docs_command_excerpts_are_what_the_command_prints() -> None:
    import shlex

    text = (ROOT / "docs" / "knobs-and-arms.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```\n\$ (poisson-tasks generate --arms .*?)\n(.*?)```", text, re.S)
    assert len(blocks) >= 2
    for command, excerpt in blocks:
        result = CliRunner().invoke(app, shlex.split(command)[1:])
        assert result.exit_code == 0, result.output
        printed = [line.rstrip() for line in result.output.splitlines()]
        for line in excerpt.splitlines():
            if line.strip() != "...":
                assert line.rstrip() in printed, f"{command}: {line!r} is not printed any more"


def test_check_plan_with_workers_gives_the_same_report() -> None:
    from poisson_tasks.pins import check_plan

    arms = [a.id for k in ("faults", "depth") for a in all_arms(k)]
    one = check_plan(arms, [0, 1, 2])
    two = check_plan(arms, [0, 1, 2], workers=2)
    assert one == two
    assert one.lines() == two.lines()
    with pytest.raises(PinError, match="workers"):
        check_plan(arms, [0], workers=0)


# ------------------------------------------------------------------ what the mutants showed (issue 32)
# Each test below kills mutants of pins/ that the suite let through (docs/mutation.md).


def test_reports_are_frozen() -> None:
    report = check_pins(contrast("depth", only=("depth:d1", "depth:d3")))
    with pytest.raises(ValidationError):
        report.knob = "faults"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        report.rows[0].verdict = "violated"  # type: ignore[misc]
    broken = check_pins(
        {**contrast("depth", only=("depth:d1", "depth:d3")), **break_n3(contrast("depth"))}
    )
    with pytest.raises(ValidationError):
        broken.violations[0].detail = ""  # type: ignore[misc]
    distractor = check_pins(contrast("distractor", only=("distractor:r0@k16", "distractor:r8@k16")))
    with pytest.raises(ValidationError):
        distractor.reported[0].detail = ""  # type: ignore[misc]


def test_a_report_line_shows_one_figure_when_every_arm_has_it() -> None:
    two = check_pins(contrast("distractor", only=("distractor:r0@k16", "distractor:r8@k16")))
    lines = {line.split()[0]: line for line in two.lines()[1:-1] if line.startswith("  N")}
    assert "all 52" in lines["N8"]  # the same figure on both arms: said once
    n5 = lines["N5"]  # block tokens differ by arm: each arm's figure
    assert "distractor:r0@k16=" in n5 and "distractor:r8@k16=" in n5 and "all" not in n5.split()
    one = check_pins(contrast("depth", only=("depth:d3",)))
    n8 = next(line for line in one.lines() if line.startswith("  N8 "))
    assert "depth:d3=52" in n8 and "all 52" not in n8  # one arm: named, not "all"


def test_a_control_is_held_against_the_contrasts_own_higher_arm() -> None:
    calls: list[str] = []

    def companion(spec: ArmSpec) -> Any:
        calls.append(spec.id)
        return measure_pins(generate(spec, 0))

    report = check_pins(contrast("depth"), companion=companion)
    assert report.verdict("N9") == "held" and calls == []
    faults = contrast("faults")
    assert check_pins(faults, companion=companion).verdict("N26") == "held" and calls == []


def test_a_row_registered_twice_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from poisson_tasks.pins import rows
    from poisson_tasks.pins.rows import block, length

    monkeypatch.setattr(rows, "_MODULES", (block, length, block))
    with pytest.raises(ValueError, match="registered twice: N27, N28, N29, N4, N5"):
        rows._registered()
    monkeypatch.setattr(rows, "_MODULES", (block, length))
    assert [r.id for r in rows._registered()] == ["N4", "N5", "N27", "N28", "N29", "N32", "N34"]


def test_n33_counts_only_stage_calls() -> None:
    """spread's reference makes four reads and two stage calls: two stage calls."""
    b = generate("spread:p4", 0)
    assert len(b.reference_calls) == 6
    assert measure_pins(b).value("N33")["stage_calls"] == 2


def test_n35_refuses_parts_numbered_out_of_another_count() -> None:
    """Parts that join to the entry code but say they are 1 and 2 of three, on the two-part arm."""
    bundles = contrast("spread", 0)
    b = bundles["spread:p2"]
    binds = tuple(
        x.model_copy(update={"part_status": x.part_status.replace("_of_2", "_of_3")})
        if x.part is not None
        else x
        for x in b.engine.bindings
    )
    report = check_pins({**bundles, b.arm_id: _engine(b, bindings=binds)})
    assert report.violated_rows == {"N35"}, report.message()
    assert "parts numbered [1, 2] of [3]" in report.message()


def test_n9_refuses_a_control_seeded_with_more_than_the_higher_arm_adds() -> None:
    bundles = contrast("depth", 0)
    b = bundles["depth:d1+h8"]
    assert isinstance(b.prompt, list)
    doubled = _history(b, [*b.prompt[1:], *b.prompt[1:]])
    report = check_pins({**bundles, b.arm_id: doubled})
    assert report.violated_rows == {"N9"}, report.message()
    assert "outside the band" in report.message()


def test_n24_names_every_seeded_call_that_is_not_a_read_of_the_block() -> None:
    b = generate("history:t600", 0)
    assert isinstance(b.prompt, list)
    history = [dict(m) for m in b.prompt[1:]]
    renamed = 0
    for message in history:
        if message.get("tool_calls") and renamed < 2:
            call = message["tool_calls"][0]
            fn = {**call["function"], "name": f"no_such_tool_{renamed}"}
            message["tool_calls"] = [{**call, "function": fn}]
            renamed += 1
    offenders = measure_pins(_history(b, history)).value("N24")["offenders"]
    assert offenders == [
        "no_such_tool_0: not a read tool of the block",
        "no_such_tool_1: not a read tool of the block",
    ]


def test_n26_holds_a_control_on_a_higher_base() -> None:
    """faults:f1+len(f4) keeps f1's own failure and seeds only what f4's failed calls add over
    it: the row holds it against f4 less f1."""
    arms = ("faults:f1", "faults:f4", "faults:f1+len(f4)")
    bundles = contrast("faults", 0, only=arms)
    report = check_pins(bundles)
    assert not report.refused, report.message()
    assert report.verdict("N26") == "held"
    higher = measure_pins(bundles["faults:f4"]).value("N26")["failed_call_tokens"]
    own = measure_pins(bundles["faults:f1"]).value("N26")["failed_call_tokens"]
    seeded = measure_pins(bundles["faults:f1+len(f4)"]).value("N26")["seeded_tokens"]
    assert own > 0 and abs(seeded - (higher - own)) <= 2


def test_n6_refuses_a_template_that_cannot_be_filled() -> None:
    """A template Python's format cannot read (a lone brace) does not render: N6 refuses it,
    and measuring it raises nothing."""
    bundles = contrast("depth", only=("depth:d1", "depth:d3"))
    b = bundles["depth:d1"]
    parts = b.prompt_parts.model_copy(update={"template": b.prompt_parts.template + " {"})
    broken = b.model_copy(update={"prompt_parts": parts})
    assert measure_pins(broken).value("N6")["renders"] is False
    report = check_pins({**bundles, "depth:d1": broken})
    assert "N6" in report.violated_rows
    assert "the prompt is not its template filled" in report.message()


def _measured(bundles: Bundles) -> dict[str, PinMeasurement]:
    return {a: measure_pins(b) for a, b in bundles.items()}


def _doctored(
    bundles: Bundles, row: str, edit: Callable[[str, Any], Any], arms: tuple[str, ...] = ()
) -> PinReport:
    """check_pins with one row's measured value replaced on some arms (all when none are named):
    the hold rule judged on values no generator makes."""
    measurements = _measured(bundles)
    for arm in arms or tuple(bundles):
        m = measurements[arm]
        value = edit(arm, copy.deepcopy(m.measured[row]))
        measurements[arm] = m.model_copy(update={"measured": {**m.measured, row: value}})
    return check_pins(bundles, measurements=measurements)


def _set(key: str, new: Any) -> Callable[[str, Any], Any]:
    return lambda _arm, value: {**value, key: new}


def test_a_verdict_is_found_by_an_equal_row_id() -> None:
    report = check_pins(contrast("depth", only=("depth:d1", "depth:d3")))
    assert report.verdict("".join(["N", "9"])) == report.verdict("N9") == "not applicable"
    assert report.verdict("".join(["N", "1"])) == "held"


def test_a_reported_row_carries_its_rules_own_account() -> None:
    report = check_pins(contrast("distractor", only=("distractor:r0@k16", "distractor:r8@k16")))
    assert next(r.detail for r in report.reported if r.row == "N5") == "block tokens by arm"


def test_the_block_row_reports_without_a_control_and_holds_with_one() -> None:
    plain = check_pins(contrast("block", only=("block:k8", "block:k16", "block:k64")))
    assert plain.verdict("N29") == "reported"
    n29 = next(r for r in plain.rows if r.row == "N29")
    assert n29.detail == "no control arm: block tokens reported"
    assert [r.row for r in plain.reported] == ["N29"]
    full = check_pins(contrast("block"))
    assert full.verdict("N29") == "held"
    n29 = next(r for r in full.rows if r.row == "N29")
    assert "block:k8+len(k64) filler" in n29.detail and "vs extra block" in n29.detail
    assert "N29" in [r.row for r in full.reported]


def test_a_contrasts_arms_are_ordered_plain_by_level_then_controls_by_level_and_control() -> None:
    arms = ("depth:d1+h8", "depth:d3", "depth:d1+h5", "depth:d1")
    report = check_pins({a: generate(a, 0) for a in arms})
    assert report.arms == ["depth:d1", "depth:d3", "depth:d1+h5", "depth:d1+h8"]


def test_check_pins_takes_the_bundles_first_and_the_rest_by_name() -> None:
    bundles = contrast("depth", only=("depth:d1", "depth:d3"))
    assert not check_pins(bundles=bundles).refused
    with pytest.raises(TypeError):
        check_pins(bundles, None)  # type: ignore[misc]


def test_a_bundle_keyed_under_another_arm_is_refused_either_way_round() -> None:
    for key, arm in (("depth:d2", "depth:d1"), ("depth:d1", "depth:d2")):
        with pytest.raises(PinError, match="key each by its arm id"):
            check_pins({key: generate(arm, 0)})


def test_a_report_is_headed_by_its_first_arm_in_order() -> None:
    report = check_pins(
        {"depth:d3/train": generate("depth:d3/train", 0), "depth:d1": generate("depth:d1", 0)}
    )
    assert (report.arms[0], report.split) == ("depth:d1", "eval")
    assert report.lines()[0].startswith("contrast depth (eval, strict) seed 0:")


def test_measurements_and_rows_are_frozen() -> None:
    m = measure_pins(generate("depth:d1", 0))
    with pytest.raises(ValidationError):
        m.seed = 3  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        BY_ID["N1"].mode = "reported"  # type: ignore[misc]


def test_a_contrast_that_holds_reports_nothing_it_was_not_asked_to() -> None:
    assert check_pins(contrast("depth")).reported == []


def test_within_is_two_tokens_either_way() -> None:
    for tokens, want in ((101, 103), (103, 101), (100, 102), (7, 7), (8, 7)):
        assert within(tokens, want), (tokens, want)
    for tokens, want in ((100, 103), (103, 100), (5, 2), (0, 3)):
        assert not within(tokens, want), (tokens, want)


def test_controls_only_is_true_only_for_a_knob_the_row_binds_by_its_controls() -> None:
    assert not BY_ID["N5"].controls_only("depth")  # binds distractor, not depth's controls
    assert BY_ID["N26"].controls_only("faults") and not BY_ID["N24"].controls_only("faults")


def test_the_block_rows_refuse_values_no_generator_makes() -> None:
    bundles = contrast("block", 0)
    assert check_pins(bundles).verdict("N27") == "held"
    more = _doctored(bundles, "N27", lambda a, v: {"tools": v["tools"] + 1}, ("block:k16",))
    assert more.violated_rows == {"N27"}
    ninth = _doctored(bundles, "N28", _set("right_slots", [0, 8]))
    assert ninth.violated_rows == {"N28"} and "not all among the first eight" in ninth.message()
    eighth = _doctored(bundles, "N28", _set("right_slots", [0, 7]))
    assert eighth.verdict("N28") == "held"


def test_the_stage_schema_row_reads_only_stage_tools() -> None:
    b = generate("arguments:a4", 0)
    stages = [n for n in b.tool_names if views.bindings(b)[n].kind == "stage"]
    assert 0 < len(stages) < len(b.tool_names)
    assert measure_pins(b).value("N30")["stage_tools"] == len(stages)


def _carrying(b: TaskBundle, value: Callable[[str], str]) -> TaskBundle:
    """The reference's first call carrying another value for its first fixed field."""
    call = b.reference_calls[0]
    field, fixed = views.bindings(b)[call.name].fixed[0]
    args = {**(call.arguments or {}), field: value(fixed)}
    calls = [call.model_copy(update={"arguments": args}), *b.reference_calls[1:]]
    return b.model_copy(update={"reference_calls": calls})


def test_n31_refuses_a_reference_call_that_carries_another_value() -> None:
    bundles = contrast("arguments", 0)
    b = bundles["arguments:a6"]
    for wrong in (lambda v: v + "0", lambda v: v[:-1], lambda v: "A" + v):
        report = check_pins({**bundles, b.arm_id: _carrying(b, wrong)})
        # N1 compares every field with the scenario's draws, so it refuses the value too
        assert report.violated_rows == {"N1", "N31"}, report.message()
        assert "missing from a reference call" in report.message()
    again = {a: TaskBundle.model_validate_json(x.model_dump_json()) for a, x in bundles.items()}
    assert not check_pins(again).refused  # read back from JSON: equal values, other objects


def test_n31_refuses_fixed_values_of_another_count_or_that_differ_between_tools() -> None:
    bundles = contrast("arguments", 0)

    def fixed(edit: Callable[[list[Any]], list[Any]]) -> Callable[[str, Any], Any]:
        return lambda _arm, value: {**value, "fixed": edit(value["fixed"])}

    report = _doctored(
        bundles, "N31", fixed(lambda f: [[n, v + v[:1]] for n, v in f]), ("arguments:a4",)
    )
    assert "fix [3, 3] values, not 2 each" in report.message()
    report = _doctored(
        bundles, "N31", fixed(lambda f: [[n, v[:1]] for n, v in f]), ("arguments:a4",)
    )
    assert "fix [1, 1] values, not 2 each" in report.message()
    for new in ("AAA", "zzz"):  # the second tool's values sort before, then after, the first's

        def differ(f: list[Any], new: str = new) -> list[Any]:
            (n1, v1), (n2, v2) = f
            return [[n1, v1], [n2, [[field, new] for field, _ in v2]]]

        report = _doctored(bundles, "N31", fixed(differ), ("arguments:a4",))
        assert "the stage tools fix different values" in report.message()


def test_the_shape_row_refuses_more_calls_or_tools_and_reports_block_tokens() -> None:
    bundles = contrast("shape", 0)
    held = check_pins(bundles)
    assert [r.row for r in held.reported] == ["N7", "N33"]
    n33 = next(r for r in held.reported if r.row == "N33")
    assert all(isinstance(v, int) and v > 100 for v in n33.values.values())  # block tokens
    for key in ("tools", "stage_calls"):
        report = _doctored(bundles, "N33", lambda a, v, k=key: {**v, k: v[k] + 1}, ("shape:w2",))
        assert report.violated_rows == {"N33"}, key


def test_the_spread_row_refuses_every_count_and_order_but_the_levels() -> None:
    bundles = contrast("spread", 0)
    arm = ("spread:p2",)
    cases: list[tuple[Callable[[str, Any], Any], str]] = [
        (lambda a, v: {**v, "reads": v["reads"][:3]}, "3 reads called, not 4"),
        (lambda a, v: {**v, "reads": [*v["reads"], "extra_read"]}, "5 reads called, not 4"),
        (lambda a, v: {**v, "parts": v["parts"][:1]}, "1 reads answer a part, not 2"),
        (lambda a, v: {**v, "parts": [*v["parts"], ["x", 3, 2, "00"]]}, "3 reads answer a part"),
        (
            lambda a, v: {**v, "parts": [[n, i + 1, of, p] for n, i, of, p in v["parts"]]},
            "parts numbered [2, 3] of [2]",
        ),
        (
            lambda a, v: {**v, "parts": [[n, i - 1, of, p] for n, i, of, p in v["parts"]]},
            "parts numbered [0, 1] of [2]",
        ),
        (
            lambda a, v: {**v, "parts": [[n, i, of - 1, p] for n, i, of, p in v["parts"]]},
            "parts numbered [1, 2] of [1]",
        ),
        (lambda a, v: {**v, "joined": "0" + v["joined"][1:]}, "parts join to"),
        (lambda a, v: {**v, "joined": "f" + v["joined"][1:]}, "parts join to"),
    ]
    for edit, says in cases:
        report = _doctored(bundles, "N35", edit, arm)
        assert "N35" in report.violated_rows and says in report.message(), says
    assert _doctored(bundles, "N35", lambda a, v: v, arm).verdict("N35") == "held"


def test_n35_reads_a_part_whose_status_it_cannot_parse_as_part_0_of_0() -> None:
    bundles = contrast("spread", 0)
    b = bundles["spread:p1"]
    binds = tuple(
        x.model_copy(update={"part_status": "ok"}) if x.part is not None else x
        for x in b.engine.bindings
    )
    report = check_pins({**bundles, b.arm_id: _engine(b, bindings=binds)})
    assert "N35" in report.violated_rows and "parts numbered [0] of [0]" in report.message()


def test_the_depth_band_is_what_the_higher_arm_adds_within_two_tokens() -> None:
    """For dL+hH the band is T(H) - T(L) +- 2, T(L) the control's own transcript (docs/knobs-and-
    arms.md, N9), also for controls whose levels have no candidate depth between them."""
    arms = ("depth:d3", "depth:d5", "depth:d8", "depth:d3+h5", "depth:d5+h8")
    bundles = {a: generate(a, 1) for a in arms}
    t = {a: measure_pins(b).value("N9")["transcript_tokens"] for a, b in bundles.items()}
    detail = next(r.detail for r in check_pins(bundles).rows if r.row == "N9")
    for control, high in (("depth:d3+h5", "depth:d5"), ("depth:d5+h8", "depth:d8")):
        extra = t[high] - t[control]
        assert re.search(rf"{re.escape(control)} {extra - 2}<=\d+<={extra + 2}(;|$)", detail), (
            detail
        )


def test_n9_holds_a_control_at_either_end_of_its_band_and_refuses_one_past_it() -> None:
    bundles = contrast("depth", 0)
    detail = next(r.detail for r in check_pins(bundles).rows if r.row == "N9")
    found = re.search(r"depth:d1\+h8 (-?\d+)<=(\d+)<=(\d+)", detail)
    assert found, detail
    lo, hi = int(found[1]), int(found[3])
    assert hi - lo == 4
    for seeded, held in ((lo, True), (hi, True), (lo - 1, False), (hi + 1, False)):
        report = _doctored(bundles, "N9", _set("seeded_tokens", seeded), ("depth:d1+h8",))
        assert (report.verdict("N9") == "held") is held, (seeded, report.message())
        assert held or report.violated_rows == {"N9"}


def _seeded(b: TaskBundle, edit: Callable[[list[dict[str, Any]]], None]) -> TaskBundle:
    assert isinstance(b.prompt, list)
    history = copy.deepcopy(b.prompt[1:])
    edit(history)
    return _history(b, history)


def _answer(history: list[dict[str, Any]], nth: int) -> dict[str, Any]:
    return [m for m in history if m.get("role") == "tool"][nth]


def test_n24_refuses_seeded_calls_to_stage_tools_or_answered_otherwise_than_ok() -> None:
    b = generate("history:t600", 0)
    stage = next(n for n in b.tool_names if views.bindings(b)[n].kind == "stage")

    def to_stage(history: list[dict[str, Any]]) -> None:
        call = history[0]["tool_calls"][0]
        call["function"] = {**call["function"], "name": stage}

    offenders = measure_pins(_seeded(b, to_stage)).value("N24")["offenders"]
    assert offenders == [f"{stage}: not a read tool of the block"]

    def statuses(history: list[dict[str, Any]]) -> None:
        for nth, status in ((0, "unavailable"), (1, "bad_args")):
            line = _answer(history, nth)["content"]
            _answer(history, nth)["content"] = line[:7] + status.ljust(12) + line[19:]

    offenders = measure_pins(_seeded(b, statuses)).value("N24")["offenders"]
    names = [m["tool_calls"][0]["function"]["name"] for m in b.prompt[1:3:2]]  # type: ignore[index]
    assert offenders[0] == f"{names[0]}: answered 'unavailable', not ok"
    assert len(offenders) == 2 and offenders[1].endswith("answered 'bad_args', not ok")

    def unanswered(history: list[dict[str, Any]]) -> None:
        history.remove(_answer(history, 0))

    offenders = measure_pins(_seeded(b, unanswered)).value("N24")["offenders"]
    assert offenders == [f"{names[0]}: answered None, not ok"]


def test_n24_refuses_an_answer_that_is_not_the_engines_whatever_it_differs_in() -> None:
    b = generate("history:t600", 0)
    for change in (
        lambda line: line[:-1] + ("0" if line[-1] != "0" else "1"),
        lambda line: line[:-1] + ("f" if line[-1] != "f" else "e"),
        lambda line: "00001x" + line[6:],  # a sequence number that is not six digits
    ):

        def edit(history: list[dict[str, Any]], change: Callable[[str], str] = change) -> None:
            _answer(history, 0)["content"] = change(_answer(history, 0)["content"])

        offenders = measure_pins(_seeded(b, edit)).value("N24")["offenders"]
        assert len(offenders) == 1 and "the answer is not the engine's" in offenders[0]


def test_n25_refuses_a_tool_planned_twice() -> None:
    """Two plans for one tool summing to the level: the engine keeps one plan a tool, so it plays
    fewer failures than the level, and the row refuses the arm (it held it before)."""
    bundles = contrast("faults", 0)
    b = bundles["faults:f4"]
    review, sample = views.right_tools(b)[:2]
    plans = (
        FaultPlan(tool=review, count=1),
        FaultPlan(tool=review, count=1),
        FaultPlan(tool=sample, count=2),
    )
    twice = _engine(b, faults=plans)
    state, call = initial_state(twice.engine), b.reference_calls[0]
    statuses = []
    for _ in range(2):
        state, line = apply(twice.engine, state, call.name, call.arguments)
        statuses.append(views.status(line))
    assert statuses == ["unavailable", "ok"]  # one failure played, not the two planned
    report = check_pins({**bundles, b.arm_id: twice})
    assert report.violated_rows == {"N25"}
    assert f"{review} planned more than once" in report.message()


def test_n25_says_what_was_planned_and_what_the_level_wants() -> None:
    bundles = contrast("faults", 0)
    report = check_pins({**bundles, **break_n25(bundles)})
    review, sample = views.right_tools(bundles["faults:f2"])[:2]
    assert f"planned {{'{review}': 2}}, the level wants {{'{review}': 1, '{sample}': 1}}" in (
        report.message()
    )
    b = bundles["faults:f0"]
    report = check_pins(
        {**bundles, b.arm_id: _engine(b, faults=(FaultPlan(tool=review, count=1),))}
    )
    assert f"planned {{'{review}': 1}}, the level wants none" in report.message()
    b = bundles["faults:f2"]
    none = (FaultPlan(tool=review, count=0), FaultPlan(tool=sample, count=0))
    report = check_pins({**bundles, b.arm_id: _engine(b, faults=none)})
    assert "planned none, the level wants" in report.message()
    extra = (*b.engine.faults, FaultPlan(tool=_first_read(b), count=-1))
    assert check_pins({**bundles, b.arm_id: _engine(b, faults=extra)}).verdict("N25") == "held"


def _relabel(b: TaskBundle, old: str, new: str) -> TaskBundle:
    binds = tuple(
        x.model_copy(update={"ledger": new}) if x.ledger == old else x for x in b.engine.bindings
    )
    return _engine(b, bindings=binds)


def test_the_lookalike_rows_count_only_the_target_class() -> None:
    bundles = contrast("similarity", 0)
    b = bundles["similarity:s2"]
    old = _lookalikes(b)[0].ledger
    number = old.split("-")[1]
    report = check_pins({**bundles, b.arm_id: _relabel(b, old, f"aaa-{number}")})
    assert "N19" in report.violated_rows  # a class sorting before the target's is not a lookalike
    assert "10 lookalike tools, not 12" in report.message()
    more = _doctored(bundles, "N19", _set("lookalike_tools", 13), ("similarity:s2",))
    assert more.violated_rows == {"N19"}


def test_n21_refuses_every_lookalike_number_that_is_not_four_digits_apart() -> None:
    bundles = contrast("similarity", 0)
    b = bundles["similarity:s2"]
    cls = b.goal[0].ledger.split("-")[0]
    old = _lookalikes(b)[0].ledger
    for number in ("12345", "123", "12a4", "0" + old.split("-")[1][1:]):
        report = check_pins({**bundles, b.arm_id: _relabel(b, old, f"{cls}-{number}")})
        assert "N21" in report.violated_rows, number
        assert f"lookalike number '{number}' is not a four-digit number" in report.message(), number


def test_n21_refuses_a_lookalike_sharing_more_digits_than_the_level() -> None:
    bundles = contrast("similarity", 0)

    def more(_arm: str, value: Any) -> Any:
        target = value["target"]
        first, _ = value["lookalikes"][0]
        return {**value, "lookalikes": [[first, 3], *value["lookalikes"][1:]], "target": target}

    report = _doctored(bundles, "N21", more, ("similarity:s2",))
    assert report.violated_rows == {"N21"} and "shares 3 digits" in report.message()
    value = measure_pins(bundles["similarity:s2"]).value("N21")
    assert figure("N21", value) == "2,2,2,2,2,2"


def test_n22_holds_both_right_tools() -> None:
    bundles = contrast("similarity", 0)
    b = bundles["similarity:s1"]
    second = views.right_tools(b)[1]
    edited = _describe(b, second, "Advance it; the second right tool's words were changed.")
    report = check_pins({**bundles, b.arm_id: edited})
    assert "N22" in report.violated_rows
    renamed = measure_pins(b).value("N22")
    assert renamed["names"] == views.right_tools(b)[:2]


def test_n3_refuses_a_filler_anywhere_but_the_end_or_on_an_arm_that_may_not_carry_one() -> None:
    bundles = contrast("distractor", 0)
    b = bundles["distractor:r0+len(r8)@k16"]
    base = b.system_prompt[: -len(b.system_filler) - 1]
    moved = b.model_copy(update={"system_prompt": b.system_filler + " " + base})
    report = check_pins({**bundles, b.arm_id: moved})
    assert "N3" in report.violated_rows
    assert "its filler is not at the end of the system prompt" in report.message()
    plain = bundles["distractor:r0@k16"]
    filled = plain.model_copy(
        update={"system_filler": b.system_filler, "system_prompt": b.system_prompt}
    )
    report = check_pins({**bundles, plain.arm_id: filled})
    assert "only a distractor or block control may" in report.message()
    depth = contrast("depth", 0)
    control = depth["depth:d1+h8"]
    filled = control.model_copy(
        update={
            "system_filler": "Notes follow.",
            "system_prompt": control.system_prompt + " Notes follow.",
        }
    )
    report = check_pins({**depth, control.arm_id: filled})
    assert "only a distractor or block control may" in report.message()


def test_n6_refuses_a_prompt_that_is_not_its_template_filled() -> None:
    bundles = contrast("depth", only=("depth:d1", "depth:d3"))
    b = bundles["depth:d1"]
    assert isinstance(b.prompt, str)
    for prompt in (b.prompt + " Thanks.", b.prompt[:-1], "A" + b.prompt, "z" + b.prompt):
        report = check_pins({**bundles, b.arm_id: b.model_copy(update={"prompt": prompt})})
        assert "N6" in report.violated_rows
        assert "the prompt is not its template filled" in report.message()


def test_n8_reads_every_seeded_answer_and_nothing_else() -> None:
    bundles = contrast("depth", 0)
    b = bundles["depth:d1+h8"]
    for change in (lambda line: line[:-1], lambda line: line + "0"):  # 51 and 53 bytes

        def edit(history: list[dict[str, Any]], change: Callable[[str], str] = change) -> None:
            _answer(history, 0)["content"] = change(_answer(history, 0)["content"])

        short = _seeded(b, edit)
        report = check_pins({**bundles, b.arm_id: short})
        assert "N8" in report.violated_rows
        again = TaskBundle.model_validate_json(short.model_dump_json())
        assert "N8" in check_pins({**bundles, b.arm_id: again}).violated_rows

    def note(history: list[dict[str, Any]]) -> None:
        history.append({"role": "user", "content": "Carry on."})

    assert measure_pins(_seeded(b, note)).value("N8")["sizes"] == [LINE_BYTES]


def _rename_ledger(b: TaskBundle, old: str, new: str) -> TaskBundle:
    binds = tuple(
        x.model_copy(update={"ledger": new}) if x.ledger == old else x for x in b.engine.bindings
    )
    return _engine(b, bindings=binds)


def test_the_lookalike_rows_count_stage_tools_only() -> None:
    b = generate("similarity:s2", 0)
    before = measure_pins(b)
    assert before.value("N19") == {"lookalike_tools": 12}
    lookalike = _lookalikes(b)[0].ledger
    read = _first_read(b)
    binds = tuple(
        x.model_copy(update={"ledger": lookalike}) if x.name == read else x
        for x in b.engine.bindings
    )
    after = measure_pins(_engine(b, bindings=binds))  # a read tool on a lookalike's ledger
    assert after.value("N19") == {"lookalike_tools": 12}
    assert after.value("N21") == before.value("N21")


def test_a_lookalike_number_is_everything_after_the_class() -> None:
    b = generate("similarity:s2", 0)
    old = _lookalikes(b)[0].ledger
    cls, number = old.split("-")
    renamed = _rename_ledger(b, old, f"{cls}-{number[:2]}-{number[2:]}")
    looks = [n for n, _ in measure_pins(renamed).value("N21")["lookalikes"]]
    assert f"{number[:2]}-{number[2:]}" in looks and number not in looks
    report = check_pins({renamed.arm_id: renamed})
    assert f"lookalike number '{number[:2]}-{number[2:]}'" in report.message()


def test_n21_refuses_six_lookalikes_with_a_number_twice_and_seven_with_six_numbers() -> None:
    bundles = contrast("similarity", 0)
    assert check_pins(bundles).verdict("N21") == "held"
    twice = _doctored(
        bundles,
        "N21",
        lambda _a, v: {**v, "lookalikes": [*v["lookalikes"][:5], v["lookalikes"][0]]},
        ("similarity:s2",),
    )
    assert twice.violated_rows == {"N21"} and "5 distinct lookalike ledgers" in twice.message()
    seventh = _doctored(
        bundles,
        "N21",
        lambda _a, v: {**v, "lookalikes": [*v["lookalikes"], v["lookalikes"][0]]},
        ("similarity:s2",),
    )
    assert seventh.violated_rows == {"N21"}


def test_the_right_tool_rows_read_the_first_two_right_tools_of_any_bundle() -> None:
    b = generate("depth:d3", 0)  # its reference calls three stage tools
    right = views.right_tools(b)
    assert len(right) == 3
    m = measure_pins(b)
    assert m.value("N22")["names"] == right[:2] == m.value("N25")["right_tools"]
    third = _describe(b, right[2], "Moves a record on, described at much greater length.")
    assert measure_pins(third).value("N22") == m.value("N22")  # a third right tool is not held


def test_a_controls_band_moves_with_its_own_transcript() -> None:
    """T(L) is the control's own transcript: five tokens more of it lower both ends by five."""
    arms = ("depth:d3", "depth:d5", "depth:d8", "depth:d3+h5")
    bundles = {a: generate(a, 1) for a in arms}
    t = {a: measure_pins(b).value("N9")["transcript_tokens"] for a, b in bundles.items()}
    longer = _doctored(
        bundles,
        "N9",
        lambda _a, v: {**v, "transcript_tokens": v["transcript_tokens"] + 5},
        ("depth:d3+h5",),
    )
    detail = next(r.detail for r in longer.rows if r.row == "N9")
    extra = t["depth:d5"] - t["depth:d3+h5"] - 5
    assert f"outside the band [{extra - 2}, {extra + 2}]" in detail, detail


def test_n25_holds_the_plan_of_a_level_with_one_right_tool() -> None:
    bundles = contrast("faults", 0, only=("faults:f0", "faults:f1"))
    assert check_pins(bundles).verdict("N25") == "held"
    one = _doctored(bundles, "N25", lambda _a, v: {**v, "right_tools": v["right_tools"][:1]})
    assert one.verdict("N25") == "held"  # f1 plans one fault, on the first right tool


def test_n31_holds_a_block_with_one_stage_tool() -> None:
    bundles = contrast("arguments", 0, only=("arguments:a2", "arguments:a4"))
    assert check_pins(bundles).verdict("N31") == "held"
    one = _doctored(bundles, "N31", lambda _a, v: {**v, "fixed": v["fixed"][:1]})
    assert one.verdict("N31") == "held"


def test_n21_refuses_a_lookalike_that_is_the_target_as_not_apart_from_it() -> None:
    bundles = contrast("similarity", 0)

    def target_twice(_arm: str, value: dict[str, Any]) -> dict[str, Any]:
        same = value["target"][:1] + value["target"][1:]  # equal, as read back from JSON
        looks = [[same, 3], *value["lookalikes"][1:]]
        return {**value, "lookalikes": looks}

    report = _doctored(bundles, "N21", target_twice, ("similarity:s3",))
    assert report.violated_rows == {"N21"}
    assert "is not a four-digit number apart from" in report.message()


# ------------------------------------------------ mutation: pins/rows/scenario.py (N1, N2)


def _departures(b: TaskBundle) -> list[str]:
    departures: list[str] = measure_pins(b).value("N1")["departures"]
    return departures


def _row_code(b: TaskBundle, rid: str, code: str) -> TaskBundle:
    """The bundle whose record `rid` holds `code` before any call (a row added if it has none)."""
    rows = [r._replace(token=code) if r.record_id == rid else r for r in b.initial_state]
    if all(r.record_id != rid for r in rows):
        rows.append(rows[0]._replace(record_id=rid, token=code))
    return _engine(b, rows=tuple(sorted(rows))).model_copy(update={"initial_state": rows})


def _goal(b: TaskBundle, **update: Any) -> TaskBundle:
    return b.model_copy(update={"goal": [b.goal[0].model_copy(update=update), *b.goal[1:]]})


def _bindings(b: TaskBundle, change: Callable[[ToolBinding], ToolBinding]) -> TaskBundle:
    return _engine(b, bindings=tuple(change(x) for x in b.engine.bindings))


def _rename_read(b: TaskBundle, name: str) -> TaskBundle:
    """The bundle whose first read tool is bound under `name` instead."""
    first = _first_read(b)
    return _bindings(b, lambda x: x.model_copy(update={"name": name}) if x.name == first else x)


_SCENARIO_FIELD: dict[str, tuple[str, Callable[[TaskBundle, Scenario, str], TaskBundle]]] = {
    # field: (arm, the bundle showing `value` where it shows the field), on seed 2
    "key": ("shape:w4", lambda b, _sc, v: _engine(b, key=v)),
    "cls": ("similarity:s3", lambda b, sc, v: _goal(b, ledger=f"{v}-{sc.ledger_number}")),
    "record_id": ("shape:w4", lambda b, _sc, v: _goal(b, record_id=v)),
    "entry_code": ("shape:w4", lambda b, sc, v: _row_code(b, sc.record_id, v)),
    "ledger_number": ("similarity:s3", lambda b, sc, v: _goal(b, ledger=f"{sc.cls}-{v}")),
    "sibling_code": ("shape:w4", lambda b, sc, v: _row_code(b, sc.sibling_id, v)),
    "peer_codes": ("shape:w4", lambda b, sc, v: _row_code(b, sc.peer_ids[0], v)),
}


@pytest.mark.parametrize("side", ["below", "above"])
@pytest.mark.parametrize("field", list(_SCENARIO_FIELD))
def test_n1_names_a_field_shown_with_any_other_value(field: str, side: str) -> None:
    """A departure is any other value, whichever way it sorts: a proper prefix of the scenario's
    value sorts below it, the value with a digit appended above it; N1 names the field both ways."""
    arm, show = _SCENARIO_FIELD[field]
    b = generate(arm, 2)
    sc = draw_scenario(b.split, b.seed)
    own = str(getattr(sc, field) if field != "peer_codes" else sc.peer_codes[0])
    assert field not in _departures(show(b, sc, own))
    other = own[:-1] if side == "below" else own + "0"
    assert field in _departures(show(b, sc, other))


def test_n1_names_a_goal_less_bundle_for_its_record() -> None:
    assert "record_id" in _departures(generate("depth:d3", 2).model_copy(update={"goal": []}))


def test_n1_names_a_read_the_scenario_does_not_draw() -> None:
    """The block's reads are the first n of the scenario's order; one read swapped for a read
    name past them (still in the read vocabulary) is a departure."""
    b = generate("distractor:r4@k16", 2)
    sc = draw_scenario(b.split, b.seed)
    n = sum(1 for x in b.engine.bindings if x.kind == "read")
    assert _departures(b) == []
    assert "reads" in _departures(_rename_read(b, sc.reads[n]))


def test_n1_leaves_a_block_of_a_users_own_tools_to_n4() -> None:
    """A block holding a name outside the read vocabulary is not seed-drawn: N1 does not read it."""
    b = generate("distractor:r4@k16", 2)
    assert _departures(_rename_read(b, "my_own_lookup")) == []


def test_n1_names_a_decoy_class_the_scenario_does_not_draw() -> None:
    """The decoy classes are the first n of the scenario's other classes; the stage tools of one
    decoy moved to the next class in that order are a departure."""
    b = generate("distractor:r4@k16", 2)
    sc = draw_scenario(b.split, b.seed)
    classes = {x.ledger for x in b.engine.bindings if x.kind == "stage"} - {sc.cls}
    n = len(classes)
    assert classes == set(sc.other_classes[:n])
    last, past = sc.other_classes[n - 1], sc.other_classes[n]
    moved = _bindings(b, lambda x: x.model_copy(update={"ledger": past}) if x.ledger == last else x)
    assert "other_classes" in _departures(moved)


def test_n1_reads_decoys_without_the_goal_class() -> None:
    """The decoys are the block's stage classes other than the goal's; a block without the goal's
    stage tools (N2 and N4 hold those) shows no decoy N1 would name."""
    b = generate("distractor:r4@k16", 2)
    sc = draw_scenario(b.split, b.seed)
    assert _departures(b) == []
    decoys_only = _bindings(
        b, lambda x: x.model_copy(update={"kind": "read"}) if x.ledger == sc.cls else x
    )
    assert "other_classes" not in _departures(decoys_only)


def test_n1_takes_a_query_that_wraps_past_the_last_of_the_scenarios_queries() -> None:
    """A query is cut from the scenario's queries joined from the i-th on, wrapping to the first
    (generator/draft.py); one across the wrap is the scenario's own."""
    b = generate("history:t600", 2)
    joined = "".join(draw_scenario(b.split, b.seed).queries)
    assert _departures(_seeded_query(b, joined[-16:] + joined[:16])) == []


def test_n1_holds_a_bundle_read_back_from_json() -> None:
    """Values are compared by what they are, not by which object holds them: a bundle written and
    read back (every string a fresh one) shows no departure, peers included."""
    b = generate("shape:w4", 2)
    assert len(b.initial_state) > 2
    back = TaskBundle.model_validate_json(b.model_dump_json())
    assert back == b
    assert _departures(back) == []


# ------------------------------------------------------------------ pins/rows/history.py on main


def test_n9_says_by_how_much_the_higher_arms_episode_ends_longer_than_the_controls() -> None:
    """The control's episode is its seeded history S and its own transcript T(L), the higher
    arm's is T(H): a refusal says T(H) - T(L) - S, positive when the control seeds too little."""
    bundles = contrast("depth", 0)
    t = {a: measure_pins(bundles[a]).value("N9")["transcript_tokens"] for a in bundles}
    adds = t["depth:d8"] - t["depth:d1+h8"]
    for seeded in (adds - 3, adds + 3):
        report = _doctored(bundles, "N9", _set("seeded_tokens", seeded), ("depth:d1+h8",))
        (problem,) = [v for v in report.violations if v.row == "N9"]
        assert problem.arms == ["depth:d1+h8"]
        longer = adds - seeded
        assert f"seeded {seeded} tokens; the higher arm's episode ends {longer:+d} longer, " in (
            report.message()
        ), report.message()
