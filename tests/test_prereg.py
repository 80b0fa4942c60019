"""Pre-registration: the schema, the seed rule, one message per problem, the plan, `validate`."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from poisson_tasks.arms import parse_arm_id
from poisson_tasks.cli import app
from poisson_tasks.errors import PreregistrationError
from poisson_tasks.power import (
    mdd_binomial_worst_case,
    minimum_detectable_difference,
    tasks_needed,
)
from poisson_tasks.prereg import (
    derive_seeds,
    describe_plan,
    load_preregistration,
    seed_list_hash,
    validate_preregistration,
)
from poisson_tasks.study import default_preregistration

ROOT = Path(__file__).resolve().parents[1]
PREREGS = ROOT / "preregistrations"
cli = CliRunner()


def base() -> dict[str, Any]:
    """A small valid document every refusal test breaks in one place."""
    return {
        "format": "poisson-tasks/preregistration@1",
        "name": "t",
        "model": {"provider": "reference", "model": "oracle"},
        "decoding": {
            "temperature": 1.0,
            "top_p": 1.0,
            "reasoning_effort": "low",
            "max_completion_tokens": 2048,
        },
        "design": {
            "arms": ["depth:d1", "depth:d3", "depth:d1+h8", "depth:d2+h5"],
            "tasks": 4,
            "attempts": 2,
            "seed_string": "s",
            "slack": 2,
            "horizon": 6,
        },
        "budget": {"tokens": 1000, "wall_clock_s": 60},
    }


def problems(doc: dict[str, Any]) -> list[str]:
    with pytest.raises(PreregistrationError) as info:
        validate_preregistration(doc)
    return info.value.problems


def edit(path: str, value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(base())
    *parents, last = path.split(".")
    node = doc
    for p in parents:
        node = node[p]
    node[last] = value
    return doc


# --------------------------------------------------------------------------- shipped files


@pytest.mark.parametrize("path", sorted(PREREGS.glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_preregistration_validates(path: Path) -> None:
    plan = load_preregistration(path)
    assert plan.episodes == len(plan.arms) * len(plan.seeds) * plan.attempts
    assert "api_key" not in path.read_text().replace("api_key_env", "")


def test_published_design() -> None:
    plan = load_preregistration(PREREGS / "published.yaml")
    pr = plan.preregistration
    assert len(plan.arms) == 14 and len(plan.seeds) == 60 and plan.attempts == 5
    assert plan.episodes == 4200
    assert {
        "depth:d1+h8",
        "depth:d2+h5",
        "distractor:r0+len(r8)@k16",
        "distractor:r2+len(r14)@k16",
    } <= set(plan.arms)
    d = pr.decoding
    assert (d.temperature, d.top_p, d.reasoning_effort, d.max_completion_tokens) == (
        1.0,
        1.0,
        "low",
        2048,
    )
    assert pr.design.turn_limit == 32
    assert pr.model.provider == "openai" and pr.model.model == "gpt-5-nano-2025-08-07"
    assert plan.horizon == 9 + pr.design.slack  # depth:d8 needs nine turns
    assert pr.design.seed_list_hash == plan.seed_list_hash


def test_reference_cards_share_the_published_tasks() -> None:
    published = load_preregistration(PREREGS / "published.yaml")
    for policy in ("oracle", "noisy", "overshoot"):
        plan = load_preregistration(PREREGS / f"published-reference-{policy}.yaml")
        assert plan.preregistration.model.provider == "reference"
        assert plan.preregistration.model.model.split("?")[0] == policy
        assert (plan.arms, plan.seeds, plan.attempts) == (
            published.arms,
            published.seeds,
            published.attempts,
        )


# vLLM reads these sampler settings from a model's generation_config.json when a request leaves
# them out; each value here is the one that turns the setting off (OpenAI's API has none of them).
_NEUTRAL_SAMPLER = {"top_k": 0, "min_p": 0.0, "repetition_penalty": 1.0}


def test_the_two_published_model_registrations_declare_one_decoding() -> None:
    """The spec ran Qwen3-8B with gpt-5-nano's decoding (reading-a-card.md, "Same tasks, seeds,
    attempts and decoding as gpt-5-nano"): the same temperature, top_p and completion limit. What
    may differ is each provider's own switch: OpenAI's reasoning_effort, and Qwen's thinking
    switch, off, in the chat template; vLLM's extra sampler settings are sent, each at its neutral
    value, so the model's own sampling defaults cannot apply."""
    nano = load_preregistration(PREREGS / "published.yaml").preregistration
    qwen = load_preregistration(PREREGS / "published-qwen3-8b-vllm.yaml").preregistration
    assert (nano.model.provider, qwen.model.provider) == ("openai", "vllm")
    same = ("temperature", "top_p", "max_completion_tokens", "seed")
    assert [getattr(qwen.decoding, f) for f in same] == [getattr(nano.decoding, f) for f in same]
    assert (nano.decoding.temperature, nano.decoding.top_p) == (1.0, 1.0)
    assert (nano.decoding.reasoning_effort, qwen.decoding.reasoning_effort) == ("low", None)
    assert nano.decoding.extra_body == {}
    extra = dict(qwen.decoding.extra_body)
    assert extra.pop("chat_template_kwargs") == {"enable_thinking": False}
    assert extra == _NEUTRAL_SAMPLER
    assert (qwen.design, qwen.thresholds) == (nano.design, nano.thresholds)


