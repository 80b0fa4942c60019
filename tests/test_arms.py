"""Arm ids: round trips, refusals, turn budgets."""

from __future__ import annotations

from typing import get_args

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from poisson_tasks.arms import (
    CONTROL_ARMS,
    FAULTS_MAX,
    HISTORY_MAX,
    HISTORY_MIN,
    KNOB_DEFS,
    KNOBS,
    PREFIX,
    SHIPPED_KNOBS,
    ArmSpec,
    Knob,
    all_arms,
    arm_id,
    levels,
    nearest_levels,
    parse_arm_id,
)
from poisson_tasks.errors import ArmError
from poisson_tasks.generator import generate
from poisson_tasks.generator.assemble import BUILDERS
from poisson_tasks.generator.scenario import MAX_SEED

VALID = [
    "depth:d3",
    "depth:d1+h8",
    "depth:d2+h5",
    "distractor:r8@k16",
    "distractor:r0+len(r8)@k16",
    "distractor:r2+len(r14)@k16",
    "faults:f0+len(f4)",
    "faults:f2",
    "history:t12800",
    "block:k8+len(k64)",
    "arguments:a2+len(a8)",
    "shape:w1+len(w4)",
    "spread:p4",
    "similarity:s3",
    "depth:d3/train",
    "depth:d3/leaky",
    "depth:d3/train/leaky",
    "block:k258",
]


@pytest.mark.parametrize("text", VALID)
def test_round_trip(text: str) -> None:
    spec = parse_arm_id(text)
    assert arm_id(spec) == text
    assert parse_arm_id(arm_id(spec)) == spec


@pytest.mark.parametrize("knob", KNOBS)
def test_every_candidate_and_control_round_trips(knob: str) -> None:
    for spec in all_arms(knob):
        assert parse_arm_id(arm_id(spec)) == spec


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("depth:d9", "valid levels: 1 to 8"),
        ("depth:d0", "valid levels: 1 to 8"),
        ("similarity:s4", "0 to 3"),
        ("faults:f-1", "not of the form"),
        ("block:k7", "8 to 258"),
        ("block:k259", "8 to 258"),
        ("arguments:a9", "2 to 8"),
        ("shape:w3", "1, 2 or 4"),
        ("spread:p5", "1 to 4"),
        ("depth:d8+h1", "must be higher"),
        ("similarity:s0+len(s3)", "has no control"),
        ("history:t0+len(t600)", "has no control"),
        ("spread:p1+len(p4)", "has no control"),
        ("distractor:r8", "@k16"),
        ("depth:x3", "depth levels are written"),
        ("warp:w3", "unknown"),
        ("depth:d03", "not of the form"),
        ("faults:f0+h4", "depth's control"),
    ],
)
def test_refusals_name_the_problem(text: str, fragment: str) -> None:
    with pytest.raises(ArmError, match=fragment.replace("(", r"\(").replace("+", r"\+")):
        parse_arm_id(text)


def test_turn_budgets() -> None:
    assert parse_arm_id("depth:d5").reference_turns == 6
    assert parse_arm_id("depth:d1+h8").reference_turns == 2
    assert parse_arm_id("faults:f4").reference_turns == 7
    assert parse_arm_id("shape:w4").reference_turns == 5
    assert parse_arm_id("spread:p1").reference_turns == 7
    assert parse_arm_id("block:k64").reference_turns == 3
    assert parse_arm_id("depth:d8").max_turns(2) == 11


def test_levels() -> None:
    assert levels("depth") == (1, 2, 3, 5, 8)
    assert levels("distractor") == (0, 2, 4, 8, 14)
    with pytest.raises(ArmError):
        levels("nope")


def test_constructor_refuses() -> None:
    with pytest.raises(ArmError, match="level"):
        ArmSpec(knob="depth", level=12)


# --- every accepted arm builds --------------------------------------------------------------------

