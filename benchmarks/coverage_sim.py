"""Coverage of the task-clustered 95% interval against a naive attempts-are-independent one.

Simulates clustered Bernoulli cells (task rates ~ Beta with a known mean and intra-task
correlation rho = 1/(a+b+1)) and counts how often each interval covers the Beta mean, the
expected task-mean rate. Run from the repository root:

    PYTHONPATH=src python benchmarks/coverage_sim.py [--runs 2000 --tasks 60 --attempts 5]
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
import time

import numpy as np
from scipy.stats import norm  # type: ignore[import-untyped]

from poisson_tasks.calibration.stats import cluster_bootstrap, clustered_se

MEANS = (0.1, 0.3, 0.5, 0.8)
ICCS = (0.1, 0.5)


def wilson(successes: int, n: int, z: float) -> tuple[float, float]:
    """Wilson score interval over pooled attempts, treating every attempt as independent."""
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def simulate(
    mean: float, icc: float, args: argparse.Namespace, seq: np.random.SeedSequence
) -> dict[str, float]:
    """Coverage and mean width of the three intervals for one (mean, icc) setting."""
    rng = np.random.default_rng(seq)
    conc = 1.0 / icc - 1.0  # a + b
    att = np.full(args.tasks, args.attempts, dtype=np.int64)
    n_total = args.tasks * args.attempts
    z = float(norm.ppf(0.975))
    hits = {"cluster": 0, "cl_se": 0, "naive": 0}
    widths = {"cluster": 0.0, "cl_se": 0.0, "naive": 0.0}
    for _ in range(args.runs):
        p = rng.beta(mean * conc, (1.0 - mean) * conc, size=args.tasks)
        succ = rng.binomial(att, p)
        boot = cluster_bootstrap(
            succ, att, resamples=args.resamples, seed=int(rng.integers(2**63)), confidence=0.95
        )
        pooled = succ.sum() / n_total
        half = z * clustered_se(succ, att)
        intervals = {
            "cluster": (boot.low, boot.high),
            "cl_se": (pooled - half, pooled + half),
            "naive": wilson(int(succ.sum()), n_total, z),
        }
        for name, (lo, hi) in intervals.items():
            hits[name] += lo <= mean <= hi
            widths[name] += hi - lo
    out = {f"cov_{k}": v / args.runs for k, v in hits.items()}
    out.update({f"w_{k}": v / args.runs for k, v in widths.items()})
    return out


def main() -> None:
    """Parse arguments, run every setting, print the table, the command line and wall time."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000, help="simulated cells per setting")
    parser.add_argument("--tasks", type=int, default=60)
    parser.add_argument("--attempts", type=int, default=5)
    parser.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples")
    parser.add_argument("--seed", type=int, default=20240601)
    args = parser.parse_args()

    started = time.perf_counter()
    settings = [(m, r) for r in ICCS for m in MEANS]
    seqs = np.random.SeedSequence(args.seed).spawn(len(settings))
    mc_se = math.sqrt(0.95 * 0.05 / args.runs)
    print(
        f"{args.tasks} tasks x {args.attempts} attempts, {args.runs} runs/setting, "
        f"{args.resamples} resamples; target = Beta mean; coverage MC SE at 0.95 = {mc_se:.4f}"
    )
    header = (
        f"| {'mean':>4} | {'ICC':>4} | {'cluster-boot cov':>16} | {'clustered-SE cov':>16} "
        f"| {'naive Wilson cov':>16} | {'width cluster/naive':>19} |"
    )
    print(header)
    print("|" + "|".join("-" * (len(c)) for c in header.split("|")[1:-1]) + "|")
    for (mean, icc), seq in zip(settings, seqs, strict=True):
        r = simulate(mean, icc, args, seq)
        print(
            f"| {mean:>4.1f} | {icc:>4.1f} | {r['cov_cluster']:>16.3f} | {r['cov_cl_se']:>16.3f} "
            f"| {r['cov_naive']:>16.3f} | {r['w_cluster'] / r['w_naive']:>19.2f} |"
        )
    elapsed = time.perf_counter() - started
    print(f"command: {shlex.join([sys.executable, *sys.argv])}")
    print(f"wall time: {elapsed:.1f} s")


if __name__ == "__main__":
    main()
