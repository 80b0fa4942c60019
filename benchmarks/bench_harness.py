"""What the faithful path costs: the same study through both harnesses, side by side.

One pre-registration (the oracle reference policy, `--arms` x `--tasks` x 1 attempt) runs twice
against the same reference endpoint, served from its own process so neither run pays for it: once
with `design.harness: native` (the runner's own loop) and once with `verifiers-null` (the verifiers
taskset on the null harness through vf-eval, in child processes). Each run is timed on the wall
clock and in CPU seconds of this process and every child it waited for (vf-eval, each rollout's chat
program and tool server); both must score every episode the same.

    .venv-vf/bin/python benchmarks/bench_harness.py                 # 2 arms x 10 tasks, concurrency 8
    .venv-vf/bin/python benchmarks/bench_harness.py --tasks 20 --concurrency 16

Needs the verifiers extra (scripts/ci/verifiers-eval makes .venv-vf) and uv on PATH.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from common import markdown_table
from synthetic_runs import reference_preregistration

from poisson_tasks.prereg import load_preregistration
from poisson_tasks.reference import start_reference_server
from poisson_tasks.runfolder import iter_episodes
from poisson_tasks.runner import run_plan


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _prereg(
    folder: Path, harness: str, arms: list[str], tasks: int, concurrency: int, base_url: str
) -> Path:
    doc = reference_preregistration(
        f"bench-{harness}",
        arms,
        tasks=tasks,
        seed_string="bench-harness",
        slack=4,
        model={"base_url": base_url},
        design={"harness": harness},
        budget={"tokens": 500_000_000, "wall_clock_s": 3600},
        execution={"concurrency": concurrency},
    )
    path = folder / f"{harness}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def run(
    harness: str, arms: list[str], tasks: int, concurrency: int, base_url: str, work: Path
) -> dict[str, Any]:
    plan = load_preregistration(_prereg(work, harness, arms, tasks, concurrency, base_url))
    out = work / harness
    cpu0, t0 = _cpu(), time.perf_counter()
    asyncio.run(run_plan(plan, out, show_progress=False))
    wall, cpu = time.perf_counter() - t0, _cpu() - cpu0
    lines = list(iter_episodes(out))
    n = len(lines)
    return {
        "harness": harness,
        "episodes": n,
        "passed": sum(ln.passed for ln in lines),
        "wall_s": wall,
        "cpu_s": cpu,
        "episodes_per_s": n / wall if wall else 0.0,
        "cpu_s_per_episode": cpu / n if n else float("nan"),
        "setup_s_median": sorted(ln.timing.setup_s or 0.0 for ln in lines)[n // 2] if n else 0.0,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arms", default="depth:d3,faults:f2")
    ap.add_argument("--tasks", type=int, default=10)
    ap.add_argument("--concurrency", type=int, default=8)
    args = ap.parse_args()
    arms = args.arms.split(",")
    rows = []
    with start_reference_server(process=True) as server, tempfile.TemporaryDirectory() as tmp:
        for harness in ("native", "verifiers-null"):
            rows.append(
                run(harness, arms, args.tasks, args.concurrency, server.base_url, Path(tmp))
            )
    print(f"oracle, {len(arms)} arms x {args.tasks} tasks, concurrency {args.concurrency}")
    columns = ("harness", "episodes", "strict passes", "wall s", "CPU s", "episodes/s")
    columns += ("CPU s/episode", "median setup s")
    print(
        markdown_table(
            columns,
            (
                (
                    r["harness"],
                    r["episodes"],
                    r["passed"],
                    f"{r['wall_s']:.1f}",
                    f"{r['cpu_s']:.1f}",
                    f"{r['episodes_per_s']:.2f}",
                    f"{r['cpu_s_per_episode']:.3f}",
                    f"{r['setup_s_median']:.2f}",
                )
                for r in rows
            ),
        )
    )
    native, null = rows
    if native["cpu_s_per_episode"] > 0:
        ratio = null["cpu_s_per_episode"] / native["cpu_s_per_episode"]
        print(f"the null harness costs {ratio:.0f}x the native loop's CPU per episode")
    if (native["episodes"], native["passed"]) != (null["episodes"], null["passed"]):
        raise SystemExit("the two harnesses scored the study differently")


if __name__ == "__main__":
    main()
