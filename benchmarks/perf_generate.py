"""Issue 15, generation stage: the published design's 840 bundles generated and reference-verified.

The published cards' design is the depth and distractor knobs, every level and control (14 arms),
at seeds 0-59: 840 bundles. Each is generated, then its reference solution and every negative
control is verified (1 + 6 or 7 controls each: 6,240 verdicts), and the bundle is let go, as a
sweep uses them. The anchor, measured in the same run and interleaved with it, is a floor: the
same 840 bundles (made beforehand) written out once with the standard library,
`json.dumps(bundle.model_dump(mode="json"), sort_keys=True)`, which any path that hands bundles
on pays at least once.

`generate(..., controls=False)` (what the runner needs) is not a row: it skips only building the
controls' Episode objects, since the task id digests the controls' content either way, and the
difference is below this machine's noise.

    .venv/bin/python benchmarks/perf_generate.py          # a table
    .venv/bin/python benchmarks/perf_generate.py --json   # one JSON list of rows (benchmarks/perf.py)

Medians of --repeats (default 3) runs after one warm-up pass (tokenizer load, caches); wall and CPU
seconds both shown, since this machine is shared and wall time moves with the load.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import time
from collections.abc import Callable

from common import report  # the one table format, and the driver's JSON rows

from poisson_tasks.arms import all_arms
from poisson_tasks.bundle import TaskBundle
from poisson_tasks.generator import generate
from poisson_tasks.verifier import verify

KNOBS = ("depth", "distractor")
SEEDS = range(60)
TARGET_S = 0.3  # issue 15: < 0.3 s for the 840 bundles, <= 350 us per bundle incl. controls


def _arms() -> list[str]:
    return [spec.id for knob in KNOBS for spec in all_arms(knob)]


def generate_and_verify(arms: list[str]) -> int:
    """The measured path: generate, verify the reference and every control, let the bundle go."""
    verdicts = 0
    for arm in arms:
        for seed in SEEDS:
            bundle = generate(arm, seed)
            verify(bundle, [[call] for call in bundle.reference_calls], True, False)
            for episode in bundle.negative_controls.values():
                verify(bundle, episode.turns, episode.ended_with_reply, episode.turn_limit_hit)
            verdicts += 1 + len(bundle.negative_controls)
    return verdicts


def stdlib_dump(bundles: list[TaskBundle]) -> int:
    """The anchor: each bundle written out once with json.dumps."""
    return sum(len(json.dumps(b.model_dump(mode="json"), sort_keys=True)) for b in bundles)


def _timed(work: Callable[[], object]) -> tuple[float, float]:
    gc.collect()
    cpu, wall = time.process_time(), time.perf_counter()
    work()
    return time.perf_counter() - wall, time.process_time() - cpu


def measure(repeats: int) -> list[dict[str, object]]:
    arms = _arms()
    bundles = [generate(arm, seed) for arm in arms for seed in SEEDS]
    count = len(bundles)
    verdicts = generate_and_verify(arms)  # warm-up: tokenizer, source hashes, caches
    stdlib_dump(bundles)
    now: list[tuple[float, float]] = []
    anchor: list[tuple[float, float]] = []
    for _ in range(repeats):  # interleaved, so each pair sees the same load
        now.append(_timed(lambda: generate_and_verify(arms)))
        anchor.append(_timed(lambda: stdlib_dump(bundles)))

    def median(runs: list[tuple[float, float]], index: int) -> float:
        return statistics.median(run[index] for run in runs)

    wall, cpu = median(now, 0), median(now, 1)
    anchor_wall, anchor_cpu = median(anchor, 0), median(anchor, 1)
    load = os.getloadavg()[0]
    return [
        {
            "stage": f"generate: {count} bundles of the published design + {verdicts:,} verdicts, "
            "in process",
            "now": f"{wall:.3f} s ({wall / count * 1e6:.0f} us/bundle), cpu {cpu:.3f} s",
            "anchor": f"json.dumps of the {count} bundles {anchor_wall:.3f} s, cpu {anchor_cpu:.3f} s",
            "target": f"< {TARGET_S} s (<= 350 us/bundle incl. controls)",
            "ratio": f"{wall / anchor_wall:.2f}x anchor; {wall / TARGET_S:.2f}x target",
            "met": wall < TARGET_S,
            "note": f"median of {repeats}, wall; load average {load:.1f} on {os.cpu_count()} cores",
        },
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON list of rows")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rows = measure(max(3, args.repeats))
    report(rows, args.json)


if __name__ == "__main__":
    main()
