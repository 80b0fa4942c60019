"""The card's closed-form intervals and its distinguishable call, checked against references."""

from __future__ import annotations

import dataclasses
import math
import statistics

import numpy as np
import pytest
from scipy import stats as scipy_stats

from poisson_tasks.calibration.intervals import (
    PairedArrays,
    agresti_coull,
    distinguishable_arrays,
    exact_all_agree_bound,
    few_events,
    paired_interval,
    paired_interval_arrays,
    rate_interval,
    rate_interval_arrays,
    sign_test_p,
    t_critical,
    t_inflation,
    variance_df,
    z_critical,
)
from poisson_tasks.calibration.stats import Interval, call_pair


@pytest.mark.parametrize("df", [1, 2, 3, 4, 9, 10, 29, 59, 199, 999])
def test_t_critical_matches_scipy(df: int) -> None:
    for confidence in (0.9, 0.95, 0.99):
        expected = scipy_stats.t.ppf(0.5 + confidence / 2.0, df)
        assert t_critical(confidence, df) == pytest.approx(expected, abs=1e-9)


def test_agresti_coull_by_hand() -> None:
    # 15 of 50 at 95%: add z^2/2 to each side, Wald on 50 + z^2 trials
    z = z_critical(0.95)
    size = 50 + z * z
    centre = (15 + z * z / 2) / size
    half = z * math.sqrt(centre * (1 - centre) / size)
    low, high = agresti_coull(0.3, 50, 0.95)
    assert float(low) == pytest.approx(centre - half, abs=1e-12)
    assert float(high) == pytest.approx(centre + half, abs=1e-12)
    assert float(low) == pytest.approx(0.1903, abs=1e-4)


def test_variance_df_reads_the_spread_from_the_few_tasks_that_carry_it() -> None:
    spread = np.linspace(0.1, 0.9, 60)  # spread over the whole range: capped at T - 1
    assert int(variance_df(spread[None, :])[0]) == 59
    one_task = np.array([1.0] * 59 + [0.8])  # one task of sixty carries the whole variance
    assert int(variance_df(one_task[None, :])[0]) == 2
    flat = np.full((1, 10), 0.4)  # no spread: T - 1
    assert int(variance_df(flat)[0]) == 9


def test_rate_interval_saturated_cells_get_the_exact_bound_never_zero_width() -> None:
    every = rate_interval([5] * 60, [5] * 60, 0.95)
    assert every.low == pytest.approx(0.025 ** (1 / 60)) and every.high == 1.0
    none = rate_interval([0] * 60, [5] * 60, 0.95)
    assert none.low == 0.0 and none.high == pytest.approx(1 - 0.025 ** (1 / 60))


def test_rate_interval_binomial_without_clustering_is_agresti_coull_on_all_attempts() -> None:
    # one attempt per task: no task effect can show, the design effect is 1
    succ = [1] * 18 + [0] * 42
    got = rate_interval(succ, [1] * 60, 0.95)
    low, high = agresti_coull(0.3, 60, 0.95)
    assert (got.low, got.high) == pytest.approx((float(low), float(high)))


def test_rate_interval_widens_with_clustering() -> None:
    spread = rate_interval([2, 3, 1, 2, 3, 2, 1, 3, 2, 1] * 6, [5] * 60, 0.95)
    lumped = rate_interval([5, 0, 5, 0, 0, 5, 0, 0, 5, 0] * 6, [5] * 60, 0.95)
    assert spread.point == pytest.approx(0.4) and lumped.point == pytest.approx(0.4)
    assert lumped.high - lumped.low > 1.5 * (spread.high - spread.low)