def test_knob_probe_covers_the_seven_newer_knobs_with_controls() -> None:
    plan = load_preregistration(PREREGS / "knob-probe.yaml")
    knobs = {a.split(":")[0] for a in plan.arms}
    assert knobs == {"similarity", "faults", "history", "block", "arguments", "shape", "spread"}
    assert plan.attempts == 2 and len(plan.seeds) == 60 and len(plan.arms) == 18


# --------------------------------------------------------------------------- seeds


def test_seed_rule_is_the_documented_one() -> None:
    expected: list[int] = []
    i = 0
    while len(expected) < 10:
        h = hashlib.sha256(f"abc|{i}".encode()).digest()
        s = int.from_bytes(h[:8], "big") % 2**31
        if s not in expected:
            expected.append(s)
        i += 1
    assert derive_seeds("abc", 10) == expected
    assert derive_seeds("range", 4) == [0, 1, 2, 3]
    assert derive_seeds("abc", 3) == expected[:3]  # a prefix: more tasks keep the first seeds
    listing = json.dumps(expected, separators=(",", ":")).encode()
    assert seed_list_hash(expected) == hashlib.sha256(listing).hexdigest()


def test_seeds_are_distinct_for_many_tasks() -> None:
    seeds = derive_seeds("poisson-tasks/published/v1", 2000)
    assert len(set(seeds)) == 2000 and all(0 <= s < 2**31 for s in seeds)


def test_a_published_seed_list_is_checked() -> None:
    good = derive_seeds("s", 4)
    plan = validate_preregistration(edit("design.seeds", good))
    assert list(plan.seeds) == good
    msgs = problems(edit("design.seeds", [*good[:3], 7]))
    assert len(msgs) == 1 and msgs[0].startswith("design.seeds: not derivable")
    msgs = problems(edit("design.seed_list_hash", "0" * 64))
    assert len(msgs) == 1 and msgs[0].startswith("design.seed_list_hash:")


# --------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("path", "value", "start"),
    [
        ("design.arms", ["depth:d1", "depth:d3"], "design.arms: a sweep of depth needs"),
        ("design.arms", ["depth:d1", "depth:d3", "depth:d1+h8"], "design.arms: a sweep of depth"),
        ("design.arms", ["depth:d3", "depth:d9"], "design.arms[1]: level 9"),
        ("design.arms", ["depth:d3", "depth:d3"], "design.arms[1]: depth:d3 repeats"),
        ("design.arms", ["depth:d3/train"], "design.arms[0]: depth:d3/train is split train"),
        ("design.arms", [], "design.arms: empty"),
        ("design.horizon", 7, "design.horizon: states 7 but the arms give 6"),
        ("design.turn_limit", 5, "design.turn_limit: 5 is below the horizon 6"),
        ("design.seed_string", "", "design.seed_string: empty"),
        ("design.tasks", 0, "design.tasks: must be 1 or more"),
        ("budget.tokens", 0, "budget.tokens: 0 stops the run"),
        ("budget.wall_clock_s", 0, "budget.wall_clock_s: 0 stops the run"),
        ("budget.dollars", 0.0, "budget.dollars: 0 stops the run"),
        ("budget.dollars", 5.0, "budget.dollars: needs model.rates"),
        ("model.model", "wizard", "model.model:"),
        ("model.api_key_env", "sk-proj-abcdefghijklmnop", "model.api_key_env: looks like a key"),
        ("model.api_key_env", "MY-KEY", "model.api_key_env: 'MY-KEY' is not"),
        ("decoding.top_p", 0.0, "decoding.top_p: must be in (0, 1]"),
        ("decoding.temperature", "hot", "decoding.temperature:"),
        ("decoding.extra_body", {"tools": []}, "decoding.extra_body.tools:"),
        ("execution", {"concurrency": 0}, "execution.concurrency: must be 1 or more"),
        ("thresholds", {"resolution": 0.0}, "thresholds.resolution: must be in (0, 1)"),
        ("format", "v0", "format: must be"),
    ],
)
def test_one_problem_one_message_naming_the_field(path: str, value: Any, start: str) -> None:
    msgs = problems(edit(path, value))
    assert len(msgs) == 1, msgs
    assert msgs[0].startswith(start), msgs[0]


