"""Adjacent levels and ordering: each level against the next one up, paired over shared seeds.

A pair is distinguishable only when its paired interval (at the pre-registered confidence)
excludes zero, the difference is at least the declared resolution, and the exact sign test over
the seeds whose rate differs agrees at the same level; otherwise it is too small for this design
to call. A pair that holds a level saturated on the rate compared (or a withheld
or empty cell) is left out, with the reason, and is never called. The ordering of a knob says
what its point estimates show and what these comparisons can call, each apart.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import pairwise
from typing import Literal

from poisson_tasks.arms import knob_def
from poisson_tasks.calibration.artifact import Cell, Comparison, KnobTable, Ordering, Rate
from poisson_tasks.calibration.cardjson import round_figure
from poisson_tasks.calibration.figures import CellCounts
from poisson_tasks.calibration.intervals import paired_interval
from poisson_tasks.calibration.stats import Interval, call_pair
from poisson_tasks.prereg import Thresholds

__all__ = ["compare_adjacent", "knob_table", "ordering", "ordering_reading"]


def _saturated(cell: Cell, rate: Rate) -> bool | None:
    return cell.saturated_strict if rate == "strict" else cell.saturated_leaky


def _short(cell: Cell) -> str:
    return cell.arm_id.split(":", 1)[1]


def _left_out_reason(lower: Cell, upper: Cell) -> str | None:
    """Why a pair cannot be compared before any bootstrap, or None when it can be computed."""
    for cell in (lower, upper):
        if not cell.published:
            return f"{_short(cell)} is withheld"
        if cell.scored == 0:
            return f"{_short(cell)} has no scored episode"
    return None


def _left_out(rate: Rate, lower: Cell, upper: Cell, reason: str) -> Comparison:
    """A pair the design does not compare, with the reason printed in its place."""
    return Comparison(
        rate=rate,
        lower=lower.arm_id,
        upper=upper.arm_id,
        diff=None,
        low=None,
        high=None,
        churn=None,
        pairs_used=0,
        sign_p=None,
        verdict="left_out",
        reason=reason,
    )


def compare_adjacent(
    lower: Cell,
    upper: Cell,
    counts: Mapping[str, CellCounts],
    rate: Rate,
    thresholds: Thresholds,
) -> Comparison:
    """Compare one level with the next one up on `rate` (difference is lower minus upper)."""
    blocked = _left_out_reason(lower, upper)
    if blocked is not None:
        return _left_out(rate, lower, upper, blocked)
    lower_counts, upper_counts = counts[lower.arm_id], counts[upper.arm_id]
    a_succ, b_succ = (
        (lower_counts.strict, upper_counts.strict)
        if rate == "strict"
        else (lower_counts.leaky, upper_counts.leaky)
    )
    try:
        result = paired_interval(
            a_succ, lower_counts.attempts, b_succ, upper_counts.attempts, thresholds.confidence
        )
    except ValueError:
        return _left_out(
            rate, lower, upper, "fewer than two seeds have scored attempts at both levels"
        )
    saturated = [_short(c) for c in (lower, upper) if _saturated(c, rate)]
    reason = None
    if saturated:
        verdict = "left_out"
        reason = f"{' and '.join(saturated)} saturated on {rate}"
    else:
        interval = Interval(
            low=result.low, high=result.high, point=result.diff, sign_rejects=result.sign_rejects
        )
        verdict = call_pair(result.diff, interval, thresholds.resolution)
        interval_alone = Interval(low=result.low, high=result.high, point=result.diff)
        interval_only_call = call_pair(result.diff, interval_alone, thresholds.resolution)
        if verdict == "too_small" and interval_only_call == "distinguishable":
            differ = round(result.churn * result.pairs_used)
            reason = (
                f"the interval excludes 0, but the sign test over the {differ} seeds that differ "
                f"does not (p = {result.sign_p:.3f})"
            )
    return Comparison(
        rate=rate,
        lower=lower.arm_id,
        upper=upper.arm_id,
        diff=round_figure(result.diff),
        low=round_figure(result.low),
        high=round_figure(result.high),
        churn=round_figure(result.churn),
        pairs_used=result.pairs_used,
        sign_p=round_figure(result.sign_p),
        verdict=verdict,
        reason=reason,
    )


def _estimate(cell: Cell, rate: Rate) -> float | None:
    figure = cell.strict if rate == "strict" else cell.leaky
    return None if figure is None or not cell.published else figure.pass_at_1


def ordering(levels: Sequence[Cell], comparisons: Sequence[Comparison], rate: Rate) -> Ordering:
    """Is pass@1 non-increasing across the levels? Read from the point estimates and from the
    paired comparisons on `rate`, each named, so the verdict never hides a rising estimate.

    no when a pair is distinguishable with the rate rising; yes when every pair is compared and
    no point estimate rises; single_level when the knob has one level, so there is nothing to
    order; otherwise cannot_tell (an estimate rises too little to call, or a pair is left out).
    Levels saturated on the rate are named whatever the verdict.
    """
    mine = [c for c in comparisons if c.rate == rate]

    def pairs(keep: Callable[[Comparison], bool]) -> list[str]:
        return [f"{_level(cmp.lower)}→{_level(cmp.upper)}" for cmp in mine if keep(cmp)]

    rising = pairs(lambda cmp: cmp.verdict == "distinguishable" and (cmp.diff or 0.0) < 0.0)
    falling = pairs(lambda cmp: cmp.verdict == "distinguishable" and (cmp.diff or 0.0) > 0.0)
    left = pairs(lambda cmp: cmp.verdict == "left_out")
    estimates = [_estimate(cell, rate) for cell in levels]
    estimate_rises = [
        f"{_short(lo)}→{_short(hi)}"
        for (lo, a), (hi, b) in pairwise(zip(levels, estimates, strict=True))
        if a is not None and b is not None and b > a
    ]
    verdict: Literal["yes", "no", "cannot_tell", "single_level"]
    if len(levels) < 2:
        verdict = "single_level"
    elif rising:
        verdict = "no"
    elif left or estimate_rises:
        verdict = "cannot_tell"
    else:
        verdict = "yes"
    return Ordering(
        rate=rate,
        verdict=verdict,
        estimate_rises=estimate_rises,
        no_estimate=[_short(c) for c, e in zip(levels, estimates, strict=True) if e is None],
        rising=rising,
        falling=falling,
        left_out=left,
        saturated=[_short(c) for c in levels if _saturated(c, rate)],
    )


def _pairs(what: str, pairs: Sequence[str]) -> str:
    return f"{what} at {', '.join(pairs)}"


def ordering_reading(ordering: Ordering) -> str:
    """What an ordering verdict was read from, as plain text: the point estimates, then what the
    adjacent comparisons call, then the pairs left out and the saturated levels."""
    rises = _pairs("rise", ordering.estimate_rises) if ordering.estimate_rises else ""
    estimates = rises or "never rise"
    if ordering.no_estimate:
        estimates = f"none at {', '.join(ordering.no_estimate)}; {rises or 'never rise elsewhere'}"
    called = [
        _pairs("rise", ordering.rising) if ordering.rising else "no rise",
        _pairs("fall", ordering.falling) if ordering.falling else "no fall",
    ]
    parts = [f"point estimates: {estimates}", f"distinguishable: {', '.join(called)}"]
    if ordering.left_out:
        parts.append(f"left out: {', '.join(ordering.left_out)}")
    if ordering.saturated:
        parts.append(f"saturated on {ordering.rate}: {', '.join(ordering.saturated)}")
    return "; ".join(parts)


def _level(arm_id: str) -> str:
    return arm_id.split(":", 1)[1]


def knob_table(
    knob: str, levels: Sequence[Cell], counts: Mapping[str, CellCounts], thresholds: Thresholds
) -> KnobTable:
    """A knob's table, read on the rate its KnobDef names (depth: leaky) and always also compared
    and ordered on strict."""
    read_on = knob_def(knob).read_on
    rates: tuple[Rate, ...] = ("leaky", "strict") if read_on == "leaky" else ("strict",)
    comparisons = [
        compare_adjacent(lo, hi, counts, rate, thresholds)
        for rate in rates
        for lo, hi in pairwise(levels)
    ]
    return KnobTable(
        knob=knob,
        levels=[c.arm_id for c in levels],
        read_on=read_on,
        comparisons=comparisons,
        ordering_strict=ordering(levels, comparisons, "strict"),
        ordering_leaky=ordering(levels, comparisons, "leaky") if read_on == "leaky" else None,
    )
