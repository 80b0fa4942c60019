"""Power planning for a paired design: the minimum detectable difference and the tasks needed.

Pure standard-library arithmetic (statistics.NormalDist), so the pre-registration can state a
design's resolution without importing numpy or the calibration package.
"""

from __future__ import annotations

import math
from statistics import NormalDist

__all__ = [
    "called_difference",
    "mdd_binomial_worst_case",
    "mdd_worst_case",
    "minimum_detectable_difference",
    "tasks_needed",
]


def _z_sum(alpha: float, power: float) -> float:
    """z_{1-alpha/2} + z_{power}: the two-sided test's critical value plus the power quantile."""
    if not 0.0 < alpha < 1.0 or not 0.0 < power < 1.0:
        raise ValueError("alpha and power must be in (0, 1)")
    normal = (
        NormalDist()
    )  # the standard library's inverse normal CDF: no scipy import on the CLI path
    return normal.inv_cdf(1.0 - alpha / 2.0) + normal.inv_cdf(power)


def _mdd(n_tasks: int, var_d: float, alpha: float, power: float) -> float:
    """delta = (z_{1-alpha/2} + z_{power}) * sqrt(var_d / n_tasks)."""
    if n_tasks < 1:
        raise ValueError("n_tasks must be >= 1")
    return _z_sum(alpha, power) * math.sqrt(var_d / n_tasks)


def mdd_worst_case(n_tasks: int, *, alpha: float = 0.05, power: float = 0.80) -> float:
    """Minimum detectable paired difference with Var(d_i) = 1, valid for any data.

    d_i = rA_i - rB_i lies in [-1, 1], and no variable in [-1, 1] has variance above 1.
    """
    return _mdd(n_tasks, 1.0, alpha, power)


def mdd_binomial_worst_case(n_tasks: int, *, alpha: float = 0.05, power: float = 0.80) -> float:
    """Minimum detectable paired difference with Var(d_i) = 0.5, for independent arms.

    A task rate (between-task spread plus within-task binomial noise) lies in [0, 1], so its
    variance is at most 0.25 whatever the attempt count; that maximum is reached when attempts
    are perfectly correlated within a task. Independent arms add: Var(d_i) <= 0.25 + 0.25.
    """
    return _mdd(n_tasks, 0.5, alpha, power)


def minimum_detectable_difference(
    n_tasks: int, attempts: int, *, alpha: float = 0.05, power: float = 0.80
) -> float:
    """Smallest paired difference the design detects at two-sided alpha and power, worst case.

    Uses Var(d_i) = 1 (see mdd_worst_case): the only bound that holds for arms of any
    dependence. attempts cannot tighten a worst case (perfectly correlated attempts reach it).
    """
    if attempts < 1:
        raise ValueError("attempts must be >= 1")
    return mdd_worst_case(n_tasks, alpha=alpha, power=power)


def called_difference(
    n_tasks: int,
    resolution: float,
    *,
    var_d: float = 1.0,
    alpha: float = 0.05,
    power: float = 0.80,
) -> float:
    """Smallest true paired difference the card's call rule makes at `power`.

    A call needs two things: the interval clear of zero, which a difference of the MDD
    ((z_{1-alpha/2} + z_power) * sqrt(var_d / n)) gets at `power`; and the measured difference at
    or above the resolution, which a true difference of resolution + z_power * sqrt(var_d / n)
    gets at `power`. The larger of the two is the answer. So a true difference of exactly the
    resolution is called about half the time at any size (benchmarks/RESULTS.md's coverage table:
    0.48 to 0.55 at 60 tasks with 2 or 5 attempts and at 200 tasks): no size guarantees it.
    """
    if resolution < 0.0:
        raise ValueError("resolution must be >= 0")
    spread = math.sqrt(var_d / n_tasks) if n_tasks >= 1 else math.inf
    reach = resolution + NormalDist().inv_cdf(power) * spread
    return max(_mdd(n_tasks, var_d, alpha, power), reach)


def tasks_needed(delta: float, var_d: float, alpha: float = 0.05, power: float = 0.80) -> int:
    """Tasks needed to detect a paired difference delta: ceil((z+z)^2 * var_d / delta^2).

    A relative slack of 1e-9 keeps float noise from rounding an exact integer up.
    """
    if delta <= 0.0 or var_d <= 0.0:
        raise ValueError("delta and var_d must be positive")
    exact = _z_sum(alpha, power) ** 2 * var_d / delta**2
    return math.ceil(exact * (1.0 - 1e-9))
