"""Issue 34, the main job: `poisson-tasks card` (the README's command) beside the design it had.

    python benchmarks/perf_mainjob.py            # a table
    python benchmarks/perf_mainjob.py --json     # one JSON list of rows (benchmarks/perf.py)

The embedded default (src/poisson_tasks/data/smoke.yaml) was sized with power.py for the question
it declares: 4 arms x 50 tasks x 2 attempts = 400 episodes, where it had 10 tasks (80 episodes)
and the default resolution. Both designs run here on this build, side by side: `poisson-tasks
card` with no target, and `poisson-tasks card OLD.yaml`, where OLD.yaml is today's file with the
earlier size (tasks: 10) and no thresholds section, every other line the same. Each is a whole
fresh process in its own empty folder (its run folder is written there, as a user's is), run once
untimed first, then --repeats rounds interleaved; the median is reported with its CPU time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import yaml
from common import ROOT, Row, cli, interleaved, report, user_env

SMOKE = ROOT / "src" / "poisson_tasks" / "data" / "smoke.yaml"
TARGET_S = 6.0  # wall seconds for the README's main job on the 2-core machine, quiet
TARGET_RATIO = 3.0  # the design's cost beside the 80-episode one it replaced


def _old_design(folder: Path) -> Path:
    """Today's smoke.yaml at its earlier size: tasks 10, the default thresholds."""
    doc = yaml.safe_load(SMOKE.read_text(encoding="utf-8"))
    doc["design"]["tasks"] = 10
    doc.pop("thresholds", None)
    path = folder / "old-smoke.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def run(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one `poisson-tasks card` in a fresh empty folder."""
    with tempfile.TemporaryDirectory() as cwd:
        started = time.perf_counter()
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=user_env(),
        )
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(argv)} exited {os.waitstatus_to_exitcode(status)}")
    return wall, usage.ru_utime + usage.ru_stime


def measure(repeats: int) -> list[Row]:
    with tempfile.TemporaryDirectory() as keep:
        old = _old_design(Path(keep))
        commands = {
            "now": [*cli(), "card", "--quiet"],
            "before": [*cli(), "card", str(old), "--quiet"],
        }
        for argv in commands.values():
            run(argv)
        runs, loads = interleaved(commands, repeats, run)

    def median(name: str, field: int) -> float:
        return statistics.median(r[field] for r in runs[name])

    now, before = median("now", 0), median("before", 0)
    load = f"load average {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} cores"
    common = f"median of {repeats}, whole process in an empty folder, {load}"
    return [
        {
            "stage": "main job: `poisson-tasks card` (embedded default, 400 episodes), wall",
            "now": f"{now:.2f} s (CPU {median('now', 1):.2f} s)",
            "anchor": f"the 80-episode design {before:.2f} s (CPU {median('before', 1):.2f} s)",
            "target": f"< {TARGET_S:g} s",
            "ratio": f"{now / before:.2f}x",
            "met": now < TARGET_S,
            "note": f"run, card and its files; {common}",
        },
        {
            "stage": "main job: cost of the design sized by power.py beside the one it replaced",
            "now": f"CPU {median('now', 1):.2f} s",
            "anchor": f"CPU {median('before', 1):.2f} s",
            "target": f"<= {TARGET_RATIO:g}x",
            "ratio": f"{median('now', 1) / median('before', 1):.2f}x",
            "met": median("now", 1) <= TARGET_RATIO * median("before", 1),
            "note": f"5x the episodes (400 against 80); {common}",
        },
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--json", action="store_true", help="print one JSON list of rows")
    parser.add_argument("--repeats", type=int, default=5, help="rounds of each command")
    args = parser.parse_args()
    report(measure(max(1, args.repeats)), args.json)


if __name__ == "__main__":
    main()