@pytest.mark.parametrize(
    "section", ["model", "decoding", "design", "budget", "execution", "thresholds"]
)
def test_unknown_keys_are_refused_at_every_level(section: str) -> None:
    doc = base()
    doc.setdefault(section, {})["colour"] = "blue"
    msgs = problems(doc)
    assert msgs == [f"{section}.colour: unknown key; remove it or check its spelling"]


def test_unknown_keys_nested_and_top_level() -> None:
    doc = edit(
        "model.rates",
        {"input": 1.0, "cached_input": 0.1, "output": 2.0, "as_of": "2025-08-07", "vat": 0.2},
    )
    assert problems(doc) == ["model.rates.vat: unknown key; remove it or check its spelling"]
    doc = base()
    doc["extras"] = 1
    assert problems(doc)[0].startswith("extras: unknown key")


def test_an_api_key_in_the_file_points_at_api_key_env() -> None:
    doc = edit("model.api_key", "sk-live-123")
    msgs = problems(doc)
    assert len(msgs) == 1 and "model.api_key_env" in msgs[0]
    assert "sk-live-123" not in msgs[0]


def test_every_problem_is_reported_at_once() -> None:
    doc = base()
    doc["design"]["arms"] = ["depth:d1", "depth:d3"]
    doc["design"]["horizon"] = 99
    doc["budget"]["tokens"] = 0
    doc["decoding"]["colour"] = 1
    msgs = problems(doc)
    assert len(msgs) == 4
    assert {m.split(":")[0] for m in msgs} == {
        "design.arms",
        "design.horizon",
        "budget.tokens",
        "decoding.colour",
    }


def test_missing_sections_and_fields_are_named() -> None:
    doc = base()
    del doc["budget"]
    del doc["design"]["slack"]
    msgs = problems(doc)
    assert "budget: required section is missing" in msgs
    assert "design.slack: required field is missing" in msgs


def test_provider_requirements() -> None:
    vllm = edit("model", {"provider": "vllm", "model": "Qwen/Qwen3-8B"})
    msgs = problems(vllm)
    assert any(m.startswith("model.base_url: required for provider vllm") for m in msgs)
    assert any(m.startswith("model.revision: required for a self-served model") for m in msgs)
    openai = edit("model", {"provider": "openai", "model": "gpt-5-nano-2025-08-07"})
    assert problems(openai) == [
        "model.api_key_env: required for provider openai, e.g. OPENAI_API_KEY"
    ]
    ok = edit("model", {"provider": "reference", "model": "noisy?p_wrong_tool=0.2"})
    assert validate_preregistration(ok).preregistration.model.model == "noisy?p_wrong_tool=0.2"


def test_a_sweep_with_its_controls_passes_and_a_single_level_needs_none() -> None:
    validate_preregistration(base())
    single = edit("design.arms", ["depth:d3"])
    single["design"]["horizon"] = 6
    validate_preregistration(single)
    no_control = edit("design.arms", ["history:t0", "history:t2400", "spread:p1", "spread:p4"])
    no_control["design"]["horizon"] = 9  # spread needs seven turns, plus the slack of 2
    validate_preregistration(no_control)


