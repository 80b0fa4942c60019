"""Arm ids: round trips, refusals, turn budgets."""

from __future__ import annotations

import pytest

from poisson_tasks.arms import KNOBS, ArmSpec, all_arms, arm_id, levels, parse_arm_id
from poisson_tasks.errors import ArmError

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
