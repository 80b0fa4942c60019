"""Tests for the calibration-card statistics, each against an independent computation."""

from __future__ import annotations

import math
from fractions import Fraction
from itertools import combinations, pairwise

import numpy as np
import pytest
from scipy import stats as sps

from poisson_tasks.calibration.stats import (
    Interval,
    call_pair,
    cell_from_scores,
    cell_rate,
    cluster_bootstrap,
    clustered_se,
    is_saturated,
    median_or_none,
    non_increasing,
    paired_bootstrap,
    pass_at_k,
    pass_hat_k,
    percentile_or_none,
    task_pass_at_k,
)
from poisson_tasks.power import (
    mdd_binomial_worst_case,
    mdd_worst_case,
    minimum_detectable_difference,
    tasks_needed,
)

# Normal quantiles from tables (not scipy): z_{0.975} and z_{0.80}.
Z975 = 1.959963984540054
Z80 = 0.8416212335729143


def _enumerate(n: int, c: int, k: int) -> tuple[float, float]:
    """(share of k-subsets with >= 1 success, share with all successes), by brute force."""
    scores = [1] * c + [0] * (n - c)
    subsets = list(combinations(range(n), k))
    any_hit = sum(1 for sub in subsets if any(scores[i] for i in sub))
    all_hit = sum(1 for sub in subsets if all(scores[i] for i in sub))
    return any_hit / len(subsets), all_hit / len(subsets)


def _heterogeneous_cell(
    rng: np.random.Generator, n_tasks: int = 60
) -> tuple[np.ndarray, np.ndarray]:
    """A cell whose task rates spread over [0, 1] and whose attempt counts vary (1..8)."""
    att = rng.integers(1, 9, size=n_tasks)
    p = rng.beta(0.7, 0.7, size=n_tasks)
    succ = rng.binomial(att, p)
    return succ.astype(np.int64), att.astype(np.int64)


# --------------------------------------------------------------------------- pass@k, pass^k


def test_pass_at_k_matches_enumeration() -> None:
    for n in range(1, 9):
        for c in range(n + 1):
            for k in range(1, n + 1):
                expected, _ = _enumerate(n, c, k)
                assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12), (n, c, k)


def test_pass_at_k_matches_comb_for_large_n() -> None:
    n = 200
    for c in (0, 1, 2, 7, 50, 100, 150, 190, 199, 200):
        for k in (1, 2, 5, 10, 50, 100, 200):
            exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
            assert pass_at_k(n, c, k) == pytest.approx(float(exact), abs=1e-12), (c, k)


def test_pass_at_k_edges() -> None:
    assert pass_at_k(5, 0, 3) == 0.0
    assert pass_at_k(5, 5, 1) == 1.0
    assert pass_at_k(5, 3, 3) == 1.0  # n - c = 2 < k: every 3-subset holds a success
    assert pass_at_k(1, 1, 1) == 1.0
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25, abs=1e-15)
    for bad in ((5, 2, 6), (5, 2, 0), (5, 6, 1), (5, -1, 1)):
        with pytest.raises(ValueError):
            pass_at_k(*bad)


def test_pass_hat_k_matches_enumeration() -> None:
    for n in range(1, 9):
        for c in range(n + 1):
            for k in range(1, n + 1):
                _, expected = _enumerate(n, c, k)
                got = pass_hat_k(np.array([c]), np.array([n]), k)
                assert got == pytest.approx(expected, abs=1e-12), (n, c, k)


def test_task_means_exclude_tasks_with_too_few_attempts() -> None:
    succ = np.array([1, 2, 0, 3])
    att = np.array([1, 4, 0, 3])  # tasks 0 and 2 have fewer than k=2 attempts
    assert task_pass_at_k(succ, att, 2) == pytest.approx(
        (pass_at_k(4, 2, 2) + pass_at_k(3, 3, 2)) / 2, abs=1e-15
    )
    assert pass_hat_k(succ, att, 2) == pytest.approx((1 / 6 + 1.0) / 2, abs=1e-15)
    with pytest.raises(ValueError):
        task_pass_at_k(succ, att, 5)
    with pytest.raises(ValueError):
        pass_hat_k(succ, att, 0)


# --------------------------------------------------------------------------- cells and rates


def test_cell_from_scores_handles_ragged_and_empty_tasks() -> None:
    succ, att = cell_from_scores([[1, 0, 1], [], [0], [1, 1]])
    assert succ.tolist() == [2, 0, 0, 2]
    assert att.tolist() == [3, 0, 1, 2]
    with pytest.raises(ValueError):
        cell_from_scores([[1, 2]])


