"""Pure statistics for calibration cards.

A *cell* is one arm's results, held as two aligned integer arrays: ``successes[t]`` and
``attempts[t]`` per task (tasks are seeds). Attempts that the instrument failed to score are
excluded upstream, so attempt counts differ between tasks; a task with zero scored attempts has
no rate and is dropped wherever rates are used. Every task weighs the same in a cell's rate.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Literal

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

__all__ = [
    "Interval",
    "call_pair",
    "cell_from_scores",
    "cell_rate",
    "clustered_se",
    "is_saturated",
    "median_or_none",
    "non_increasing",
    "pass_at_k",
    "pass_hat_k",
    "percentile_or_none",
    "task_pass_at_k",
]


@dataclass(frozen=True)
class Interval:
    """A confidence interval with the point estimate it surrounds.

    sign_rejects, for a paired difference: whether the exact task-level sign test rejects "no
    difference" in the point's direction at the interval's confidence (intervals.sign_test_p);
    None where no such test belongs to the interval.
    """

    low: float
    high: float
    point: float
    sign_rejects: bool | None = None


# --------------------------------------------------------------------------- cell handling


def cell_from_scores(scores: Sequence[Sequence[int]]) -> tuple[IntArray, IntArray]:
    """Turn ragged per-task 0/1 attempt scores into aligned (successes, attempts) arrays."""
    succ = np.zeros(len(scores), dtype=np.int64)
    att = np.zeros(len(scores), dtype=np.int64)
    for task_index, task in enumerate(scores):
        row = np.asarray(task, dtype=np.int64)
        if np.any((row != 0) & (row != 1)):
            raise ValueError(f"task {task_index}: attempt scores must be 0 or 1")
        succ[task_index] = int(row.sum())
        att[task_index] = row.size
    return succ, att


def _cell(successes: npt.ArrayLike, attempts: npt.ArrayLike) -> tuple[IntArray, IntArray]:
    """Validate a cell and return it as int64 arrays (all tasks, including empty ones)."""
    wins = np.asarray(successes)
    trials = np.asarray(attempts)
    if wins.ndim != 1 or trials.ndim != 1 or wins.shape != trials.shape:
        raise ValueError("successes and attempts must be 1-D arrays of the same length")
    if wins.size and not (
        np.issubdtype(wins.dtype, np.integer) and np.issubdtype(trials.dtype, np.integer)
    ):
        raise ValueError("successes and attempts must be integers")
    s64 = wins.astype(np.int64)
    n64 = trials.astype(np.int64)
    if np.any(n64 < 0) or np.any(s64 < 0) or np.any(s64 > n64):
        raise ValueError("need 0 <= successes <= attempts for every task")
    return s64, n64


def _task_rates(successes: npt.ArrayLike, attempts: npt.ArrayLike) -> FloatArray:
    """Per-task pass rates, dropping tasks with zero scored attempts; raise if none remain."""
    wins, trials = _cell(successes, attempts)
    keep = trials > 0
    if not np.any(keep):
        raise ValueError("cell has no task with a scored attempt")
    return wins[keep] / trials[keep]


# --------------------------------------------------------------------------- pass@k family


def pass_at_k(trials: int, wins: int, draws: int) -> float:
    """Unbiased pass@k, 1 - C(n-c,k)/C(n,k), in the stable product form 1 - prod(1 - k/i).

    n is trials (scored attempts), c is wins (successes among them), k is draws.
    """
    if draws < 1 or draws > trials:
        raise ValueError(f"need 1 <= k <= n, got k={draws}, n={trials}")
    if wins < 0 or wins > trials:
        raise ValueError(f"need 0 <= c <= n, got c={wins}, n={trials}")
    if trials - wins < draws:
        return 1.0
    factors = np.arange(trials - wins + 1, trials + 1, dtype=np.float64)
    return float(1.0 - np.prod(1.0 - draws / factors))


def _pass_hat_k_one(trials: int, wins: int, draws: int) -> float:
    """pass^k for one task, C(c,k)/C(n,k), as the product prod_{j<k} (c-j)/(n-j)."""
    if wins < draws:
        return 0.0
    steps = np.arange(draws, dtype=np.float64)
    return float(np.prod((wins - steps) / (trials - steps)))


def _mean_over_tasks(
    successes: npt.ArrayLike,
    attempts: npt.ArrayLike,
    draws: int,
    per_task: Callable[[int, int, int], float],
) -> float:
    """Mean of per_task(n, c, k) over tasks with at least k scored attempts."""
    if draws < 1:
        raise ValueError(f"need k >= 1, got k={draws}")
    wins, trials = _cell(successes, attempts)
    keep = trials >= draws
    if not np.any(keep):
        raise ValueError(f"no task has at least k={draws} scored attempts")
    pairs = zip(trials[keep].tolist(), wins[keep].tolist(), strict=True)
    return float(np.mean([per_task(n_t, c_t, draws) for n_t, c_t in pairs]))


def task_pass_at_k(successes: npt.ArrayLike, attempts: npt.ArrayLike, draws: int) -> float:
    """Mean over tasks of pass@k; tasks with fewer than k scored attempts are excluded."""
    return _mean_over_tasks(successes, attempts, draws, pass_at_k)


def pass_hat_k(successes: npt.ArrayLike, attempts: npt.ArrayLike, draws: int) -> float:
    """Mean over tasks of pass^k (Yao et al.), C(c,k)/C(n,k): all k draws succeed.

    Tasks with fewer than k scored attempts are excluded.
    """
    return _mean_over_tasks(successes, attempts, draws, _pass_hat_k_one)


# --------------------------------------------------------------------------- rates and intervals


def cell_rate(successes: npt.ArrayLike, attempts: npt.ArrayLike) -> float:
    """pass@1 as the mean over tasks of each task's pass rate (every task weighs the same)."""
    return float(np.mean(_task_rates(successes, attempts)))