def test_sign_test_exact_values() -> None:
    ten_up = np.full(10, 0.2)
    assert float(sign_test_p(ten_up)[0]) == pytest.approx(2 / 1024)
    nine_up = np.array([0.2] * 9 + [-0.2])
    assert float(sign_test_p(nine_up)[0]) == pytest.approx(2 * 11 / 1024)
    ties_ignored = np.array([0.2] * 9 + [-0.2] + [0.0] * 50)
    assert float(sign_test_p(ties_ignored)[0]) == pytest.approx(2 * 11 / 1024)
    # the mean goes up but most tasks go down: no support in the mean's direction
    against = np.array([1.0, 1.0, -0.2, -0.2, -0.2])
    assert float(sign_test_p(against)[0]) == 1.0
    assert float(sign_test_p(np.zeros(8))[0]) == 1.0
    for ups, downs in [(14, 3), (30, 18), (7, 0)]:
        diffs = np.array([0.4] * ups + [-0.2] * downs)
        expected = scipy_stats.binomtest(ups, ups + downs, 0.5).pvalue
        assert float(sign_test_p(diffs)[0]) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_sign_test_size_is_at_most_alpha_for_every_number_of_differing_tasks(
    confidence: float,
) -> None:
    alpha = 1.0 - confidence
    for differ in range(1, 61):
        size = 0.0
        for ups in range(differ + 1):
            diffs = np.array([0.2] * ups + [-0.2] * (differ - ups))
            if float(sign_test_p(diffs)[0]) <= alpha + 1e-12:
                size += math.comb(differ, ups) / 2**differ
        assert size <= alpha + 1e-12, (differ, size)


def test_a_pair_whose_interval_excludes_zero_is_not_called_without_the_sign_test() -> None:
    att = [5] * 10
    result = paired_interval(
        [5, 5, 5, 5, 5, 5, 4, 2, 3, 3], att, [0, 0, 0, 0, 0, 4, 5, 3, 3, 3], att, 0.95
    )
    assert result.low > 0.0 and result.diff >= 0.15
    assert not result.sign_rejects and result.sign_p == pytest.approx(2 * 37 / 256)  # 6 up, 2 down
    alone = Interval(low=result.low, high=result.high, point=result.diff)
    assert call_pair(result.diff, alone) == "distinguishable"
    signed = Interval(result.low, result.high, result.diff, sign_rejects=result.sign_rejects)
    assert call_pair(result.diff, signed) == "too_small"


def test_the_benchmarks_vectorised_call_is_the_cards_call() -> None:
    rng = np.random.default_rng(3)
    att = np.full((400, 12), 3)
    sa = rng.binomial(att, rng.uniform(0.2, 0.9, (400, 1)))
    sb = rng.binomial(att, rng.uniform(0.2, 0.9, (400, 1)))
    pairs = paired_interval_arrays(sa, att, sb, att, 0.95)
    vectorised = distinguishable_arrays(pairs, 0.15, 0.95)
    for row in range(400):
        one = paired_interval(sa[row], att[row], sb[row], att[row], 0.95)
        interval = Interval(one.low, one.high, one.diff, sign_rejects=one.sign_rejects)
        assert (call_pair(one.diff, interval, 0.15) == "distinguishable") == bool(vectorised[row])
    assert 0 < int(vectorised.sum()) < 400


# ------------------------------------------------------------------ an independent reading (issue 32)
# The card's intervals written out again from docs/calibration.md, one task at a time in plain
# Python, with scipy's quantiles; every figure of rate_interval and paired_interval is held to it.
# The mutants of intervals.py that the tests above let through are what these kill (docs/mutation.md).


def _z(confidence: float) -> float:
    return float(scipy_stats.norm.ppf(0.5 + confidence / 2))


def _t(confidence: float, df: int) -> float:
    return float(scipy_stats.t.ppf(0.5 + confidence / 2, df))


def _satterthwaite_df(rates: list[float]) -> int:
    """2T / (kurtosis - (T-3)/(T-1)), rounded down, within [1, T-1]; kurtosis 3 with no spread."""
    tasks = len(rates)
    mean = sum(rates) / tasks
    second = sum((r - mean) ** 2 for r in rates)
    fourth = sum((r - mean) ** 4 for r in rates)
    kurtosis = tasks * fourth / second**2 if second > 0 else 3.0
    df = math.floor(2 * tasks / (kurtosis - (tasks - 3) / (tasks - 1)))
    return min(max(df, 1), tasks - 1)