def test_cell_rate_is_task_mean_not_pooled() -> None:
    succ, att = np.array([1, 9, 0]), np.array([1, 10, 0])  # the third task has no attempts
    assert cell_rate(succ, att) == pytest.approx(0.95, abs=1e-15)
    assert cell_rate(succ, att) != pytest.approx(10 / 11)
    with pytest.raises(ValueError):
        cell_rate(np.array([0]), np.array([0]))
    with pytest.raises(ValueError):
        cell_rate(np.array([3]), np.array([2]))
    with pytest.raises(ValueError):
        cell_rate(np.array([0.5]), np.array([1.0]))


# --------------------------------------------------------------------------- cluster bootstrap


def test_cluster_bootstrap_recomputes_exactly() -> None:
    succ, att = _heterogeneous_cell(np.random.default_rng(1))
    first = cluster_bootstrap(succ, att, resamples=2000, seed=42)
    second = cluster_bootstrap(succ.copy(), att.copy(), resamples=2000, seed=42)
    assert first == second
    assert cluster_bootstrap(succ, att, resamples=2000, seed=43) != first


def test_cluster_bootstrap_follows_documented_recipe() -> None:
    succ, att = _heterogeneous_cell(np.random.default_rng(2))
    att[5] = 0  # an unscored task is dropped before resampling
    succ[5] = 0
    rates = succ[att > 0] / att[att > 0]
    raw = np.random.PCG64(9).random_raw(500 * rates.size)  # the documented, version-stable draw
    idx = (((raw >> np.uint64(32)) * np.uint64(rates.size)) >> np.uint64(32)).reshape(500, -1)
    low, high = np.quantile(rates[idx].mean(axis=1), [0.05, 0.95], method="linear")
    got = cluster_bootstrap(succ, att, resamples=500, seed=9, confidence=0.90)
    assert (got.low, got.high) == (float(low), float(high))
    assert got.point == pytest.approx(rates.mean(), abs=1e-15)


PINNED_FIRST_INDICES = [9, 11, 28, 25, 30, 19, 10, 55]


def test_resample_indices_are_pinned_and_uniform() -> None:
    from poisson_tasks.calibration.stats import resample_indices

    idx = resample_indices(20260925, 2000, 60)
    assert idx.shape == (2000, 60) and int(idx.min()) == 0 and int(idx.max()) == 59
    # the first draws are pinned: a numpy release that changed them would move every card's bytes
    assert idx[0, :8].tolist() == PINNED_FIRST_INDICES
    counts = np.bincount(idx.ravel().astype(np.int64), minlength=60)
    expected = idx.size / 60
    assert float(((counts - expected) ** 2 / expected).sum()) < 120  # chi-square, 59 dof


def test_cluster_bootstrap_agrees_with_scipy() -> None:
    rng = np.random.default_rng(3)
    att = np.sort(rng.integers(1, 9, size=60))
    p = np.sort(rng.beta(0.7, 0.7, size=60))  # more attempts on easier tasks: pooled != task mean
    succ = rng.binomial(att, p)
    rates = succ / att
    ours = cluster_bootstrap(succ, att, resamples=2000, seed=5)
    ref = sps.bootstrap(
        (rates,),
        np.mean,
        n_resamples=2000,
        method="percentile",
        confidence_level=0.95,
        rng=np.random.default_rng(11),
    ).confidence_interval
    # Monte Carlo error of a 2.5% quantile from B resamples is sqrt(p(1-p)/B) / f(q), with the
    # bootstrap distribution of the mean ~ Normal(sd = sd(rates)/sqrt(60)), so f(q) =
    # phi(1.96)/sd. Two independent runs differ with sd sqrt(2) times that; allow 4 of them.
    # For 60 tasks sd <= 0.5/sqrt(60), so tol <= ~0.022; here it is ~0.017.
    sd_boot = rates.std() / math.sqrt(rates.size)
    se_q = math.sqrt(0.025 * 0.975 / 2000) * sd_boot / sps.norm.pdf(Z975)
    tol = 4 * math.sqrt(2) * se_q
    assert tol < 0.025
    pooled = succ.sum() / att.sum()
    assert abs(pooled - rates.mean()) > 2 * tol  # a pooled statistic would fail this test
    assert ours.low == pytest.approx(ref.low, abs=tol)
    assert ours.high == pytest.approx(ref.high, abs=tol)
    assert ours.point == pytest.approx(rates.mean(), abs=1e-15)


def test_cluster_bootstrap_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError):
        cluster_bootstrap(np.array([1]), np.array([2]), seed=0, confidence=1.0)
    with pytest.raises(ValueError):
        cluster_bootstrap(np.array([1]), np.array([2]), seed=0, resamples=0)
    with pytest.raises(ValueError):
        cluster_bootstrap(np.array([1, 2]), np.array([2]), seed=0)


