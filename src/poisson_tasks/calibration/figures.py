"""One cell's figures: rates with task-clustered intervals, pass@k, shares, medians and costs.

Scored episodes are the ones the instrument did not fail; every rate and per-episode figure is
over them. A task's pass rate is over its scored attempts, and a cell's pass@1 is the mean of its
tasks' rates, so every task weighs the same whatever its number of scored attempts.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from poisson_tasks.arms import ArmSpec
from poisson_tasks.calibration.artifact import (
    Cell,
    CellCosts,
    Instrument,
    NoCalls,
    PassAtK,
    PassHatK,
    RateFigure,
    Totals,
)
from poisson_tasks.calibration.cardjson import round_figure
from poisson_tasks.calibration.intervals import rate_interval
from poisson_tasks.calibration.stats import (
    IntArray,
    is_saturated,
    median_or_none,
    pass_hat_k,
    percentile_or_none,
    task_pass_at_k,
)
from poisson_tasks.calibration.tally import CellTally, TotalsTally
from poisson_tasks.prereg import Rates, Thresholds

__all__ = ["CellCounts", "build_cell", "cell_counts", "no_call_share", "no_calls", "totals"]


@dataclass(frozen=True)
class CellCounts:
    """Per-seed strict and leaky successes and scored attempts, aligned to the plan's seed order."""

    strict: IntArray
    leaky: IntArray
    attempts: IntArray

    @property
    def scored(self) -> int:
        return int(self.attempts.sum())


def _r(figure: float | None) -> float | None:
    return None if figure is None else round_figure(figure)


def _share(count: int, of: int) -> float | None:
    return None if not of else round_figure(count / of)


def _mean(values: Sequence[float] | array[float]) -> float | None:
    if not values:
        return None
    return round_figure(float(np.mean(np.asarray(values, dtype=np.float64))))


def _median(values: Sequence[float] | array[float]) -> float | None:
    return _r(median_or_none(values))


def _p90(values: Sequence[float] | array[float]) -> float | None:
    return _r(percentile_or_none(values, 90.0))


def cell_counts(cell: CellTally) -> CellCounts:
    """Successes and scored attempts per seed, in the order of the plan's seeds."""
    return CellCounts(
        strict=np.array(cell.strict, dtype=np.int64),
        leaky=np.array(cell.leaky, dtype=np.int64),
        attempts=np.array(cell.attempts, dtype=np.int64),
    )


def no_calls(cell: CellTally) -> NoCalls:
    """The cell's no-call episodes, those that wrote a call as text, and their dialects."""
    return NoCalls(
        episodes=cell.no_tool_call,
        as_text=cell.no_call_text,
        dialects=dict(sorted(cell.no_call_dialects.items())),
    )


def no_call_share(cell: CellTally) -> float | None:
    """The share of scored episodes that made no tool call (None without a scored episode)."""
    return _share(cell.no_tool_call, cell.scored)


def _rate(successes: IntArray, counts: CellCounts, th: Thresholds) -> RateFigure | None:
    if counts.scored == 0:
        return None
    iv = rate_interval(successes, counts.attempts, th.confidence)
    return RateFigure(
        pass_at_1=round_figure(iv.point),
        low=round_figure(iv.low),
        high=round_figure(iv.high),
        few_events=iv.few_events,
    )


def _pass_at_k(counts: CellCounts, attempts: int) -> list[PassAtK]:
    out = []
    for attempts_k in range(1, attempts + 1):
        has_k = bool(np.any(counts.attempts >= attempts_k))
        value = task_pass_at_k(counts.strict, counts.attempts, attempts_k) if has_k else None
        out.append(PassAtK(attempts=attempts_k, value=_r(value)))
    return out


def _pass_hat_k(counts: CellCounts, attempts: int) -> list[PassHatK]:
    """Strict pass^k for k from 1 to the attempts (pass^1 is pass@1, kept so the list reads alike)."""
    out = []
    for attempts_k in range(1, attempts + 1):
        has_k = bool(np.any(counts.attempts >= attempts_k))
        value = pass_hat_k(counts.strict, counts.attempts, attempts_k) if has_k else None
        out.append(PassHatK(attempts=attempts_k, value=_r(value)))
    return out