def call_pair(
    diff: float, interval: Interval, resolution: float = 0.15
) -> Literal["distinguishable", "too_small"]:
    """Call two levels distinguishable only if the interval excludes zero, |diff| >= resolution
    and, for a paired interval, the exact sign test agrees (interval.sign_rejects is not False).

    A tolerance of 1e-12 lets a difference of exactly the resolution count; touching zero does not.
    The same rule, vectorised, is intervals.distinguishable_arrays (the coverage benchmark's).
    """
    excludes_zero = interval.low > 0.0 or interval.high < 0.0
    sign_ok = interval.sign_rejects is not False
    if excludes_zero and abs(diff) >= resolution - 1e-12 and sign_ok:
        return "distinguishable"
    return "too_small"


def is_saturated(rate: float, low: float = 0.05, high: float = 0.95) -> bool:
    """True when a rate is at a floor or ceiling (rate <= low or rate >= high)."""
    return rate <= low or rate >= high


def non_increasing(rates: Sequence[float]) -> bool:
    """True when each rate is no larger than the one before it (difficulty ladders)."""
    return all(b <= a for a, b in pairwise(rates))


def clustered_se(successes: npt.ArrayLike, attempts: npt.ArrayLike) -> float:
    """Miller (2024) clustered SE of the pooled attempt mean, for power planning.

    SE = sqrt(C/(C-1) * sum_c (sum_{i in c} (s_i - mean))^2) / n over the C tasks with scored
    attempts, n attempts in all. The card's point estimate is the task-mean, not this mean.
    """
    wins, trials = _cell(successes, attempts)
    keep = trials > 0
    wins, trials = wins[keep], trials[keep]
    clusters = wins.size
    if clusters < 2:
        raise ValueError("clustered SE needs at least two tasks with scored attempts")
    total = int(trials.sum())
    mean = wins.sum() / total
    resid = wins - trials * mean  # sum over a task's attempts of (s_i - mean)
    return float(math.sqrt(clusters / (clusters - 1) * float(np.sum(resid**2))) / total)


# --------------------------------------------------------------------------- summaries


def median_or_none(values: npt.ArrayLike) -> float | None:
    """Median, or None for empty input: a figure not measured is never printed as zero."""
    arr = np.asarray(values, dtype=np.float64)
    return None if arr.size == 0 else float(np.median(arr))


def percentile_or_none(values: npt.ArrayLike, percent: float) -> float | None:
    """Percentile `percent` (0-100, linear), or None for empty input, never a made-up zero."""
    if not 0.0 <= percent <= 100.0:
        raise ValueError("percent must be in [0, 100]")
    arr = np.asarray(values, dtype=np.float64)
    return None if arr.size == 0 else float(np.percentile(arr, percent, method="linear"))