# --------------------------------------------------------------------------- paired bootstrap


def test_paired_identical_cells() -> None:
    succ, att = _heterogeneous_cell(np.random.default_rng(4))
    res = paired_bootstrap(succ, att, succ, att, resamples=1000, seed=1, confidence=0.95)
    assert res.diff == 0.0
    assert (res.interval.low, res.interval.high) == (0.0, 0.0)
    assert res.churn == 0.0
    assert (res.pairs_used, res.pairs_dropped) == (60, 0)


def test_paired_known_shift_and_churn() -> None:
    att = np.full(40, 5)
    a = np.array([3] * 30 + [0] * 10)
    b = np.where(a > 0, a - 1, a)  # one success fewer on the 30 tasks that had any
    res = paired_bootstrap(a, att, b, att, resamples=1000, seed=2, confidence=0.95)
    assert res.diff == pytest.approx(0.2 * 30 / 40, abs=1e-12)
    assert res.churn == pytest.approx(0.75, abs=1e-15)
    assert res.interval.low < res.diff < res.interval.high
    assert res.interval.point == res.diff


def test_paired_resampling_is_joint() -> None:
    rng = np.random.default_rng(5)
    att = np.full(60, 5)
    succ = rng.binomial(att, rng.beta(0.7, 0.7, size=60))  # task rates spread over [0, 1]
    b_succ = np.where(succ > 0, succ - 1, succ)
    res = paired_bootstrap(succ, att, b_succ, att, resamples=2000, seed=3, confidence=0.95)
    # Unpaired reference: the two arms resampled with independent index matrices.
    ra, rb = succ / att, b_succ / att
    ia = rng.integers(0, 60, size=(2000, 60))
    ib = rng.integers(0, 60, size=(2000, 60))
    unpaired = ra[ia].mean(axis=1) - rb[ib].mean(axis=1)
    lo, hi = np.quantile(unpaired, [0.025, 0.975])
    paired_width = res.interval.high - res.interval.low
    assert paired_width < 0.5 * (hi - lo)
    assert res.interval.low > 0.0


def test_paired_drops_unscored_seeds_and_compares_rates_exactly() -> None:
    a_s, a_n = np.array([0, 1, 2, 3, 1]), np.array([0, 2, 5, 4, 3])
    b_s, b_n = np.array([1, 2, 4, 3, 0]), np.array([2, 4, 10, 4, 0])
    res = paired_bootstrap(a_s, a_n, b_s, b_n, resamples=200, seed=0, confidence=0.9)
    assert (res.pairs_used, res.pairs_dropped) == (3, 2)
    assert res.churn == 0.0  # 1/2 = 2/4, 2/5 = 4/10, 3/4 = 3/4
    assert res.diff == pytest.approx(0.0, abs=1e-15)
    with pytest.raises(ValueError):
        paired_bootstrap(a_s, a_n, b_s[:4], b_n[:4], seed=0)


# --------------------------------------------------------------------------- calls and flags


def test_call_pair_boundaries() -> None:
    clear = Interval(low=0.05, high=0.25, point=0.15)
    assert call_pair(0.15, clear) == "distinguishable"
    assert call_pair(0.45 - 0.3, clear) == "distinguishable"  # 0.15000000000000002
    assert call_pair(0.7 - 0.55, clear) == "distinguishable"  # 0.1499999999999999
    assert call_pair(0.149, clear) == "too_small"
    assert call_pair(0.3, Interval(low=0.0, high=0.6, point=0.3)) == "too_small"
    assert call_pair(0.3, Interval(low=-0.01, high=0.6, point=0.3)) == "too_small"
    assert call_pair(-0.2, Interval(low=-0.3, high=-0.1, point=-0.2)) == "distinguishable"
    assert call_pair(-0.2, Interval(low=-0.4, high=0.0, point=-0.2)) == "too_small"
    assert call_pair(0.1, clear, resolution=0.1) == "distinguishable"


def test_is_saturated_and_non_increasing() -> None:
    assert is_saturated(0.05) and is_saturated(0.95) and is_saturated(0.0)
    assert not is_saturated(0.0500001) and not is_saturated(0.9499999)
    assert is_saturated(0.2, low=0.2) and not is_saturated(0.9, high=0.91)
    assert non_increasing([0.9, 0.9, 0.5, 0.1])
    assert non_increasing([]) and non_increasing([0.3])
    assert not non_increasing([0.9, 0.5, 0.6])