def totals(tally: TotalsTally, rates: Rates | None) -> Totals:
    """Token totals and dollars over every episode line tallied (scored and instrument alike)."""
    prompt, cached, completion = tally.prompt, tally.cached, tally.completion
    reasoning = tally.reasoning
    share = None
    if reasoning is not None and completion:
        share = round_figure(reasoning / completion)
    computed = None
    if rates is not None and prompt is not None and completion is not None:
        dollars = (
            prompt * rates.input + (cached or 0) * rates.cached_input + completion * rates.output
        ) / 1_000_000
        computed = round_figure(dollars)
    reported = tally.costs
    return Totals(
        episodes=tally.episodes,
        uncached_input_tokens=prompt,
        cached_input_tokens=cached,
        completion_tokens=completion,
        reasoning_tokens=reasoning,
        reasoning_share=share,
        computed_usd=computed,
        provider_usd=round_figure(sum(reported)) if reported else None,
        provider_usd_episodes=len(reported),
    )


def _costs(cell: CellTally, strict_pass_at_1: float | None) -> CellCosts:
    mean_tokens = _mean(cell.tokens)
    per_pass = None
    if mean_tokens is not None and strict_pass_at_1:
        per_pass = round_figure(mean_tokens / strict_pass_at_1)
    return CellCosts(
        mean_model_calls=_mean(cell.model_calls),
        median_model_calls=_median(cell.model_calls),
        mean_tool_calls=_mean(cell.tool_calls),
        median_tool_calls=_median(cell.tool_calls),
        mean_tokens=mean_tokens,
        median_tokens=_median(cell.tokens),
        p90_tokens=_p90(cell.tokens),
        tokens_per_strict_pass=per_pass,
        timed_episodes=len(cell.episode_s),
        episode_s_median=_median(cell.episode_s),
        episode_s_p90=_p90(cell.episode_s),
        model_s_median=_median(cell.model_s),
        model_s_p90=_p90(cell.model_s),
        harness_s_median=_median(cell.harness_s),
        harness_s_p90=_p90(cell.harness_s),
        setup_s_median=_median(cell.setup_s),
    )


def build_cell(
    spec: ArmSpec,
    cell: CellTally,
    seeds: Sequence[int],
    attempts: int,
    thresholds: Thresholds,
    rates: Rates | None,
) -> tuple[Cell, CellCounts]:
    """One arm's Cell and its per-seed counts. A cell over the instrument limit is withheld."""
    episodes, scored = cell.totals.episodes, cell.scored
    failed = episodes - scored
    inst_rate = failed / episodes if episodes else None
    withheld = None
    if inst_rate is not None and inst_rate > thresholds.instrument_max:
        withheld = (
            f"instrument rate {inst_rate:.3f} is above {thresholds.instrument_max:g}: "
            "the cell is not published"
        )
    counts = cell_counts(cell)
    missing = len(seeds) * attempts - cell.seen
    figures = withheld is None
    strict = _rate(counts.strict, counts, thresholds) if figures else None
    leaky = _rate(counts.leaky, counts, thresholds) if figures else None
    sat = thresholds.saturation_low, thresholds.saturation_high
    result = Cell(
        arm_id=spec.id,
        knob=spec.knob,
        level=spec.level,
        control=spec.is_control,
        min_calls=spec.min_calls,
        planned=len(seeds) * attempts,
        episodes=episodes,
        scored=scored,
        missing=missing,
        incomplete=missing > 0,
        resumed=cell.resumed,
        instrument=Instrument(
            count=failed,
            rate=_r(inst_rate),
            by_outcome=dict(sorted(cell.failed.items())),
        ),
        published=figures,
        withheld=withheld,
        outcomes=dict(sorted(cell.outcomes.items())) if figures else {},
        malformed_clauses=dict(sorted(cell.malformed_clauses.items())) if figures else {},
        no_calls=no_calls(cell) if figures else NoCalls(episodes=0, as_text=0, dialects={}),
        strict=strict,
        leaky=leaky,
        overshoot=_share(cell.overshoot, scored) if figures else None,
        pass_at_k=_pass_at_k(counts, attempts) if figures and scored else [],
        pass_hat_k=_pass_hat_k(counts, attempts) if figures and scored else [],
        no_tool_call=no_call_share(cell) if figures else None,
        stopped_short=_share(cell.stopped_short, scored) if figures else None,
        saturated_strict=is_saturated(strict.pass_at_1, *sat) if strict else None,
        saturated_leaky=is_saturated(leaky.pass_at_1, *sat) if leaky else None,
        median_model_calls=_median(cell.model_calls) if figures else None,
        median_tokens=_median(cell.tokens) if figures else None,
        median_episode_s=_median(cell.episode_s) if figures else None,
        costs=_costs(cell, strict.pass_at_1 if strict else None) if figures and scored else None,
        totals=totals(cell.totals, rates),
    )
    return result, counts