def _agresti_coull(p: float, n: float, confidence: float) -> tuple[float, float]:
    """z^2/2 successes and z^2/2 failures added, then Wald on n + z^2 trials, within [0, 1]."""
    z2 = _z(confidence) ** 2
    centre = (p * n + z2 / 2) / (n + z2)
    half = math.sqrt(z2 * centre * (1 - centre) / (n + z2))
    return max(centre - half, 0.0), min(centre + half, 1.0)


def _reference_rate(
    succ: list[int], att: list[int], confidence: float, whole: float | None = None
) -> tuple[float, float, float, float]:
    """(point, low, high, n_eff) of a level's rate; `whole` widens the whole design effect."""
    cells = [(s, n) for s, n in zip(succ, att, strict=True) if n > 0]
    tasks, total = len(cells), sum(n for _, n in cells)
    rates = [s / n for s, n in cells]
    p = sum(rates) / tasks
    var_mean = statistics.variance(rates) / tasks
    binomial = p * (1 - p) / total
    deff = 1.0 if var_mean == 0 else min(max(var_mean / binomial, 1.0), total / tasks)
    if whole is None:
        widen = (_t(confidence, _satterthwaite_df(rates)) / _z(confidence)) ** 2
        n_eff = total / (1 + (deff - 1) * widen)
    else:
        n_eff = total / (deff * whole)
    low, high = _agresti_coull(p, n_eff, confidence)
    exact = ((1 - confidence) / 2) ** (1 / tasks)
    if all(s == n for s, n in cells):
        low, high = exact, 1.0
    if all(s == 0 for s, _ in cells):
        low, high = 0.0, 1 - exact
    return p, low, high, n_eff


def _pearson(xs: list[float], ys: list[float]) -> float:
    if len(set(xs)) < 2 or len(set(ys)) < 2:
        return 0.0
    return max(-1.0, min(1.0, statistics.correlation(xs, ys)))


def _reference_paired(
    sa: list[int], na: list[int], sb: list[int], nb: list[int], confidence: float
) -> tuple[float, float, float, float]:
    """(difference, low, high, churn) of A minus B over the tasks scored at both levels."""
    used = [i for i in range(len(sa)) if na[i] > 0 and nb[i] > 0]
    ra = [sa[i] / na[i] for i in used]
    rb = [sb[i] / nb[i] for i in used]
    diffs = [a - b for a, b in zip(ra, rb, strict=True)]
    whole = (_t(confidence, _satterthwaite_df(diffs)) / _z(confidence)) ** 2
    pa, la, ua, _ = _reference_rate([sa[i] for i in used], [na[i] for i in used], confidence, whole)
    pb, lb, ub, _ = _reference_rate([sb[i] for i in used], [nb[i] for i in used], confidence, whole)
    corr = _pearson(ra, rb)
    low_half = math.sqrt(max((pa - la) ** 2 - 2 * corr * (pa - la) * (ub - pb) + (ub - pb) ** 2, 0))
    high_half = math.sqrt(
        max((ua - pa) ** 2 - 2 * corr * (ua - pa) * (pb - lb) + (pb - lb) ** 2, 0)
    )
    if all(d == 0 for d in diffs):
        floor = 1 - ((1 - confidence) / 2) ** (1 / len(used))
        low_half, high_half = max(low_half, floor), max(high_half, floor)
    diff = pa - pb
    churn = sum(d != 0 for d in diffs) / len(used)
    return diff, max(diff - low_half, -1.0), min(diff + high_half, 1.0), churn


def _cells(seed: int) -> list[tuple[list[int], list[int]]]:
    """Cells of every shape the card meets: few and many tasks, one and many attempts, ragged
    attempts, a task with none, rates spread, lumped, near and at the edges."""
    rng = np.random.default_rng(seed)
    out = []
    for tasks in (2, 3, 4, 7, 12, 30, 60):
        for a, b in ((0.7, 0.7), (0.2, 2.0), (3.0, 0.3), (40.0, 40.0)):
            att = rng.integers(1, 9, size=tasks)
            if tasks > 3:
                att[rng.integers(tasks)] = 0
            succ = rng.binomial(att, rng.beta(a, b, size=tasks))
            out.append((succ.tolist(), att.tolist()))
    out += [
        ([5] * 59 + [4], [5] * 60),  # one failure in sixty tasks
        ([0] * 58 + [1, 5], [5] * 60),
        ([1, 0] * 5, [1] * 10),  # one attempt each
        ([3, 3, 3], [5, 5, 5]),  # no spread, away from the edges
        ([2, 4], [4, 8]),  # two tasks, the same rate
    ]
    return out


