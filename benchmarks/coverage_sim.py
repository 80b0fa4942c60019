"""Coverage of the card's own intervals on clustered data of known truth, over the full grid.

Runs the very functions the card uses (poisson_tasks.calibration.intervals), vectorised over
simulated cells. Per setting it reports the coverage and mean width of the rate interval and of
the paired-difference interval, and how often the card's rule calls the two levels distinguishable
(interval excludes 0, |difference| >= resolution, and the exact task-level sign test rejects no
difference at the same level): where the true difference is 0 that is a false call; elsewhere it
is the rule's power at this design.

Data: each task's rate is drawn from a Beta with the level's true mean and intra-task correlation
rho = 1/(a+b+1) (rho = 0: every task has the true rate); attempts are Bernoulli at the task's rate.
For a pair of levels the two task rates come from one Gaussian copula with correlation 0.8 (the
same task is hard at both levels), lower level mean p, upper level mean p - delta.

Run from the repository root (the full grid at 2,000 runs takes about 15 minutes of one core;
--small is the slow test's grid):

    PYTHONPATH=src python benchmarks/coverage_sim.py [--runs 2000] [--small]
"""

from __future__ import annotations

import argparse
import math
import os
import shlex
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from common import markdown_head, markdown_line  # the one table format
from scipy.special import betaincinv, ndtr  # type: ignore[import-untyped]

from poisson_tasks.calibration.intervals import (
    FEW_EVENTS,
    distinguishable_arrays,
    paired_interval_arrays,
    rate_interval_arrays,
)

TASKS = (10, 20, 60, 200)
ATTEMPTS = (1, 2, 5)
RATES = (0.02, 0.05, 0.1, 0.3, 0.5, 0.8, 0.95, 0.98)
RHOS = (0.0, 0.1, 0.5)
DELTAS = (0.0, 0.15, 0.3)
SMALL = {"tasks": (10, 60), "attempts": (2, 5), "rates": (0.05, 0.5, 0.98), "rhos": (0.0, 0.5)}
COPULA = 0.8  # correlation of a task's latent difficulty between the two levels of a pair
CONFIDENCE = 0.95
RESOLUTION = 0.15
COVER_LOW, COVER_HIGH = 0.93, 0.98


@dataclass(frozen=True)
class Row:
    """One setting's result; delta is None for the rate interval."""

    tasks: int
    attempts: int
    rho: float
    rate: float
    delta: float | None
    coverage: float
    width: float
    false_distinguishable: float | None
    called: float | None  # share of runs called distinguishable (pairs only)
    called_interval_only: float | None  # the same without the sign test (the earlier rule)
    events: float  # expected successes or failures, whichever is fewer (the lower of two levels)

    @property
    def enough_events(self) -> bool:
        return self.events >= FEW_EVENTS

    @property
    def meets(self) -> bool:
        return COVER_LOW <= self.coverage <= COVER_HIGH


def _task_rates(mean: float, rho: float, u: np.ndarray) -> np.ndarray:
    """Task rates with the given mean and intra-task correlation, at copula uniforms u."""
    if rho == 0.0:
        return np.full(u.shape, mean)
    conc = 1.0 / rho - 1.0
    out: np.ndarray = betaincinv(mean * conc, (1.0 - mean) * conc, u)
    return out


def _events(tasks: int, attempts: int, rate: float) -> float:
    return tasks * attempts * min(rate, 1.0 - rate)


def rate_setting(
    tasks: int, attempts: int, rho: float, rate: float, runs: int, rng: np.random.Generator
) -> Row:
    """Coverage and width of the rate interval for one setting."""
    p = _task_rates(rate, rho, rng.random((runs, tasks)))
    att = np.full((runs, tasks), attempts, dtype=np.int64)
    succ = rng.binomial(att, p)
    r = rate_interval_arrays(succ, att, CONFIDENCE)
    cover = (r.low <= rate) & (rate <= r.high)
    return Row(
        tasks,
        attempts,
        rho,
        rate,
        None,
        float(cover.mean()),
        float((r.high - r.low).mean()),
        None,
        None,
        None,
        _events(tasks, attempts, rate),
    )


