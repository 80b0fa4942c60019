"""The card's confidence intervals: a level's rate and the paired difference of two levels.

No resampling: every bound is a closed-form function of the per-task counts, so a card recomputes
to the same bytes on any machine and no printed bound depends on a seed. docs/calibration.md
gives the reasons and the sources; benchmarks/coverage_sim.py measures the coverage.

Rate of one level (tasks t = 1..T, task rate r_t = s_t / n_t, point estimate p = mean of r_t,
N attempts in all):
- design effect (Korn and Graubard 1998): deff = var(r_t)/T over the binomial p(1-p)/N, kept
  within [1, N/T] (never below independent attempts, never above all of a task's attempts
  agreeing). With equal attempts m it estimates 1 + (m-1) rho, rho the within-task correlation.
- the binomial part of the variance is known at each candidate p (as in Wilson's and Agresti and
  Coull's intervals); only the excess deff - 1 is read from the tasks, so only it is widened, by
  (t/z)^2 on Satterthwaite's degrees of freedom for a sample variance, 2T / (kurtosis - (T-3)/
  (T-1)), within [1, T-1]. When the spread sits in a few tasks (rates piled at 0 or 1) the
  kurtosis is large and the df few: 60 tasks whose failures fall in three of them do not show
  the clustering they have, and the small df widens the interval where that happens.
- Agresti-Coull interval on (p, n_eff = N / (1 + (deff - 1) (t/z)^2)) with z: Wilson's centre,
  never narrower than Wilson's (Agresti and Coull 1998; Brown, Cai and DasGupta 2001).
- saturated (every task all pass or every task all fail): the exact one-sided Clopper-Pearson
  bound with the task as the unit, [(alpha/2)^(1/T), 1] or [0, 1 - (alpha/2)^(1/T)]: 60 tasks
  that all pass bound the rate below at 0.940, never at 1.

Paired difference of two levels over shared tasks (d = pA - pB):
- MOVER (Newcombe 1998, method 10; Zou and Donner 2008) on the two levels' intervals, with the
  correlation of the two estimates, which for task means is the correlation of the paired task
  rates across tasks. That correlation is read from the tasks, so here each level's whole design
  effect is widened by (t/z)^2 on the df of the paired task differences (as a paired t would).
- when no task's rate differs between the levels, the half-width is at least the exact upper
  bound on the share of discordant tasks, 1 - (alpha/2)^(1/T): |d| cannot exceed that share.
- the call "distinguishable" also needs the exact sign test over the tasks whose rate differs
  to reject at the same level in d's direction (sign_test_p): its size is at most alpha in
  every design, which no approximate interval can promise with few tasks or few events.

Every function takes arrays whose last axis is the tasks, so the coverage benchmark runs this
very code on thousands of simulated cells at once; the card calls it on one cell.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

FEW_EVENTS = 15  # fewer successes or failures than this: the card marks the interval as wide

__all__ = [
    "FEW_EVENTS",
    "PairedArrays",
    "PairedInterval",
    "RateArrays",
    "RateInterval",
    "agresti_coull",
    "distinguishable_arrays",
    "exact_all_agree_bound",
    "few_events",
    "paired_interval",
    "paired_interval_arrays",
    "rate_interval",
    "rate_interval_arrays",
    "sign_test_p",
    "t_critical",
    "t_inflation",
    "variance_df",
    "z_critical",
]


# --------------------------------------------------------------------------- t critical value


def _t_two_sided_mass(value: float, df: int) -> float:
    """P(|T| < value) for Student's t on an integer df (Abramowitz and Stegun 26.7.3 and 26.7.4)."""
    theta = math.atan(value / math.sqrt(df))
    c2 = math.cos(theta) ** 2
    sine = math.sin(theta)
    if df % 2 == 1:
        total, term = 0.0, 1.0
        if df > 1:
            total = term
            for step in range(1, (df - 3) // 2 + 1):
                term *= c2 * (2 * step) / (2 * step + 1)
                total += term
        return 2.0 / math.pi * (theta + sine * math.cos(theta) * total)
    total, term = 1.0, 1.0
    for step in range(1, (df - 2) // 2 + 1):
        term *= c2 * (2 * step - 1) / (2 * step)
        total += term
    return sine * total


@lru_cache(maxsize=1024)
def t_critical(confidence: float, df: int) -> float:
    """The two-sided critical value t with P(|T_df| < t) = confidence, by bisection.

    Exact to about 1e-12 for any integer df >= 1; standard library only (no scipy on the card
    path). Over 1,000 degrees of freedom the normal value z is used: t exceeds it there by less
    than 0.005 (0.0049 at 0.99 and 1,001 degrees, 0.0024 at 0.95), a variance factor (t/z)^2
    under 1.004.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must be in (0, 1)")
    if df < 1:
        raise ValueError("the t critical value needs at least 1 degree of freedom (two tasks)")
    if df > 1000:
        return NormalDist().inv_cdf(0.5 + confidence / 2.0)
    lo, hi = 0.0, 1.0
    while _t_two_sided_mass(hi, df) < confidence:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if _t_two_sided_mass(mid, df) < confidence:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-13:
            break
    return 0.5 * (lo + hi)


# --------------------------------------------------------------------------- building blocks


def z_critical(confidence: float) -> float:
    """The two-sided normal critical value: 1.960 at 0.95."""
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def agresti_coull(
    proportion: npt.ArrayLike, trials: npt.ArrayLike, confidence: float
) -> tuple[FloatArray, FloatArray]:
    """Agresti-Coull bounds for a proportion on (possibly effective, non-integer) trials.

    Add z^2/2 successes and z^2/2 failures, then a Wald interval on n + z^2 trials: the centre is
    Wilson's, the width never less than Wilson's (Agresti and Coull 1998).
    """
    crit = z_critical(confidence)
    added = crit * crit
    prop = np.asarray(proportion, dtype=np.float64)
    size = np.asarray(trials, dtype=np.float64) + added
    centre = (prop * (size - added) + added / 2.0) / size
    half = crit * np.sqrt(centre * (1.0 - centre) / size)
    return np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)


def variance_df(rates: FloatArray) -> npt.NDArray[np.int64]:
    """Degrees of freedom of var(rates) along the last axis, from the rates' own kurtosis.

    Satterthwaite's df for a sample variance is 2 / Var(s^2 / sigma^2); with kurtosis k over T
    tasks that is 2T / (k - (T-3)/(T-1)) (T-1 for normal rates). Task rates piled at 0 or 1 with
    a few tasks away from the edge have a large kurtosis and few df: the spread is read from those
    few tasks. Rounded down and kept within [1, T-1]; rates with no spread get T-1.
    """
    tasks = rates.shape[-1]
    dev = rates - rates.mean(axis=-1, keepdims=True)
    second = (dev * dev).sum(axis=-1)
    fourth = (dev**4).sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        kurtosis = np.where(second > 0.0, tasks * fourth / (second * second), 3.0)
    # kurtosis >= 1 > (T-3)/(T-1), so the denominator is positive
    df = np.floor(2.0 * tasks / (kurtosis - (tasks - 3.0) / (tasks - 1.0)))
    bounded: npt.NDArray[np.int64] = np.clip(df, 1, tasks - 1).astype(np.int64)
    return bounded


def exact_all_agree_bound(confidence: float, tasks: int) -> float:
    """(alpha/2)^(1/T): the exact lower bound on a rate when all T tasks pass every attempt."""
    return float(((1.0 - confidence) / 2.0) ** (1.0 / tasks))


def few_events(successes: int, failures: int) -> bool:
    """True when a cell has fewer than FEW_EVENTS successes or failures: its interval is wide."""
    return min(successes, failures) < FEW_EVENTS


def _as_2d(values: npt.ArrayLike) -> FloatArray:
    arr = np.asarray(values, dtype=np.float64)
    return arr.reshape(1, -1) if arr.ndim == 1 else arr


# --------------------------------------------------------------------------- rate of one level


@dataclass(frozen=True)
class RateArrays:
    """Vectorised result of rate_interval_arrays: one entry per simulated or real cell."""

    point: FloatArray
    low: FloatArray
    high: FloatArray
    n_eff: FloatArray


def t_inflation(df: npt.NDArray[np.int64], confidence: float) -> FloatArray:
    """(t_df / z)^2 for each entry of df: how much a variance read from df degrees widens."""
    crit_t = np.zeros(int(df.max()) + 1)
    for value in np.unique(df):
        crit_t[value] = t_critical(confidence, int(value))
    ratio: FloatArray = (crit_t[df] / z_critical(confidence)) ** 2
    return ratio


def rate_interval_arrays(
    successes: npt.ArrayLike, attempts: npt.ArrayLike, confidence: float
) -> RateArrays:
    """Interval of the task-mean rate for each row of (cells, tasks) arrays.

    Every task must have at least one attempt (the scalar wrapper drops empty tasks first).
    """
    return _rate_arrays(successes, attempts, confidence, None)


def _rate_arrays(
    successes: npt.ArrayLike,
    attempts: npt.ArrayLike,
    confidence: float,
    whole_inflation: FloatArray | None,
) -> RateArrays:
    """The rate interval; with whole_inflation, that factor widens the whole design effect.

    Alone, a level's variance is the binomial p(1-p)/N (no df to pay: Agresti-Coull treats it as
    known at each candidate p, as Wilson does) plus the excess the task spread shows, which is read
    from the tasks and widened by (t/z)^2 on variance_df's degrees of freedom. Inside a paired
    comparison the whole design effect is widened by the paired differences' factor instead.
    """
    succ = _as_2d(successes)
    att = _as_2d(attempts)
    if succ.shape != att.shape:
        raise ValueError("successes and attempts must have the same shape")
    if np.any(att < 1):
        raise ValueError("every task needs at least one scored attempt")
    tasks = succ.shape[-1]
    if tasks < 2:
        raise ValueError("an interval needs at least two tasks with scored attempts")
    rates = succ / att
    point = rates.mean(axis=-1)
    total = att.sum(axis=-1)
    var_mean = rates.var(axis=-1, ddof=1) / tasks
    pq = point * (1.0 - point)
    with np.errstate(divide="ignore", invalid="ignore"):
        n_raw = np.where(var_mean > 0.0, pq / var_mean, total)
    design_effect = total / np.clip(n_raw, float(tasks), total)  # within [1, N / T]
    if whole_inflation is None:
        n_eff = total / (1.0 + (design_effect - 1.0) * t_inflation(variance_df(rates), confidence))
    else:
        n_eff = total / (design_effect * whole_inflation)
    low, high = agresti_coull(point, n_eff, confidence)
    bound = exact_all_agree_bound(confidence, tasks)
    all_pass = np.all(succ == att, axis=-1)
    all_fail = np.all(succ == 0, axis=-1)
    low = np.where(all_pass, bound, np.where(all_fail, 0.0, low))
    high = np.where(all_fail, 1.0 - bound, np.where(all_pass, 1.0, high))
    return RateArrays(point=point, low=low, high=high, n_eff=n_eff)


@dataclass(frozen=True)
class RateInterval:
    """A level's rate, its interval, the effective sample size and whether events are few."""

    point: float
    low: float
    high: float
    n_eff: float
    tasks: int
    few_events: bool


def _cell(successes: npt.ArrayLike, attempts: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    succ = np.asarray(successes, dtype=np.int64)
    att = np.asarray(attempts, dtype=np.int64)
    if succ.ndim != 1 or succ.shape != att.shape:
        raise ValueError("successes and attempts must be 1-D arrays of the same length")
    if np.any(att < 0) or np.any(succ < 0) or np.any(succ > att):
        raise ValueError("need 0 <= successes <= attempts for every task")
    return succ.astype(np.float64), att.astype(np.float64)


def rate_interval(
    successes: npt.ArrayLike, attempts: npt.ArrayLike, confidence: float
) -> RateInterval:
    """The card's interval for one level's rate; tasks with no scored attempt are left out."""
    succ, att = _cell(successes, attempts)
    keep = att > 0
    succ, att = succ[keep], att[keep]
    if succ.size == 0:
        raise ValueError("cell has no task with a scored attempt")
    if succ.size == 1:  # one task: no spread to read, so nothing narrower than [0, 1] is honest
        only = float(succ[0] / att[0])
        return RateInterval(only, 0.0, 1.0, 1.0, 1, few_events(int(succ[0]), int(att[0] - succ[0])))
    arrays = rate_interval_arrays(succ, att, confidence)
    passes = int(succ.sum())
    return RateInterval(
        point=float(arrays.point[0]),
        low=float(arrays.low[0]),
        high=float(arrays.high[0]),
        n_eff=float(arrays.n_eff[0]),
        tasks=int(succ.size),
        few_events=few_events(passes, int(att.sum()) - passes),
    )


# --------------------------------------------------------------------------- paired difference


@dataclass(frozen=True)
class PairedArrays:
    """Vectorised result of paired_interval_arrays (sign_p: see sign_test_p)."""

    diff: FloatArray
    low: FloatArray
    high: FloatArray
    sign_p: FloatArray


@lru_cache(maxsize=64)
def _binomial_half_tails(tasks: int) -> FloatArray:
    """tails[n, k] = P(Binomial(n, 1/2) >= k) for 0 <= k <= n <= tasks (0 beyond n), exactly."""
    tails = np.zeros((tasks + 1, tasks + 2))
    for size in range(tasks + 1):
        counts = [math.comb(size, k) for k in range(size + 1)]
        running = 0
        for count in range(size, -1, -1):
            running += counts[count]
            tails[size, count] = running / 2**size  # exact integers, one correctly rounded division
    tails.flags.writeable = False
    return tails


def sign_test_p(task_diffs: npt.ArrayLike) -> FloatArray:
    """Exact two-sided sign-test p-value over the tasks, in the direction of the mean difference.

    Under no difference between the levels, a task whose rate differs is as likely to differ one
    way as the other, whatever its difficulty, so the count that goes the mean's way among the n
    tasks that differ is Binomial(n, 1/2) at most. p = min(1, 2 P(X >= that count)); 1 when
    the mean difference is 0. Its size is at most alpha by construction (Dixon and Mood 1946).
    """
    diffs = _as_2d(task_diffs)
    tasks = diffs.shape[-1]
    ups = (diffs > 0.0).sum(axis=-1)
    downs = (diffs < 0.0).sum(axis=-1)
    mean = diffs.mean(axis=-1)
    agree = np.where(mean > 0.0, ups, np.where(mean < 0.0, downs, 0))
    p_value = 2.0 * _binomial_half_tails(tasks)[ups + downs, agree]
    return np.where(mean == 0.0, 1.0, np.minimum(p_value, 1.0))


def distinguishable_arrays(
    pairs: PairedArrays, resolution: float, confidence: float
) -> npt.NDArray[np.bool_]:
    """The card's call: the interval excludes 0, |difference| >= resolution, sign test agrees.

    The third condition makes the false-call rate at no true difference at most 1 - confidence
    in every design, whatever the interval's coverage there (a call needs the exact test too).
    """
    excludes = (pairs.low > 0.0) | (pairs.high < 0.0)
    large = np.abs(pairs.diff) >= resolution - 1e-12
    return excludes & large & (pairs.sign_p <= (1.0 - confidence) + 1e-12)


def paired_interval_arrays(
    a_succ: npt.ArrayLike,
    a_att: npt.ArrayLike,
    b_succ: npt.ArrayLike,
    b_att: npt.ArrayLike,
    confidence: float,
) -> PairedArrays:
    """MOVER interval of mean(rA) - mean(rB) for each row of aligned (cells, tasks) arrays."""
    sa, na, sb, nb = (_as_2d(values) for values in (a_succ, a_att, b_succ, b_att))
    if not sa.shape == na.shape == sb.shape == nb.shape:
        raise ValueError("the two levels must be aligned on the same tasks")
    ra, rb = sa / na, sb / nb
    inflation = t_inflation(variance_df(ra - rb), confidence)
    rate_a = _rate_arrays(sa, na, confidence, inflation)
    rate_b = _rate_arrays(sb, nb, confidence, inflation)
    tasks = sa.shape[-1]
    ca = ra - ra.mean(axis=-1, keepdims=True)
    cb = rb - rb.mean(axis=-1, keepdims=True)
    sxy = (ca * cb).sum(axis=-1)
    sxx = (ca * ca).sum(axis=-1)
    syy = (cb * cb).sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        corr = np.where((sxx > 0.0) & (syy > 0.0), sxy / np.sqrt(sxx * syy), 0.0)
    corr = np.clip(corr, -1.0, 1.0)
    diff = rate_a.point - rate_b.point
    la, ua = rate_a.point - rate_a.low, rate_a.high - rate_a.point
    lb, ub = rate_b.point - rate_b.low, rate_b.high - rate_b.point
    low_half = np.sqrt(np.maximum(la * la - 2.0 * corr * la * ub + ub * ub, 0.0))
    high_half = np.sqrt(np.maximum(ua * ua - 2.0 * corr * ua * lb + lb * lb, 0.0))
    floor = 1.0 - exact_all_agree_bound(confidence, tasks)
    no_discord = np.all(ra == rb, axis=-1)
    low_half = np.where(no_discord, np.maximum(low_half, floor), low_half)
    high_half = np.where(no_discord, np.maximum(high_half, floor), high_half)
    low = np.clip(diff - low_half, -1.0, 1.0)
    high = np.clip(diff + high_half, -1.0, 1.0)
    return PairedArrays(diff=diff, low=low, high=high, sign_p=sign_test_p(ra - rb))


@dataclass(frozen=True)
class PairedInterval:
    """A paired A-minus-B comparison over shared tasks: difference, interval, churn, tasks used.

    sign_p is the exact sign test's p-value (sign_test_p) and sign_rejects whether it is at most
    1 - confidence: a pair is called distinguishable only when it does.
    """

    diff: float
    low: float
    high: float
    churn: float
    pairs_used: int
    pairs_dropped: int
    sign_p: float
    sign_rejects: bool


def paired_interval(
    a_succ: npt.ArrayLike,
    a_att: npt.ArrayLike,
    b_succ: npt.ArrayLike,
    b_att: npt.ArrayLike,
    confidence: float,
) -> PairedInterval:
    """The card's paired interval; a task with no scored attempt at either level is left out.

    churn is the share of the tasks used whose pass rate differs between the two levels.
    """
    sa, na = _cell(a_succ, a_att)
    sb, nb = _cell(b_succ, b_att)
    if sa.shape != sb.shape:
        raise ValueError("the two cells must be aligned on the same seeds")
    keep = (na > 0) & (nb > 0)
    used = int(keep.sum())
    if used < 2:
        raise ValueError("fewer than two seeds have scored attempts at both levels")
    sa, na, sb, nb = sa[keep], na[keep], sb[keep], nb[keep]
    arrays = paired_interval_arrays(sa, na, sb, nb, confidence)
    churn = float(np.mean(sa * nb != sb * na))
    return PairedInterval(
        diff=float(arrays.diff[0]),
        low=float(arrays.low[0]),
        high=float(arrays.high[0]),
        churn=churn,
        pairs_used=used,
        pairs_dropped=int(keep.size - used),
        sign_p=float(arrays.sign_p[0]),
        sign_rejects=bool(arrays.sign_p[0] <= (1.0 - confidence) + 1e-12),
    )