@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_rate_interval_is_the_documented_interval(confidence: float) -> None:
    for succ, att in _cells(int(confidence * 100)):
        got = rate_interval(succ, att, confidence)
        point, low, high, n_eff = _reference_rate(succ, att, confidence)
        expected = (point, low, high, n_eff)
        assert (got.point, got.low, got.high, got.n_eff) == pytest.approx(
            expected, rel=1e-9, abs=1e-12
        ), (succ, att)
        assert got.tasks == sum(1 for n in att if n > 0)
        passes = sum(succ)
        assert got.few_events == (min(passes, sum(att) - passes) < 15)


@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_paired_interval_is_the_documented_interval(confidence: float) -> None:
    cells = _cells(int(confidence * 1000))
    rng = np.random.default_rng(5)
    for (sa, na), (sb, nb) in zip(cells, cells[1:] + cells[:1], strict=True):
        size = min(len(sa), len(sb))
        sa, na, sb, nb = sa[:size], na[:size], sb[:size], nb[:size]
        if sum(1 for i in range(size) if na[i] and nb[i]) < 2:
            continue
        for a_succ, b_succ in ((sa, sb), (sa, [int(x) for x in rng.binomial(na, 0.5)])):
            b_att = nb if b_succ is sb else na
            got = paired_interval(a_succ, na, b_succ, b_att, confidence)
            diff, low, high, churn = _reference_paired(a_succ, na, b_succ, b_att, confidence)
            assert (got.diff, got.low, got.high) == pytest.approx(
                (diff, low, high), rel=1e-9, abs=1e-12
            ), (a_succ, na, b_succ, b_att)
            assert got.churn == pytest.approx(churn)
            used = sum(1 for i in range(size) if na[i] and b_att[i])
            assert (got.pairs_used, got.pairs_dropped) == (used, size - used)


def test_a_pair_with_no_task_that_differs_is_at_least_the_exact_share_wide() -> None:
    att = [5] * 20
    same = [3, 4, 5, 2, 1] * 4
    got = paired_interval(same, att, same, att, 0.95)
    floor = 1 - 0.025 ** (1 / 20)
    assert got.diff == 0.0 and got.churn == 0.0 and got.sign_p == 1.0 and not got.sign_rejects
    assert got.low == pytest.approx(-floor) and got.high == pytest.approx(floor)
    # one attempt per task: the rates differ nowhere, and the floor holds at every confidence
    for confidence in (0.9, 0.99):
        got = paired_interval([1, 0] * 10, [1] * 20, [1, 0] * 10, [1] * 20, confidence)
        floor = 1 - ((1 - confidence) / 2) ** (1 / 20)
        assert (got.low, got.high) == pytest.approx((-floor, floor))


def test_the_sign_test_decides_at_the_intervals_confidence() -> None:
    """sign_rejects is sign_p <= 1 - confidence: eleven tasks all up give p = 2/2048, which
    rejects at 0.99 (alpha 0.01) and at 0.999, and six all up (p = 2/64) rejects at 0.95 only."""
    att = [4] * 11
    got = paired_interval([4] * 11, att, [1] * 11, att, 0.99)
    assert got.sign_p == pytest.approx(2 / 2048) and got.sign_rejects
    assert paired_interval([4] * 11, att, [1] * 11, att, 0.999).sign_rejects
    six = paired_interval([4] * 6, [4] * 6, [1] * 6, [4] * 6, 0.95)
    assert six.sign_p == pytest.approx(2 / 64) and six.sign_rejects
    assert not paired_interval([4] * 6, [4] * 6, [1] * 6, [4] * 6, 0.99).sign_rejects
    exactly = paired_interval([4] * 5 + [1], [4] * 6, [1] * 5 + [4], [4] * 6, 0.95)
    assert exactly.sign_p == pytest.approx(2 * 7 / 64)  # five up, one down: 0.21875
    assert not exactly.sign_rejects


