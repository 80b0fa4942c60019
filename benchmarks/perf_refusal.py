"""Issue 33, hostile input refused fast: whole `poisson-tasks` processes, a refusal beside the same
command on good input.

    python benchmarks/perf_refusal.py            # a table
    python benchmarks/perf_refusal.py --json     # one JSON list of rows (the driver's)

Rows, each a whole process timed from spawn to exit with its peak resident memory (wait4):

  100,000 arms     `validate` of the smoke study with design.arms a flow list of 100,000 arms
                   (1.0 MB), refused while it is read (at the 501st arm), beside `validate` of
                   the smoke study itself
  110,001 values   `validate` of two lists of 55,001 values in flow style (0.2 MB): each within
                   its bound, the document past the 110,000 values a pre-registration may hold,
                   refused when the reader reaches that bound (the slowest refusal a file can ask
                   for: every value before it is parsed), beside the same
  forged count     `merge` of one shard folder whose run.json says it is one of 10^12 shards,
                   beside `merge` of the study's two real shard folders (80 episodes)

Each command runs once untimed first, then --repeats rounds, interleaved; the median is reported.
The shard folders are made by `run --shard i/2` of the smoke study (the noisy reference policy,
in-process: a scripted baseline, never a model's figures) in a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import ROOT, report

SMOKE = ROOT / "preregistrations" / "smoke.yaml"
TABLE_S = 10.0  # docs/commands.md's table of bad inputs: every row ends within 10 s


def _cli() -> list[str]:
    script = Path(sys.executable).parent / "poisson-tasks"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "poisson_tasks"]


def run(argv: list[str], expect: int) -> tuple[float, float]:
    """(wall seconds, peak RSS MiB) of one process running argv to the exit status `expect`."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    if code != expect:
        raise SystemExit(f"{' '.join(argv[-3:])}: exit {code}, expected {expect}")
    return wall, usage.ru_maxrss / 1024


def files(d: Path) -> dict[str, Path]:
    """The inputs: the smoke study, its two shard folders, and three hostile ones."""
    text = SMOKE.read_text(encoding="utf-8")
    (d / "smoke.yaml").write_text(text)
    block = text[text.index("  arms:\n") : text.index("  tasks:")]
    arms = "  arms: [" + ", ".join(["depth:d1"] * 100_000) + "]\n"
    (d / "arms.yaml").write_text(text.replace(block, arms, 1))
    half = ",".join(["0"] * 55_001)  # two lists within their bound, the document past its own
    (d / "values.yaml").write_text(f'{{"a": [{half}], "b": [{half}]}}\n')
    for i in range(2):
        argv = [*_cli(), "run", str(d / "smoke.yaml"), "--shard", f"{i}/2", "--out"]
        subprocess.run([*argv, str(d / f"s{i}"), "--quiet"], check=True, capture_output=True)
    shutil.copytree(d / "s1", d / "forged")
    header = json.loads((d / "forged" / "run.json").read_text())
    header["shard"]["count"] = 10**12
    (d / "forged" / "run.json").write_text(json.dumps(header))
    return {name: d / name for name in ("smoke.yaml", "arms.yaml", "values.yaml", "s0", "s1")}


def measure(repeats: int) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        f = files(d)
        out = d / "merged"
        commands: dict[str, tuple[list[str], int]] = {
            "valid": ([*_cli(), "validate", str(f["smoke.yaml"])], 0),
            "arms": ([*_cli(), "validate", str(f["arms.yaml"])], 2),
            "values": ([*_cli(), "validate", str(f["values.yaml"])], 2),
            "merge": ([*_cli(), "merge", str(f["s0"]), str(f["s1"]), "--out", str(out)], 0),
            "forged": ([*_cli(), "merge", str(d / "forged"), "--out", str(d / "never")], 2),
        }
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        loads = [os.getloadavg()[0]]
        for repeat in range(repeats + 1):
            order = list(commands) if repeat % 2 == 0 else list(reversed(commands))
            for name in order:
                shutil.rmtree(out, ignore_errors=True)
                measured = run(*commands[name])
                if repeat:  # the first round is untimed: bytecode caches, page cache
                    runs[name].append(measured)
            loads.append(os.getloadavg()[0])

    def median(name: str, field: int) -> float:
        return statistics.median(r[field] for r in runs[name])

    valid, merge = median("valid", 0), median("merge", 0)
    common = (
        f"median of {repeats}, whole process, load average {min(loads):.1f}-{max(loads):.1f} on "
        f"{os.cpu_count()} cores"
    )
    rows = []
    for name, what in (
        ("arms", "validate: 100,000 arms (1.0 MB), refused at the 501st"),
        ("values", "validate: 110,002 values (0.2 MB), refused at the 110,001st"),
    ):
        now = median(name, 0)
        rows.append(
            {
                "stage": what,
                "now": f"{now:.2f} s, {median(name, 1):.0f} MiB",
                "anchor": f"validate smoke.yaml {valid:.2f} s, {median('valid', 1):.0f} MiB",
                "target": f"< {TABLE_S:g} s",
                "ratio": f"{now / valid:.2f}x",
                "met": now < TABLE_S,
                "note": common,
            }
        )
    forged, forged_mib, merge_mib = median("forged", 0), median("forged", 1), median("merge", 1)
    rows.append(
        {
            "stage": "merge: a shard folder of 10^12 shards, refused",
            "now": f"{forged:.2f} s, {forged_mib:.0f} MiB",
            "anchor": f"merge of the 2 real shard folders {merge:.2f} s, {merge_mib:.0f} MiB",
            "target": f"< {TABLE_S:g} s, peak memory <= the real merge's",
            "ratio": f"{forged / merge:.2f}x time, {forged_mib / merge_mib:.2f}x memory",
            "met": forged < TABLE_S and forged_mib <= merge_mib,
            "note": f"peak resident set (ru_maxrss); {common}",
        }
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--json", action="store_true", help="print one JSON list of rows")
    parser.add_argument("--repeats", type=int, default=3, help="rounds of every command")
    args = parser.parse_args()
    report(measure(max(1, args.repeats)), args.json)


if __name__ == "__main__":
    main()