# --------------------------------------------------------------------------- clustered SE


def test_clustered_se_matches_direct_loop() -> None:
    succ, att = _heterogeneous_cell(np.random.default_rng(6), n_tasks=25)
    scores = [[1] * int(s) + [0] * int(n - s) for s, n in zip(succ, att, strict=True)]
    flat = [x for task in scores for x in task]
    mean = sum(flat) / len(flat)
    total = 0.0
    for task in scores:
        cluster_sum = 0.0
        for x in task:
            cluster_sum += x - mean
        total += cluster_sum**2
    clusters = len(scores)
    expected = math.sqrt(clusters / (clusters - 1) * total) / len(flat)
    assert clustered_se(succ, att) == pytest.approx(expected, rel=1e-12)
    # An unscored task is not a cluster.
    assert clustered_se(np.append(succ, 0), np.append(att, 0)) == pytest.approx(expected, rel=1e-12)
    with pytest.raises(ValueError):
        clustered_se(np.array([1, 0]), np.array([2, 0]))


def test_clustered_se_reduces_to_iid_with_singleton_clusters() -> None:
    s = np.random.default_rng(7).integers(0, 2, size=50)
    iid = math.sqrt(s.mean() * (1 - s.mean()) / s.size)
    assert clustered_se(s, np.ones(50, dtype=np.int64)) == pytest.approx(
        iid * math.sqrt(50 / 49), rel=1e-12
    )


# --------------------------------------------------------------------------- power planning


def test_mdd_hand_computation_for_60_tasks() -> None:
    worst = (Z975 + Z80) * math.sqrt(1.0 / 60)
    binom = (Z975 + Z80) * math.sqrt(0.5 / 60)
    assert mdd_worst_case(60) == pytest.approx(worst, rel=1e-9)
    assert mdd_worst_case(60) == pytest.approx(0.3617, abs=1e-4)
    assert mdd_binomial_worst_case(60) == pytest.approx(binom, rel=1e-9)
    assert mdd_binomial_worst_case(60) == pytest.approx(0.2557, abs=1e-4)
    for attempts in (1, 5, 20):
        assert minimum_detectable_difference(60, attempts) == pytest.approx(worst, rel=1e-9)
    assert minimum_detectable_difference(60, 5, power=0.9) > worst
    assert minimum_detectable_difference(60, 5, alpha=0.01) > worst
    with pytest.raises(ValueError):
        minimum_detectable_difference(60, 0)


def test_mdd_decreases_with_tasks_and_round_trips() -> None:
    values = [minimum_detectable_difference(n, 5) for n in range(1, 400)]
    assert all(b < a for a, b in pairwise(values))
    for n in range(1, 300):
        assert tasks_needed(mdd_worst_case(n), 1.0) == n
        assert tasks_needed(mdd_binomial_worst_case(n), 0.5) == n
    assert tasks_needed(0.1, 0.5) == math.ceil((Z975 + Z80) ** 2 * 0.5 / 0.01)  # 393


# --------------------------------------------------------------------------- summaries


def test_median_and_percentile_or_none() -> None:
    assert median_or_none([]) is None
    assert median_or_none(np.array([])) is None
    assert median_or_none([0.0]) == 0.0
    assert median_or_none([1.0, 3.0, 2.0]) == 2.0
    assert percentile_or_none([], 90) is None
    assert percentile_or_none([0.0, 10.0], 25) == pytest.approx(2.5)
    with pytest.raises(ValueError):
        percentile_or_none([1.0], 101)


# --------------------------------------------------------------------------- coverage


@pytest.mark.slow
def test_cluster_bootstrap_coverage() -> None:
    # 60 tasks x 5 attempts, task rates ~ Beta(mean 0.3, a + b = 3, intra-task correlation
    # 1/(a+b+1) = 0.25); the interval targets the expected task-mean, the Beta mean. A 4000-run
    # pilot measured coverage ~0.943 (percentile intervals run slightly short at 60 tasks).
    # With 2000 runs the binomial SE is sqrt(0.943 * 0.057 / 2000) ~= 0.0052, so 0.92 and 0.98
    # sit > 4 SE away from the expected value; the run takes a few seconds.
    mean, conc, runs = 0.3, 3.0, 2000
    rng = np.random.default_rng(2024)
    att = np.full(60, 5)
    hits = 0
    for run in range(runs):
        p = rng.beta(mean * conc, (1 - mean) * conc, size=60)
        succ = rng.binomial(att, p)
        iv = cluster_bootstrap(succ, att, resamples=1000, seed=run)
        hits += iv.low <= mean <= iv.high
    assert 0.92 <= hits / runs <= 0.98