def test_horizon_is_the_deepest_arm_plus_slack() -> None:
    doc = edit("design.arms", ["faults:f0", "faults:f4", "faults:f0+len(f4)"])
    doc["design"]["slack"] = 3
    doc["design"]["horizon"] = 10  # faults:f4 needs 3 + 4 turns
    assert validate_preregistration(doc).horizon == 10


# --------------------------------------------------------------------------- the plan


def test_plan_holds_arms_seeds_hash_episodes_horizon_resolution() -> None:
    plan = validate_preregistration(base())
    assert plan.arms == ("depth:d1", "depth:d3", "depth:d1+h8", "depth:d2+h5")
    assert list(plan.seeds) == derive_seeds("s", 4)
    assert plan.seed_list_hash == seed_list_hash(plan.seeds)
    assert plan.episodes == 4 * 4 * 2 == len(plan.slots())
    assert len(set(plan.slots())) == len(plan.slots())
    assert plan.horizon == 6
    r = plan.resolution
    assert r.mdd_any == pytest.approx(minimum_detectable_difference(4, 2))
    assert r.mdd_independent == pytest.approx(mdd_binomial_worst_case(4))
    assert r.under_powered and r.declared == 0.15


def test_resolution_at_the_published_design() -> None:
    plan = load_preregistration(PREREGS / "published.yaml")
    # Worst case over any dependence: (1.96 + 0.84) * sqrt(1/60).
    assert plan.resolution.mdd_any == pytest.approx(0.3617, abs=1e-3)
    assert plan.resolution.under_powered
    assert plan.resolution.tasks_needed_any == 349


def test_a_design_at_the_resolution_is_not_under_powered() -> None:
    doc = base()
    doc["design"]["tasks"] = 349
    plan = validate_preregistration(doc)
    assert not plan.resolution.under_powered
    assert "under-powered" not in describe_plan(plan)


def test_measurement_hash_ignores_budget_and_execution_only() -> None:
    a = validate_preregistration(base())
    b = validate_preregistration(edit("budget.tokens", 5000))
    c = validate_preregistration(edit("execution", {"concurrency": 3}))
    d = validate_preregistration(edit("design.attempts", 3))
    assert a.measurement_hash == b.measurement_hash == c.measurement_hash
    assert a.preregistration_hash != b.preregistration_hash
    assert d.measurement_hash != a.measurement_hash


# --------------------------------------------------------------------------- the CLI


def test_validate_prints_the_plan_and_resolution(tmp_path: Path) -> None:
    res = cli.invoke(app, ["validate", str(PREREGS / "published.yaml"), "--seeds"])
    assert res.exit_code == 0, res.output
    out = res.stdout
    plan = load_preregistration(PREREGS / "published.yaml")
    assert plan.seed_list_hash in out
    assert "4200 (14 arms x 60 tasks x 5 attempts)" in out
    assert "horizon      13" in out
    assert "MDD 0.362" in out and "under-powered" in out
    assert ", ".join(map(str, plan.seeds)) in out


def test_validate_refuses_with_one_line_per_problem(tmp_path: Path) -> None:
    doc = base()
    doc["design"]["arms"] = ["depth:d1", "depth:d3"]
    doc["budget"]["tokens"] = 0
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(doc))
    res = cli.invoke(app, ["validate", str(path)])
    assert res.exit_code == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 2 and all(line.startswith("error: ") for line in lines)
    assert res.stdout == ""


def test_validate_refuses_a_file_that_is_not_yaml_or_missing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("design: [unclosed\n")
    res = cli.invoke(app, ["validate", str(bad)])
    assert res.exit_code == 2 and "not valid YAML" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    res = cli.invoke(app, ["validate", str(tmp_path / "nope.yaml")])
    assert res.exit_code == 2 and "cannot be read" in res.stderr


