"""Issue 15, card stage: `poisson-tasks card` from 4,200 and 42,000 episodes, beside a floor.

The inputs are made here, in a temporary folder, from a published reference run's own records
(reference-noisy: 14 arms x 60 seeds x 5 attempts = 4,200 episode lines with their transcripts,
about 6 KB a line): the 4,200-episode folder is that run's episodes.jsonl uncompressed, and the
42,000-episode one holds it ten times, each copy with its seeds moved to distinct new seeds
(seed + copy * 2**32) and run.json's seed list extended to match. Nothing is committed; the
figures are a reference policy's synthetic outcomes, not a model's.

Rows, each the median of `--repeats` runs, every run a fresh process (so its peak RSS is its own),
with bytecode cached as an installed package has it:
- the CLI, `python -m poisson_tasks card FOLDER` (card.md to /dev/null): wall and CPU time, peak
  RSS;
- the floor, a fresh process that imports orjson and numpy, reads the file once, hashes it, parses
  every line with orjson (transcripts included) and puts the card's numeric fields into numpy
  arrays: the least a card can cost in Python (no statistics, no rendering).

    .venv/bin/python benchmarks/perf_card.py            # a table
    .venv/bin/python benchmarks/perf_card.py --json     # the rows as one JSON list (TEAM.md)
    .venv/bin/python benchmarks/perf_card.py --src /tmp/old/src  # another checkout's card

CPU time is printed beside wall time: on a loaded machine it moves much less than wall time.

Targets (issue 15): under 0.6 s at 4,200 episodes, under 3 s at 42,000, and peak RSS at 42,000
within 20 MiB of the 4,200 one ("memory flat in episodes").
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import report  # the one table format, and the driver's JSON rows

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "calibration" / "reference-noisy"
COPIES = 10
SEED_STEP = 2**32
FLAT_MIB = 20.0
SEED = re.compile(rb'"seed":(\d+)')
TARGETS = {4_200: 0.6, 42_000: 3.0}

FLOOR = r"""
import hashlib, sys
import numpy as np, orjson
hasher = hashlib.sha256()
arms, seeds, tokens, episode_s, tool_calls = [], [], [], [], []
with open(sys.argv[1], "rb") as fh:
    for raw in fh:
        hasher.update(raw)
        line = orjson.loads(raw)
        usage, timing = line["usage"], line["timing"]
        arms.append(line["arm_id"]); seeds.append(line["seed"])
        tokens.append((usage.get("uncached_input_tokens", usage.get("prompt_tokens")) or 0) + (usage["completion_tokens"] or 0))
        episode_s.append(timing["episode_s"] or np.nan); tool_calls.append(line["tool_calls"])
