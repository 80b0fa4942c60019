"""The card's closed-form intervals and its distinguishable call, checked against references."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from poisson_tasks.calibration.intervals import (
    agresti_coull,
    distinguishable_arrays,
    paired_interval,
    paired_interval_arrays,
    rate_interval,
    sign_test_p,
    t_critical,
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