def test_validate_caps_an_mdd_above_one_in_words(tmp_path: Path) -> None:
    """6 tasks: the worst-case MDD is 2.80 / sqrt(6) = 1.144, which no rate difference can be."""
    doc = yaml.safe_load((PREREGS / "smoke.yaml").read_text(encoding="utf-8"))
    doc["design"]["tasks"] = 6
    path = tmp_path / "six.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    res = cli.invoke(app, ["validate", str(path)])
    assert res.exit_code == 0, res.output
    assert "MDD above 1 for arms of any dependence" in res.stdout
    assert "1.144" not in res.stdout
    # issue 34 item 4: the warning read "the worst-case MDD above 1: no difference can be
    # resolved at this size is above the declared resolution"
    (warning,) = [ln for ln in res.stdout.splitlines() if ln.startswith("  warning: ")]
    assert warning == (
        "  warning: under-powered: with 6 tasks per arm no level-to-level difference is sure to "
        "be called, however large (the worst-case MDD is above 1, the largest a difference of two "
        "rates can be); 50 tasks per arm bring the worst case down to the declared 0.400 (25 for "
        "independent arms)"
    )


def test_the_first_look_is_30_episodes_and_validate_says_what_it_can_and_cannot_read() -> None:
    plan = load_preregistration(PREREGS / "first-look.yaml")
    assert plan.episodes == 30 and plan.attempts == 1 and len(plan.seeds) == 15
    res = cli.invoke(app, ["validate", str(PREREGS / "first-look.yaml")])
    assert res.exit_code == 0, res.output
    reads = [ln for ln in res.stdout.splitlines() if ln.startswith("  reads ")]
    # 2.80 / sqrt(15) = 0.723 clears zero; the measured difference must also reach 0.75:
    # 0.75 + 0.84 / sqrt(15) = 0.967 at 80% power (0.75 + 0.84 * sqrt(0.5 / 15) = 0.904)
    assert "a level-to-level difference of 0.967 or more is called" in reads[0]
    assert "(0.904 or more between independent arms)" in reads[0]
    assert "the declared 0.750 itself is called about half the time at any size" in reads[0]
    assert reads[1].startswith("  reads        one attempt per task: pass@k and pass^k")
    assert "which the MDD reaches at 14 tasks per arm" in res.stdout
    assert "under-powered" not in res.stdout


@pytest.mark.parametrize("name", ["smoke.yaml", "first-look.yaml"])
def test_the_first_studies_are_sized_by_power_for_the_question_they_declare(name: str) -> None:
    # issue 34 item 4: every shipped study warned it was under-powered, the first ones included
    plan = load_preregistration(PREREGS / name)
    resolution = plan.resolution
    declared = plan.preregistration.thresholds.resolution
    assert not resolution.under_powered and resolution.mdd_any <= declared
    assert len(plan.seeds) >= tasks_needed(declared, 1.0)  # the size power.py gives
    knobs = {parse_arm_id(a).knob for a in plan.arms if not parse_arm_id(a).is_control}
    levels = [a for a in plan.arms if not parse_arm_id(a).is_control]
    assert len(knobs) == 1 and len(levels) == 2  # one comparison: two levels of one knob
    assert (PREREGS / "smoke.yaml").read_bytes() == default_preregistration().read_bytes()


def test_validate_reads_a_design_that_compares_nothing_or_resolves_its_declared_difference(
    tmp_path: Path,
) -> None:
    doc = yaml.safe_load((PREREGS / "first-look.yaml").read_text(encoding="utf-8"))
    doc["design"].update(arms=["faults:f4"], horizon=11)
    one = tmp_path / "one.yaml"
    one.write_text(yaml.safe_dump(doc), encoding="utf-8")
    res = cli.invoke(app, ["validate", str(one)])
    assert res.exit_code == 0, res.output
    assert "  reads        no knob has two levels here: nothing is compared" in res.stdout
    doc["design"].update(arms=["faults:f0", "faults:f4", "faults:f0+len(f4)"], tasks=400)
    doc["design"]["horizon"] = 11
    doc["thresholds"]["resolution"] = 0.15
    doc["budget"]["tokens"] = 50_000_000
    big = tmp_path / "big.yaml"
    big.write_text(yaml.safe_dump(doc), encoding="utf-8")
    res = cli.invoke(app, ["validate", str(big)])
    assert res.exit_code == 0, res.output
    # not under-powered (2.80 / sqrt(400) = 0.140), yet a difference of 0.150 is not "resolved":
    # the card calls one of 0.15 + 0.84 / 20 = 0.192 at 80% power, 0.150 itself half the time
    assert (
        "  reads        a level-to-level difference of 0.192 or more is called at 80% power"
        in res.stdout
    )
    assert "the declared 0.150 itself is called about half the time" in res.stdout
    assert "under-powered" not in res.stdout