def test_one_task_says_nothing_narrower_than_zero_to_one() -> None:
    got = rate_interval([3, 0], [4, 0], 0.95)
    assert (got.point, got.low, got.high, got.n_eff, got.tasks) == (0.75, 0.0, 1.0, 1.0, 1)
    assert got.few_events
    assert rate_interval([20], [20], 0.95).few_events  # no failure at all


def test_few_events_counts_successes_and_failures_against_fifteen() -> None:
    att = [5] * 6
    assert not rate_interval([3, 3, 2, 2, 3, 2], att, 0.95).few_events  # 15 up, 15 down
    assert rate_interval([3, 3, 2, 2, 3, 1], att, 0.95).few_events  # 14 successes
    assert rate_interval([3, 3, 3, 3, 3, 2], att, 0.95).few_events  # 14 failures
    assert few_events(15, 15) is False and few_events(14, 100) and few_events(100, 14)


def test_cells_that_cannot_be_rated_are_refused() -> None:
    with pytest.raises(ValueError):
        rate_interval([1, 2], [3], 0.95)
    with pytest.raises(ValueError):
        rate_interval([[1, 2]], [[3, 3]], 0.95)
    for succ, att in (([-1, 1], [2, 2]), ([1, 3], [2, 2]), ([1, 1], [-2, 2])):
        with pytest.raises(ValueError):
            rate_interval(succ, att, 0.95)
    with pytest.raises(ValueError, match="no task with a scored attempt"):
        rate_interval([0, 0], [0, 0], 0.95)
    with pytest.raises(ValueError):
        paired_interval([1, 1], [2, 2], [1, 1, 1], [2, 2, 2], 0.95)
    with pytest.raises(ValueError):
        paired_interval([1, 1], [2, 0], [1, 1], [0, 2], 0.95)  # no seed scored at both levels
    with pytest.raises(ValueError, match="fewer than two seeds"):
        paired_interval([1, 1], [2, 2], [0, 1], [0, 2], 0.95)  # one seed scored at both levels
    with pytest.raises(ValueError):
        rate_interval_arrays([[1, 1]], [[1, 0]], 0.95)
    with pytest.raises(ValueError):
        rate_interval_arrays([[1]], [[1]], 0.95)
    with pytest.raises(ValueError):
        rate_interval_arrays([[1, 1]], [[2, 2, 2]], 0.95)
    with pytest.raises(ValueError):
        paired_interval_arrays([[1, 1]], [[2, 2]], [[1]], [[2]], 0.95)
    for bad in (0.0, 1.0, -0.5, 1.5):
        with pytest.raises(ValueError):
            t_critical(bad, 5)
    with pytest.raises(ValueError):
        t_critical(0.95, 0)


def test_many_cells_at_once_are_each_cell_alone() -> None:
    rng = np.random.default_rng(11)
    att = rng.integers(1, 6, size=(50, 9))
    sa = rng.binomial(att, rng.uniform(0.05, 0.95, (50, 9)))
    sb = rng.binomial(att, rng.uniform(0.05, 0.95, (50, 9)))
    rates = rate_interval_arrays(sa, att, 0.95)
    pairs = paired_interval_arrays(sa, att, sb, att, 0.95)
    for row in range(50):
        one = rate_interval(sa[row], att[row], 0.95)
        assert (rates.point[row], rates.low[row], rates.high[row], rates.n_eff[row]) == (
            pytest.approx((one.point, one.low, one.high, one.n_eff), rel=1e-12)
        )
        pair = paired_interval(sa[row], att[row], sb[row], att[row], 0.95)
        assert (pairs.diff[row], pairs.low[row], pairs.high[row], pairs.sign_p[row]) == (
            pytest.approx((pair.diff, pair.low, pair.high, pair.sign_p), rel=1e-12)
        )