def pair_setting(
    tasks: int,
    attempts: int,
    rho: float,
    rate: float,
    delta: float,
    runs: int,
    rng: np.random.Generator,
) -> Row:
    """Coverage, width and false-distinguishable rate of the paired interval for one setting."""
    z = rng.standard_normal((runs, tasks))
    e = rng.standard_normal((runs, tasks))
    ua = ndtr(z)
    ub = ndtr(COPULA * z + math.sqrt(1.0 - COPULA**2) * e)
    pa = _task_rates(rate, rho, ua)
    pb = _task_rates(rate - delta, rho, ub)
    att = np.full((runs, tasks), attempts, dtype=np.int64)
    sa = rng.binomial(att, pa)
    sb = rng.binomial(att, pb)
    r = paired_interval_arrays(sa, att, sb, att, CONFIDENCE)
    cover = (r.low <= delta + 1e-12) & (delta - 1e-12 <= r.high)
    called = float(distinguishable_arrays(r, RESOLUTION, CONFIDENCE).mean())
    excludes = (r.low > 0.0) | (r.high < 0.0)
    interval_only = float((excludes & (np.abs(r.diff) >= RESOLUTION - 1e-12)).mean())
    false_call = called if delta == 0.0 else None
    events = min(_events(tasks, attempts, rate), _events(tasks, attempts, rate - delta))
    return Row(
        tasks,
        attempts,
        rho,
        rate,
        delta,
        float(cover.mean()),
        float((r.high - r.low).mean()),
        false_call,
        called,
        interval_only,
        events,
    )


def grid(small: bool) -> tuple[Sequence[int], Sequence[int], Sequence[float], Sequence[float]]:
    if small:
        return SMALL["tasks"], SMALL["attempts"], SMALL["rates"], SMALL["rhos"]  # type: ignore[return-value]
    return TASKS, ATTEMPTS, RATES, RHOS


def run_grid(runs: int, seed: int, small: bool = False) -> Iterator[Row]:
    """Every rate setting, then every pair setting (pairs whose upper mean is at least 0.02)."""
    tasks_g, att_g, rates_g, rhos_g = grid(small)
    rng = np.random.default_rng(seed)
    for t in tasks_g:
        for m in att_g:
            for rho in rhos_g:
                for rate in rates_g:
                    yield rate_setting(t, m, rho, rate, runs, rng)
    for t in tasks_g:
        for m in att_g:
            for rho in rhos_g:
                for delta in DELTAS:
                    for rate in rates_g:
                        if rate - delta >= 0.02 - 1e-12:
                            yield pair_setting(t, m, rho, rate, delta, runs, rng)


COLUMNS = (
    "tasks",
    "attempts",
    "rho",
    "rate (lower level)",
    "interval",
    "coverage",
    "mean width",
    "called distinguishable, at Δ 0 falsely (interval alone)",
    "expected events",
    "events",
    "outside 93-98%",
)


def _fmt(row: Row) -> str:
    delta = "rate" if row.delta is None else f"Δ {row.delta:.2f}"
    fd = "" if row.called is None else f"{row.called:.3f} ({row.called_interval_only:.3f})"
    flag = "" if row.meets else ("below 93%" if row.coverage < COVER_LOW else "above 98%")
    few = "" if row.enough_events else "few events"
    return markdown_line(
        (
            row.tasks,
            row.attempts,
            f"{row.rho:g}",
            f"{row.rate:g}",
            delta,
            f"{row.coverage:.3f}",
            f"{row.width:.3f}",
            fd,
            f"{row.events:g}",
            few,
            flag,
        )
    )