# Levels a user can write, biased to the edges of each knob's range where refusals begin.
_EDGES = [0, 1, 2, 3, 4, 5, 7, 8, 9, 14, 15, 63, 64, 65, 83, 84, 99, 100, 101, 257, 258, 259]
_LEVELS = st.one_of(
    st.sampled_from([*_EDGES, HISTORY_MAX - 1, HISTORY_MAX, HISTORY_MAX + 1]),
    st.integers(min_value=0, max_value=70000),
)
_SEEDS = st.one_of(st.integers(0, 300), st.integers(0, MAX_SEED))


def _accepted(knob: str, level: int, control: int | None) -> ArmSpec | None:
    try:
        return ArmSpec(knob=knob, level=level, control=control)  # type: ignore[arg-type]
    except ArmError:
        return None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    knob=st.sampled_from(KNOBS),
    level=_LEVELS,
    control=st.one_of(st.none(), _LEVELS),
    seed=_SEEDS,
)
def test_every_accepted_arm_generates(
    knob: str, level: int, control: int | None, seed: int
) -> None:
    """Whatever ArmSpec accepts builds at any seed; what it refuses, it refuses at parse time."""
    spec = _accepted(knob, level, control)
    if spec is None:
        return
    bundle = generate(arm_id(spec), seed)
    assert bundle.arm_id == arm_id(spec)


@pytest.mark.parametrize("level", [1, 50, 83, HISTORY_MIN - 1])
def test_history_too_short_to_build_is_refused_at_parse_time(level: int) -> None:
    with pytest.raises(ArmError, match=f"nearest t0 or t{HISTORY_MIN}"):
        parse_arm_id(f"history:t{level}")


@pytest.mark.parametrize(
    ("text", "nearest"),
    [
        (f"faults:f{FAULTS_MAX + 1}", f"nearest f{FAULTS_MAX}"),
        ("faults:f1000000", f"nearest f{FAULTS_MAX}"),
        ("history:t1000000000", f"nearest t{HISTORY_MAX}"),
        ("depth:d9", "nearest d8"),
        ("shape:w3", "nearest w2 or w4"),
        ("block:k7", "nearest k8"),
    ],
)
def test_refusals_give_the_nearest_valid_levels(text: str, nearest: str) -> None:
    with pytest.raises(ArmError, match=nearest):
        parse_arm_id(text)


def test_nearest_levels() -> None:
    assert nearest_levels("history", 50) == (0, HISTORY_MIN)
    assert nearest_levels("history", 10**9) == (HISTORY_MAX,)
    assert nearest_levels("depth", 0) == (1,)
    assert nearest_levels("depth", 4) == (4,)


@pytest.mark.parametrize("text", ["depth:d" + "9" * 5000, "x" * 100_000, "depth:d1" + "0" * 30])
def test_huge_ids_are_refused_in_one_short_line(text: str) -> None:
    with pytest.raises(ArmError) as info:
        parse_arm_id(text)
    assert "\n" not in str(info.value) and len(str(info.value)) < 400


def test_every_knob_table_is_derived_from_one_knobdef_per_knob() -> None:
    assert list(KNOB_DEFS) == list(KNOBS) == list(get_args(Knob)) == list(BUILDERS)
    assert len({d.prefix for d in KNOB_DEFS.values()}) == len(KNOB_DEFS)
    for knob, definition in KNOB_DEFS.items():
        assert definition.name == knob and PREFIX[knob] == definition.prefix
        assert levels(knob) == definition.levels and CONTROL_ARMS[knob] == definition.controls
        assert (knob in SHIPPED_KNOBS) == definition.shipped
        assert all(definition.level_ok(level) for level in definition.levels)
        assert bool(definition.controls) == (definition.control_form is not None)
        for control in definition.controls:
            spec = parse_arm_id(control)
            assert spec.knob == knob and spec.control is not None
        for spec in all_arms(knob):
            assert spec.reference_turns == definition.turns(spec.level)