def test_t_critical_over_a_thousand_degrees_is_the_normal_value() -> None:
    """Up to 1,000 degrees of freedom t is exact; past them z stands in, at most 0.005 short of
    t (at 0.99 and 1,001 degrees), a widening factor (t/z)^2 of at most 1.004."""
    for confidence in (0.9, 0.95, 0.99):
        exact = scipy_stats.t.ppf(0.5 + confidence / 2, 1000)
        assert t_critical(confidence, 1000) == pytest.approx(exact, abs=1e-9)
        for df in (1001, 5000):
            assert t_critical(confidence, df) == z_critical(confidence)
            gap = scipy_stats.t.ppf(0.5 + confidence / 2, df) - z_critical(confidence)
            assert 0 < gap < 0.005


def test_exact_all_agree_bound_and_t_inflation_by_hand() -> None:
    assert exact_all_agree_bound(0.95, 60) == pytest.approx(0.025 ** (1 / 60))
    assert exact_all_agree_bound(0.9, 10) == pytest.approx(0.05 ** (1 / 10))
    df = np.array([1, 4, 4, 59], dtype=np.int64)
    expected = [(scipy_stats.t.ppf(0.975, d) / scipy_stats.norm.ppf(0.975)) ** 2 for d in df]
    assert t_inflation(df, 0.95) == pytest.approx(expected, rel=1e-9)


def test_the_sign_test_is_the_same_whichever_way_the_tasks_go() -> None:
    for ups, downs in [(10, 0), (9, 1), (14, 3), (3, 3)]:
        up = np.array([0.4] * ups + [-0.2] * downs)
        assert float(sign_test_p(-up)[0]) == float(sign_test_p(up)[0])
    assert float(sign_test_p(np.full(10, -0.2))[0]) == pytest.approx(2 / 1024)
    assert float(sign_test_p(np.ones(10))[0]) == pytest.approx(2 / 1024)  # every task 0 -> 1
    assert float(sign_test_p(-np.ones(10))[0]) == pytest.approx(2 / 1024)  # every task 1 -> 0


def test_the_sign_test_decides_at_any_confidence_below_one_half_too() -> None:
    """sign_rejects is sign_p <= 1 - confidence whatever the confidence: at 0.4 the bar is 0.6."""
    att = [4] * 6
    got = paired_interval([4] * 5 + [1], att, [1] * 5 + [4], att, 0.4)  # five up, one down
    assert got.sign_p == pytest.approx(2 * 7 / 64) and got.sign_rejects
    assert not paired_interval([4] * 4 + [1] * 2, att, [1] * 4 + [4] * 2, att, 0.4).sign_rejects
    pairs = paired_interval_arrays([[4] * 5 + [1]], [att], [[1] * 5 + [4]], [att], 0.4)
    assert bool(distinguishable_arrays(pairs, 0.15, 0.4)[0])


def _pairs(diff: float, low: float, high: float, sign_p: float) -> PairedArrays:
    return PairedArrays(
        diff=np.array([diff]), low=np.array([low]), high=np.array([high]), sign_p=np.array([sign_p])
    )


def test_the_call_needs_all_three_conditions_and_is_a_boolean_per_cell() -> None:
    called = distinguishable_arrays(_pairs(-0.3, -0.5, -0.1, 0.001), 0.15, 0.95)
    assert called.dtype == np.bool_ and called.tolist() == [True]
    at_alpha = distinguishable_arrays(_pairs(-0.3, -0.5, -0.1, 0.05), 0.15, 0.95)
    assert at_alpha.tolist() == [True]  # p = alpha rejects
    at_resolution = distinguishable_arrays(_pairs(-0.15, -0.2, -0.1, 0.001), 0.15, 0.95)
    assert at_resolution.tolist() == [True]  # |d| = resolution is large enough
    for pairs in (
        _pairs(-0.3, -0.5, 0.0, 0.001),  # the interval reaches 0: it does not exclude it
        _pairs(0.3, 0.0, 0.5, 0.001),
        _pairs(-0.1, -0.2, -0.05, 0.001),  # smaller than the resolution
        _pairs(-0.3, -0.5, -0.1, 0.06),  # the sign test does not reject
    ):
        got = distinguishable_arrays(pairs, 0.15, 0.95)
        assert got.dtype == np.bool_ and got.tolist() == [False], pairs