names, index = np.unique(np.asarray(arms), return_inverse=True)
tok, sec = np.asarray(tokens, dtype=np.float64), np.asarray(episode_s, dtype=np.float64)
medians = [(np.median(tok[index == i]), np.nanmedian(sec[index == i])) for i in range(len(names))]
print(hasher.hexdigest(), len(tokens), len(medians))
"""


def _reseeded(raw: bytes, shift: int) -> bytes:
    """The line with its seed moved by `shift` (the first "seed" key: the line's own)."""
    return SEED.sub(lambda match: b'"seed":%d' % (int(match[1]) + shift), raw, count=1)


def make_inputs(base: Path) -> dict[int, Path]:
    """The 4,200- and 42,000-episode run folders under `base` (plain episodes.jsonl)."""
    header = json.loads((SOURCE / "run.json").read_text())
    with gzip.open(SOURCE / "episodes.jsonl.gz", "rb") as fh:
        lines = fh.read().splitlines(keepends=True)
    small = base / f"run-{len(lines)}"
    small.mkdir()
    shutil.copy(SOURCE / "run.json", small / "run.json")
    (small / "episodes.jsonl").write_bytes(b"".join(lines))
    big = base / f"run-{len(lines) * COPIES}"
    big.mkdir()
    seeds = list(header["seeds"])
    with (big / "episodes.jsonl").open("wb") as out:
        for copy in range(COPIES):
            shift = copy * SEED_STEP
            out.writelines(_reseeded(raw, shift) for raw in lines)
    header["seeds"] = [seed + copy * SEED_STEP for copy in range(COPIES) for seed in seeds]
    (big / "run.json").write_text(json.dumps(header, indent=2, sort_keys=True) + "\n")
    return {len(lines): small, len(lines) * COPIES: big}


Run = tuple[float, float, float]  # wall seconds, CPU seconds (user + system), peak RSS MiB


def timed(command: list[str], env: dict[str, str] | None = None) -> Run:
    """Wall and CPU seconds and peak RSS (MiB) of one fresh process; its output goes to
    /dev/null."""
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            raise SystemExit(f"{' '.join(command)} failed: {err.read().decode()[-500:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024  # KiB on Linux


def _median(runs: list[Run]) -> Run:
    wall, cpu, rss = zip(*runs, strict=True)
    return statistics.median(wall), statistics.median(cpu), statistics.median(rss)


def measure(folder: Path, repeats: int, env: dict[str, str]) -> dict[str, Run]:
    """Card CLI and floor on one folder, alternated so drifting load hits both alike."""
    card = [sys.executable, "-m", "poisson_tasks", "card", str(folder)]
    floor = [sys.executable, "-c", FLOOR, str(folder / "episodes.jsonl")]
    timed(card, env)  # warm the page cache and the bytecode once; not counted
    timed(floor, env)
    runs: dict[str, list[Run]] = {"card": [], "floor": []}
    for _ in range(repeats):
        runs["card"].append(timed(card, env))
        runs["floor"].append(timed(floor, env))
    return {name: _median(figures) for name, figures in runs.items()}


def rows(figures: dict[int, dict[str, Run]], big_mib: float, label: str) -> list[dict[str, object]]:
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    out: list[dict[str, object]] = []
    for episodes, target in TARGETS.items():
        wall, cpu, rss = figures[episodes]["card"]
        floor_wall, floor_cpu, floor_rss = figures[episodes]["floor"]
        out.append(
            {
                "stage": f"card from {episodes:,} episodes, CLI{label}",
                "now": f"{wall:.2f} s (CPU {cpu:.2f} s), {rss:.0f} MiB",
                "anchor": f"orjson + numpy floor {floor_wall:.2f} s (CPU {floor_cpu:.2f} s), "
                f"{floor_rss:.0f} MiB",
                "target": f"< {target:g} s",
                "ratio": f"{wall / floor_wall:.2f}x floor",
                "met": wall < target,
                "note": f"median of the runs, each a fresh process; load average {load}",
            }
        )
    small, large = figures[min(TARGETS)]["card"][2], figures[max(TARGETS)]["card"][2]
    out.append(
        {
            "stage": f"card memory, {max(TARGETS):,} vs {min(TARGETS):,} episodes{label}",
            "now": f"+{large - small:.0f} MiB ({small:.0f} -> {large:.0f} MiB peak RSS)",
            "anchor": f"its episodes.jsonl is {big_mib:.0f} MiB",
            "target": f"flat: < +{FLAT_MIB:g} MiB for 10x the episodes",
            "ratio": f"{large / small:.2f}x",
            "met": large - small < FLAT_MIB,
            "note": "streamed records: peak RSS should not follow the episodes",
        }
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the rows as one JSON list")
    parser.add_argument("--repeats", type=int, default=3, help="runs per figure (median of them)")
    parser.add_argument(
        "--src",
        type=Path,
        help="measure the card of another checkout's src/ (e.g. a `git worktree` of an older "
        "commit) instead of the installed one, for a before/after in one run",
    )
    parser.add_argument("--make", type=Path, help=argparse.SUPPRESS)  # the inputs, in a child
    args = parser.parse_args()
    env = dict(os.environ)
    label = ""
    if args.src is not None:
        env["PYTHONPATH"] = str(args.src.resolve())
        label = f" ({args.src})"
    if args.make is not None:
        make_inputs(args.make)
        return
    with tempfile.TemporaryDirectory(prefix="perf_card-") as tmp:
        # Made by a child process: a child's peak RSS on Linux starts from its parent's at the
        # fork, so this process stays small (no records, no numpy) to keep the figures the child's.
        subprocess.run([sys.executable, __file__, "--make", tmp], check=True)
        folders = {episodes: Path(tmp) / f"run-{episodes}" for episodes in TARGETS}
        # Bytecode cached as an installed package has it (the first, uncounted run writes it),
        # even where PYTHONDONTWRITEBYTECODE is set; kept in the temporary folder, not in src/.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        if not all(folder.is_dir() for folder in folders.values()):
            raise SystemExit(f"{SOURCE.name} no longer has {min(TARGETS):,} episode lines")
        figures: dict[int, dict[str, Run]] = {}
        for episodes, folder in folders.items():
            figures[episodes] = measure(folder, args.repeats, env)
        big_mib = (folders[max(TARGETS)] / "episodes.jsonl").stat().st_size / 2**20
    table = rows(figures, big_mib, label)
    report(table, args.json)


if __name__ == "__main__":
    main()