def main() -> None:
    """Run the grid, print every setting and a summary, the command line and the wall time."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000, help="simulated cells per setting")
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument("--small", action="store_true", help="the slow test's smaller grid")
    args = parser.parse_args()
    started = time.perf_counter()
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    mc_se = math.sqrt(0.95 * 0.05 / args.runs)
    print(
        f"{args.runs} simulated cells per setting, confidence {CONFIDENCE}, Monte Carlo SE of a "
        f"coverage near 0.95: {mc_se:.4f}"
    )
    print(markdown_head(COLUMNS))
    rows = []
    for row in run_grid(args.runs, args.seed, args.small):
        rows.append(row)
        print(_fmt(row), flush=True)
    summary(rows)
    print()
    print(per_design(rows))
    print(f"command: {shlex.join([sys.executable, *sys.argv])}")
    print(f"wall time: {time.perf_counter() - started:.1f} s")
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def summary(rows: Sequence[Row]) -> None:
    """Counts of settings meeting the band, with and without enough events, per interval."""
    for name, sel in (
        ("rate", [r for r in rows if r.delta is None]),
        ("paired", [r for r in rows if r.delta is not None]),
    ):
        enough = [r for r in sel if r.enough_events]
        few = [r for r in sel if not r.enough_events]
        print(
            f"{name}: {len(sel)} settings; {len(enough)} with >= {FEW_EVENTS} expected events, "
            f"{sum(r.meets for r in enough)} of them within 93-98% "
            f"(coverage {min(r.coverage for r in enough):.3f} to {max(r.coverage for r in enough):.3f}); "
            f"{len(few)} with fewer events, coverage {min(r.coverage for r in few):.3f} to "
            f"{max(r.coverage for r in few):.3f}"
        )
    fd = [r.false_distinguishable for r in rows if r.false_distinguishable is not None]
    alone = [r.called_interval_only or 0.0 for r in rows if r.false_distinguishable is not None]
    over = sum(value > 0.05 for value in fd)
    print(
        f"false distinguishable at Δ = 0: max {max(fd):.3f} over {len(fd)} settings, "
        f"{over} above 0.05 (interval alone, without the sign test: max {max(alone):.3f}, "
        f"{sum(value > 0.05 for value in alone)} above 0.05)"
    )
    for row in rows:
        if not row.meets:
            print(f"outside 93-98%: {_fmt(row)}")


def _span(values: Sequence[float]) -> str:
    return f"{min(values):.3f}–{max(values):.3f}" if values else "—"


def per_design(rows: Sequence[Row]) -> str:
    """Two markdown tables, one line per design: coverage ranges with and without enough events."""
    designs = sorted({(r.tasks, r.attempts) for r in rows})
    out = [
        "| design (tasks × attempts) | rate: settings with ≥ 15 events | their coverage | "
        "settings with < 15 | their coverage | mean width |",
        "|---|---|---|---|---|---|",
    ]
    for tasks, attempts in designs:
        sel = [r for r in rows if (r.tasks, r.attempts) == (tasks, attempts) and r.delta is None]
        enough = [r.coverage for r in sel if r.enough_events]
        few = [r.coverage for r in sel if not r.enough_events]
        out.append(
            f"| {tasks} × {attempts} | {len(enough)} | {_span(enough)} | {len(few)} | "
            f"{_span(few)} | {_span([r.width for r in sel])} |"
        )
    out += [
        "",
        "| design | paired: settings with ≥ 15 events | their coverage | settings with < 15 | "
        "their coverage | mean width | false distinguishable at Δ 0, max (interval alone) | "
        "called at Δ 0.15 (interval alone) | called at Δ 0.3 (interval alone) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for tasks, attempts in designs:
        sel = [
            r for r in rows if (r.tasks, r.attempts) == (tasks, attempts) and r.delta is not None
        ]
        enough = [r.coverage for r in sel if r.enough_events]
        few = [r.coverage for r in sel if not r.enough_events]
        at = {delta: [r for r in sel if r.delta == delta] for delta in (0.0, 0.15, 0.3)}
        false = max(r.called or 0.0 for r in at[0.0])
        false_alone = max(r.called_interval_only or 0.0 for r in at[0.0])
        power = {
            delta: f"{_span([r.called or 0.0 for r in at[delta]])} "
            f"({_span([r.called_interval_only or 0.0 for r in at[delta]])})"
            for delta in (0.15, 0.3)
        }
        out.append(
            f"| {tasks} × {attempts} | {len(enough)} | {_span(enough)} | {len(few)} | "
            f"{_span(few)} | {_span([r.width for r in sel])} | "
            f"{false:.3f} ({false_alone:.3f}) | {power[0.15]} | {power[0.3]} |"
        )
    return "\n".join(out)


if __name__ == "__main__":
    main()
