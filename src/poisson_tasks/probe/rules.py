"""The probe's reading rules: each arm's strict pass@1 per task, the paired differences between arms,
and the verdict knobs-and-arms.md reads from them, with the numbers the registration fixed.

Δ = base strict pass@1 − top strict pass@1, paired over tasks, with the card's own task-clustered
paired interval (calibration.intervals.paired_interval at the registration's confidence);
"control" is control − top; for shape, "length control" is base − control.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

from poisson_tasks.arms import knob_def
from poisson_tasks.calibration.cardjson import round_figure
from poisson_tasks.calibration.intervals import paired_interval
from poisson_tasks.calibration.records import EpisodeRecord
from poisson_tasks.calibration.stats import Interval, call_pair
from poisson_tasks.probe.design import ProbeRegistration, knob_arms
from poisson_tasks.probe.figures import PassDifference, ProbeVerdict


def rule_text(reg: ProbeRegistration) -> str:
    """The reading rules in words, with the registration's numbers (probe.md prints it)."""
    rules = reg.rules
    return (
        f"A knob bites on a model when the interval of Δ (base − top) excludes zero and Δ >= "
        f"{rules.bite:g}; faults, block and arguments need the same drop from their control arm "
        f"to the top, and shape counts either direction, as long as its length control differs "
        f"from the base by less than {rules.length_control_max:g}. Top easier is the mirror (the "
        f"interval excludes zero and Δ <= −{rules.bite:g}, with the control's drop mirrored "
        f"likewise). Cannot tell replaces “does not bite” where the base arm passed below "
        f"{rules.base_floor:g}, and “top easier” where the top arm passed above "
        f"{rules.top_ceiling:g}. A knob ships when it bites on at least one model and is easier "
        "at the top on none."
    )


def arm_counts(
    recs: Sequence[EpisodeRecord], arm: str, seeds: Sequence[int]
) -> tuple[np.ndarray, np.ndarray]:
    """(passes, scored attempts) per seed of one arm, in the seeds' order; instrument failures
    and seeds outside the list are left out."""
    index = {s: i for i, s in enumerate(seeds)}
    succ = np.zeros(len(seeds), dtype=np.int64)
    att = np.zeros(len(seeds), dtype=np.int64)
    for record in recs:
        if record.arm_id == arm and not record.instrument and record.seed in index:
            att[index[record.seed]] += 1
            succ[index[record.seed]] += int(record.strict_pass)
    return succ, att


def _rate(succ: np.ndarray, att: np.ndarray) -> float:
    keep = att > 0
    return float((succ[keep] / att[keep]).mean()) if keep.any() else 0.0


def _distinguishable(value: float, iv: Interval, bite: float) -> int:
    """+1 when the difference is a drop of at least `bite` with an interval excluding zero, −1 for
    the mirror, 0 otherwise (the card's own call_pair)."""
    if call_pair(value, iv, bite) != "distinguishable":
        return 0
    return 1 if value > 0 else -1


class ArmCounts:
    """One arm's per-seed counts, and its strict pass@1."""

    def __init__(self, succ: np.ndarray, att: np.ndarray) -> None:
        self.succ, self.att = succ, att
        self.rate = _rate(succ, att)


def pass_difference(
    reg: ProbeRegistration,
    model: str,
    knob: str,
    name: Literal["delta", "control", "length control"],
    minuend: tuple[str, ArmCounts],
    subtrahend: tuple[str, ArmCounts],
) -> tuple[PassDifference, Interval]:
    """minuend − subtrahend, paired over the tasks both scored, rounded as probe.json holds it,
    with the unrounded interval the verdict reads."""
    res = paired_interval(
        minuend[1].succ,
        minuend[1].att,
        subtrahend[1].succ,
        subtrahend[1].att,
        reg.thresholds.confidence,
    )
    iv = Interval(low=res.low, high=res.high, point=res.diff)
    difference = PassDifference(
        model=model,
        knob=knob,
        name=name,
        minuend=minuend[0],
        subtrahend=subtrahend[0],
        minuend_pass=round_figure(minuend[1].rate),
        subtrahend_pass=round_figure(subtrahend[1].rate),
        value=round_figure(res.diff),
        low=round_figure(res.low),
        high=round_figure(res.high),
        pairs=res.pairs_used,
    )
    return difference, iv


def read_verdict(
    reg: ProbeRegistration,
    knob: str,
    delta: tuple[float, Interval],
    control: tuple[float, Interval] | None,
    length_control: float | None,
    base_pass: float,
    top_pass: float,
) -> tuple[ProbeVerdict, str]:
    """The verdict of one knob on one model, and a note ("" or what decided it)."""
    rules = reg.rules
    direction = _distinguishable(delta[0], delta[1], rules.bite)
    note = ""
    control_rule = knob_def(knob).probe_control
    if control_rule == "length":
        held = length_control is not None and abs(length_control) < rules.length_control_max - 1e-12
        if direction != 0 and held:
            top = knob_arms(knob)[1]
            return "bites", f"{top} {'harder' if direction > 0 else 'easier'}"
        verdict: ProbeVerdict = "does not bite"
    else:
        if control_rule == "drop":
            if control is None:
                raise ValueError(f"{knob} needs its control difference")
            if _distinguishable(control[0], control[1], rules.bite) != direction:
                direction = 0
        verdict = "bites" if direction > 0 else "top easier" if direction < 0 else "does not bite"
    if verdict == "does not bite" and base_pass < rules.base_floor - 1e-12:
        return "cannot tell", note
    if verdict == "top easier" and top_pass > rules.top_ceiling + 1e-12:
        return "cannot tell", f"top passed {top_pass:.3f}"
    return verdict, note
