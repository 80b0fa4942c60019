"""Issue 34, the main job: `poisson-tasks card` (the README's command) beside the design it replaced.

    python benchmarks/perf_mainjob.py            # a table
    python benchmarks/perf_mainjob.py --json     # one JSON list of rows (benchmarks/perf.py)

The embedded default (src/poisson_tasks/data/smoke.yaml) is a positive control: the `graded`
reference policy on depth d2 and d8 and depth's two controls, 4 arms x 50 tasks x 2 attempts = 400
episodes. The design it replaced had the same size and resolution but the `noisy` policy
(p_early_stop 0.02) on depth d1 and d3 (horizon 8). Both run here on this build, side by side:
`poisson-tasks card` with no target, and `poisson-tasks card OLD.yaml`, where OLD.yaml is today's
file with that model, those arms and that horizon, every other line the same. Each is a whole fresh
process in its own empty folder (its run folder is written there, as a user's is), run once
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
TARGET_RATIO = 1.25  # the positive control's CPU beside the same-sized noisy design it replaced
OLD_MODEL = "noisy?p_early_stop=0.02"
OLD_ARMS = ["depth:d1", "depth:d3", "depth:d1+h8", "depth:d2+h5"]
OLD_HORIZON = 8  # depth:d3's 4 turns plus the slack of 4


def _old_design(folder: Path) -> Path:
    """Today's smoke.yaml with the model, arms and horizon of the design it replaced."""
    doc = yaml.safe_load(SMOKE.read_text(encoding="utf-8"))
    doc["model"]["model"] = OLD_MODEL
    doc["design"].update(arms=OLD_ARMS, horizon=OLD_HORIZON)
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
            "anchor": f"the noisy design it replaced {before:.2f} s "
            f"(CPU {median('before', 1):.2f} s)",
            "target": f"< {TARGET_S:g} s",
            "ratio": f"{now / before:.2f}x",
            "met": now < TARGET_S,
            "note": f"run, card and its files; {common}",
        },
        {
            "stage": "main job: cost of the positive control beside the design it replaced",
            "now": f"CPU {median('now', 1):.2f} s",
            "anchor": f"CPU {median('before', 1):.2f} s",
            "target": f"<= {TARGET_RATIO:g}x",
            "ratio": f"{median('now', 1) / median('before', 1):.2f}x",
            "met": median("now", 1) <= TARGET_RATIO * median("before", 1),
            "note": f"the same 400 episodes (graded on d2 and d8 against noisy on d1 and d3); {common}",
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