def test_arrays_that_are_not_aligned_are_refused_even_where_numpy_would_broadcast() -> None:
    one, two = [[1, 1, 1]], [[1, 1, 1], [2, 2, 2]]
    for arrays in (
        (one, two, two, two),
        (two, two, two, one),
        (one, one, one, two),
        (one, one, two, two),
        (two, one, one, one),
        (two, two, one, one),
    ):
        with pytest.raises(ValueError, match="aligned on the same tasks"):
            paired_interval_arrays(*arrays, 0.95)
    for succ_rows, att_rows in ((one, two), (two, one)):
        with pytest.raises(ValueError, match="the same shape"):
            rate_interval_arrays(succ_rows, att_rows, 0.95)
    for a, b in (([1, 1, 1], [1, 1]), ([1, 1], [1, 1, 1])):
        with pytest.raises(ValueError, match="aligned on the same seeds"):
            paired_interval(a, [2] * len(a), b, [2] * len(b), 0.95)
    for succ, att in ((3, 5), ([[3, 1]], [[5, 5]]), ([1], [3, 3]), ([1, 1], [3])):
        with pytest.raises(ValueError, match="1-D arrays"):
            rate_interval(succ, att, 0.95)
        with pytest.raises(ValueError, match="1-D arrays"):
            paired_interval(succ, att, succ, att, 0.95)


def test_interval_results_are_frozen() -> None:
    att = [4] * 6
    for result in (
        rate_interval([1, 2, 3, 4, 2, 1], att, 0.95),
        paired_interval([1, 2, 3, 4, 2, 1], att, [0, 2, 3, 1, 2, 1], att, 0.95),
    ):
        with pytest.raises(dataclasses.FrozenInstanceError):
            result.low = 0.0  # type: ignore[misc]
    for arrays in (
        rate_interval_arrays([[1, 2, 3]], [[4, 4, 4]], 0.95),
        paired_interval_arrays([[1, 2, 3]], [[4, 4, 4]], [[0, 2, 3]], [[4, 4, 4]], 0.95),
    ):
        with pytest.raises(dataclasses.FrozenInstanceError):
            arrays.low = np.zeros(1)  # type: ignore[misc]


def test_one_task_counts_its_own_successes_and_failures_against_fifteen() -> None:
    assert not rate_interval([20, 0], [40, 0], 0.95).few_events  # 20 up, 20 down
    assert rate_interval([0], [40], 0.95).few_events  # no success at all
    assert rate_interval([26], [40], 0.95).few_events  # 14 failures


@pytest.mark.parametrize("confidence", [0.1, 0.3, 0.5, 0.6])
def test_t_critical_matches_scipy_below_the_usual_confidences(confidence: float) -> None:
    for df in (1, 2, 5, 30):
        expected = scipy_stats.t.ppf(0.5 + confidence / 2.0, df)
        assert t_critical(confidence, df) == pytest.approx(expected, abs=1e-9)


def test_a_sign_test_p_of_exactly_alpha_rejects() -> None:
    att = [4] * 5
    got = paired_interval([4] * 5, att, [1] * 5, att, 1 - 2 / 32)  # five up: p = 2/32 = alpha
    assert got.sign_p == 2 / 32 and got.sign_rejects


def test_the_exact_bound_at_a_confidence_below_one_half() -> None:
    assert exact_all_agree_bound(0.4, 10) == pytest.approx(0.3 ** (1 / 10))
    assert exact_all_agree_bound(0.2, 5) == pytest.approx(0.4 ** (1 / 5))


def test_the_floor_of_a_pair_with_no_task_that_differs_holds_with_few_tasks_too() -> None:
    for succ, att in (([2, 3, 4], [40, 40, 40]), ([5, 15], [20, 20])):
        got = paired_interval(succ, att, succ, att, 0.95)
        floor = 1 - 0.025 ** (1 / len(succ))  # under 0.5 to the 1/T: 0.292 and 0.158
        assert (got.low, got.high) == pytest.approx((-floor, floor))
