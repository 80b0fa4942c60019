"""Issue-2 arms: every reference passes, every negative control earns its keyed outcome; bundle fields."""

from __future__ import annotations

import pytest

from poisson_tasks.arms import all_arms, parse_arm_id
from poisson_tasks.bundle import TaskBundle
from poisson_tasks.errors import ArmError, SeedError
from poisson_tasks.generator import generate
from poisson_tasks.verifier import verify

ISSUE2_ARMS = [a.id for k in ("depth", "distractor") for a in all_arms(k)]
SEEDS = range(200)
EXPECTED_CONTROLS = {
    "malformed_call_clause_2",
    "malformed_call_clause_3",
    "malformed_call_clause_4",
    "wrong_state",
    "collateral_mutation",
    "turn_limit",
}


def _expected_outcome(key: str) -> str:
    return "malformed_call" if key.startswith("malformed_call") else key


def check_bundle(b: TaskBundle) -> None:
    v = verify(b, [[c] for c in b.reference_calls], True, False)
    assert v.outcome == "passed", (b.arm_id, b.seed, v)
    assert v.leaky_pass and v.passed
    assert [list(r) for r in v.final_state] == [list(r) for r in b.expected_final_state]
    assert v.observations == b.reference_observations
    assert set(b.negative_controls) >= EXPECTED_CONTROLS
    for key, ep in b.negative_controls.items():
        got = verify(b, ep.turns, ep.ended_with_reply, ep.turn_limit_hit)
        assert got.outcome == _expected_outcome(key), (b.arm_id, b.seed, key, got)
        if key.startswith("malformed_call_clause_"):
            assert got.malformed_clause == int(key.rsplit("_", 1)[1])


@pytest.mark.parametrize("arm", ISSUE2_ARMS)
@pytest.mark.parametrize("split", ["eval", "train"])
def test_reference_and_controls(arm: str, split: str) -> None:
    spec = parse_arm_id(arm)
    suffix = "/train" if split == "train" else ""
    for seed in SEEDS:
        check_bundle(generate(spec.id + suffix, seed))


def test_overshoot_control_exists_below_the_top() -> None:
    for arm in ("depth:d1", "depth:d2", "depth:d3", "depth:d5", "depth:d1+h8"):
        assert "overshoot" in generate(arm, 0).negative_controls
    assert "overshoot" not in generate("depth:d8", 0).negative_controls


def test_depth_offers_the_whole_ladder() -> None:
    for arm in ("depth:d1", "depth:d3", "depth:d8"):
        b = generate(arm, 4)
        stages = sorted(x.stage for x in b.engine.bindings if x.kind == "stage")
        assert stages == list(range(1, 9))
        assert len(b.tools) == 16


def test_prompt_quotes_record_and_entry_code() -> None:
    for arm in ISSUE2_ARMS:
        b = generate(arm, 9)
        text = b.prompt if isinstance(b.prompt, str) else b.prompt[0]["content"]
        assert b.goal[0].record_id in text
        assert b.engine.rows[0].token in text or b.engine.rows[1].token in text
        entry = next(r.token for r in b.initial_state if r.record_id == b.goal[0].record_id)
        assert entry in text


def test_controls_seed_history() -> None:
    b = generate("depth:d1+h8", 5)
    assert isinstance(b.prompt, list)
    assert sum(1 for m in b.prompt if m["role"] == "tool") == 7
    assert b.reference_observations[0].startswith("000008 ")
    assert isinstance(generate("depth:d1", 5).prompt, str)
    d = generate("distractor:r0+len(r8)@k16", 5)
    plain = generate("distractor:r0@k16", 5)
    assert d.system_prompt.startswith(plain.system_prompt) and len(d.system_prompt) > len(
        plain.system_prompt
    )
    assert d.tools == plain.tools


def test_distractor_blocks() -> None:
    for level in (0, 2, 4, 8, 14):
        b = generate(f"distractor:r{level}@k16", 2)
        kinds = [x.kind for x in b.engine.bindings]
        decoys = [
            x for x in b.engine.bindings if x.kind == "stage" and x.ledger != b.goal[0].ledger
        ]
        assert len(b.tools) == 16
        assert len(decoys) == level
        assert kinds.count("read") == 14 - level


def test_eval_and_train_never_coincide() -> None:
    ev = {generate("depth:d2", s).goal[0].record_id for s in range(300)}
    tr = {generate("depth:d2/train", s).goal[0].record_id for s in range(300)}
    assert len(ev) == len(tr) == 300
    assert not ev & tr


def test_record_ids_are_injective_past_the_word_space() -> None:
    from poisson_tasks.domain.vocabulary import EVAL_WORDS
    from poisson_tasks.generator.scenario import record_id

    ids = {record_id(EVAL_WORDS, i) for i in [*list(range(0, 70000, 7)), 65535, 65536, 131072]}
    assert len(ids) == len(range(0, 70000, 7)) + 3


def test_bundle_round_trips_through_validation() -> None:
    for arm in ISSUE2_ARMS:
        b = generate(arm, 13)
        again = TaskBundle.model_validate_json(b.canonical())
        assert again == b
        assert again.canonical() == b.canonical()


def test_task_id_is_a_digest_of_the_content() -> None:
    a, b = generate("depth:d3", 1), generate("depth:d3", 2)
    assert a.task_id != b.task_id
    assert generate("depth:d3", 1).task_id == a.task_id
    assert generate("depth:d3/leaky", 1).task_id != a.task_id


@pytest.mark.parametrize("bad", [-1, 1.5, "3", True])
def test_bad_seed(bad: object) -> None:
    with pytest.raises(SeedError, match="non-negative integer"):
        generate("depth:d3", bad)  # type: ignore[arg-type]


def test_bad_arm() -> None:
    with pytest.raises(ArmError, match="valid levels"):
        generate("depth:d11", 0)
