"""One cell's figures: rates with task-clustered intervals, pass@k, shares, medians and costs.

Scored episodes are the ones the instrument did not fail; every rate and per-episode figure is
over them. A task's pass rate is over its scored attempts, and a cell's pass@1 is the mean of its
tasks' rates, so every task weighs the same whatever its number of scored attempts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from poisson_tasks.arms import ArmSpec
from poisson_tasks.calibration.artifact import (
    Cell,
    CellCosts,
    Instrument,
    PassAtK,
    RateFigure,
    Totals,
)
from poisson_tasks.calibration.cardjson import round_figure
from poisson_tasks.calibration.intervals import rate_interval
from poisson_tasks.calibration.provenance import RecordedRates
from poisson_tasks.calibration.records import EpisodeRecord
from poisson_tasks.calibration.stats import (
    IntArray,
    is_saturated,
    median_or_none,
    percentile_or_none,
    task_pass_at_k,
)
from poisson_tasks.prereg import Thresholds

__all__ = ["CellCounts", "build_cell", "cell_counts", "no_call_share", "totals"]


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


def _share(records: Sequence[EpisodeRecord], test: Callable[[EpisodeRecord], bool]) -> float | None:
    return None if not records else round_figure(sum(1 for r in records if test(r)) / len(records))


def _mean(values: Sequence[float]) -> float | None:
    if not values:
        return None
    return round_figure(float(np.mean(np.asarray(values, dtype=np.float64))))


def _median(values: Sequence[float]) -> float | None:
    return _r(median_or_none(values))


def _p90(values: Sequence[float]) -> float | None:
    return _r(percentile_or_none(values, 90.0))


def _present(values: Sequence[float | int | None]) -> list[float]:
    return [float(v) for v in values if v is not None]


def cell_counts(scored: Sequence[EpisodeRecord], seeds: Sequence[int]) -> CellCounts:
    """Successes and scored attempts per seed, in the order of `seeds`."""
    index = {s: i for i, s in enumerate(seeds)}
    strict = np.zeros(len(seeds), dtype=np.int64)
    leaky = np.zeros(len(seeds), dtype=np.int64)
    att = np.zeros(len(seeds), dtype=np.int64)
    for record in scored:
        slot = index[record.seed]
        att[slot] += 1
        strict[slot] += record.strict_pass
        leaky[slot] += record.leaky_pass
    return CellCounts(strict=strict, leaky=leaky, attempts=att)


def no_call_share(scored: Sequence[EpisodeRecord]) -> float | None:
    """The share of scored episodes that made no tool call (None without a scored episode)."""
    return _share(scored, lambda record: record.no_tool_call)


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
        out.append(PassAtK(k=attempts_k, value=_r(value)))
    return out


def _sum(values: Sequence[int | None]) -> int | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def totals(records: Sequence[EpisodeRecord], rates: RecordedRates | None) -> Totals:
    """Token totals and dollars over every episode line given (scored and instrument alike)."""
    prompt = _sum([r.prompt_tokens for r in records])
    cached = _sum([r.cached_input_tokens for r in records])
    completion = _sum([r.completion_tokens for r in records])
    reasoning = _sum([r.reasoning_tokens for r in records])
    share = None
    if reasoning is not None and completion:
        share = round_figure(reasoning / completion)
    computed = None
    if rates is not None and prompt is not None and completion is not None:
        dollars = (
            prompt * rates.input + (cached or 0) * rates.cached_input + completion * rates.output
        ) / 1_000_000
        computed = round_figure(dollars)
    reported = [r.provider_cost_usd for r in records if r.provider_cost_usd is not None]
    return Totals(
        episodes=len(records),
        prompt_tokens=prompt,
        cached_input_tokens=cached,
        completion_tokens=completion,
        reasoning_tokens=reasoning,
        reasoning_share=share,
        computed_usd=computed,
        provider_usd=round_figure(sum(reported)) if reported else None,
        provider_usd_episodes=len(reported),
    )


def _costs(scored: Sequence[EpisodeRecord], strict_pass_at_1: float | None) -> CellCosts:
    tokens = _present([r.tokens for r in scored])
    mean_tokens = _mean(tokens)
    per_pass = None
    if mean_tokens is not None and strict_pass_at_1:
        per_pass = round_figure(mean_tokens / strict_pass_at_1)
    episode = _present([r.episode_s for r in scored])
    model = _present([r.model_s for r in scored])
    harness = _present([r.harness_s for r in scored])
    setup = _present([r.setup_s for r in scored])
    calls = [float(r.model_calls) for r in scored]
    tools = [float(r.tool_calls) for r in scored]
    return CellCosts(
        mean_model_calls=_mean(calls),
        median_model_calls=_median(calls),
        mean_tool_calls=_mean(tools),
        median_tool_calls=_median(tools),
        mean_tokens=mean_tokens,
        median_tokens=_median(tokens),
        p90_tokens=_p90(tokens),
        tokens_per_strict_pass=per_pass,
        timed_episodes=len(episode),
        episode_s_median=_median(episode),
        episode_s_p90=_p90(episode),
        model_s_median=_median(model),
        model_s_p90=_p90(model),
        harness_s_median=_median(harness),
        harness_s_p90=_p90(harness),
        setup_s_median=_median(setup),
    )


def _missing(records: Sequence[EpisodeRecord], seeds: Sequence[int], attempts: int) -> int:
    """Planned attempts with no episode line at all (scored or instrument)."""
    seen = {(r.seed, r.attempt) for r in records}
    return len(seeds) * attempts - len(seen)


def build_cell(
    spec: ArmSpec,
    records: Sequence[EpisodeRecord],
    seeds: Sequence[int],
    attempts: int,
    thresholds: Thresholds,
    rates: RecordedRates | None,
) -> tuple[Cell, CellCounts]:
    """One arm's Cell and its per-seed counts. A cell over the instrument limit is withheld."""
    scored = [r for r in records if not r.instrument]
    failed = [r for r in records if r.instrument]
    inst_rate = len(failed) / len(records) if records else None
    withheld = None
    if inst_rate is not None and inst_rate > thresholds.instrument_max:
        withheld = (
            f"instrument rate {inst_rate:.3f} is above {thresholds.instrument_max:g}: "
            "the cell is not published"
        )
    counts = cell_counts(scored, seeds)
    missing = _missing(records, seeds, attempts)
    figures = withheld is None
    strict = _rate(counts.strict, counts, thresholds) if figures else None
    leaky = _rate(counts.leaky, counts, thresholds) if figures else None
    sat = thresholds.saturation_low, thresholds.saturation_high
    tokens = _present([r.tokens for r in scored])
    timed = _present([r.episode_s for r in scored])
    cell = Cell(
        arm_id=spec.id,
        knob=spec.knob,
        level=spec.level,
        control=spec.is_control,
        min_calls=spec.min_calls,
        planned=len(seeds) * attempts,
        episodes=len(records),
        scored=len(scored),
        missing=missing,
        incomplete=missing > 0,
        resumed=sum(1 for r in records if r.resumed),
        instrument=Instrument(
            count=len(failed),
            rate=_r(inst_rate),
            by_outcome=dict(sorted(Counter(r.outcome for r in failed).items())),
        ),
        published=figures,
        withheld=withheld,
        outcomes=dict(sorted(Counter(r.outcome for r in scored).items())) if figures else {},
        strict=strict,
        leaky=leaky,
        overshoot=_share(scored, lambda record: record.overshoot) if figures else None,
        pass_at_k=_pass_at_k(counts, attempts) if figures and scored else [],
        no_tool_call=no_call_share(scored) if figures else None,
        stopped_short=_share(scored, lambda record: record.stopped_short) if figures else None,
        saturated_strict=is_saturated(strict.pass_at_1, *sat) if strict else None,
        saturated_leaky=is_saturated(leaky.pass_at_1, *sat) if leaky else None,
        median_model_calls=_median([float(r.model_calls) for r in scored]) if figures else None,
        median_tokens=_median(tokens) if figures else None,
        median_episode_s=_median(timed) if figures else None,
        costs=_costs(scored, strict.pass_at_1 if strict else None) if figures and scored else None,
        totals=totals(records, rates),
    )
    return cell, counts
