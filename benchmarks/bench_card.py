"""How long a full card takes, and how much memory, at the published size and at ten times it.

A synthetic run of the published design (14 arms x 60 tasks x 5 attempts = 4,200 episodes, every
line written through runfolder.py, each with a ~3 KB transcript like the runner's) is turned into
the full artifact with every bootstrap: records_from_run, provenance_from_run, build_artifact,
render_document and card_json. Then the same at 600 tasks (42,000 episodes). Each size runs in a
fresh process so its peak RSS is its own.

    .venv/bin/python benchmarks/bench_card.py            # both sizes, a table
    .venv/bin/python benchmarks/bench_card.py --tasks 60 # one size, one row

Targets at 4,200 episodes: under 2 s and under 300 MB. The figures are synthetic outcomes, not a
model's results.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from common import command_line, markdown_table  # and tests/ on the path, for synthetic_runs
from synthetic_runs import FAKE_ENGINE_HASH, FAKE_HASH, PUBLISHED_ARMS, header, line, write_run

from poisson_tasks.calibration import (
    build_artifact,
    card_json,
    provenance_from_run,
    records_from_run,
    render_document,
)
from poisson_tasks.runfolder import EPISODES, Timing, Usage
from poisson_tasks.verifier import Outcome

ATTEMPTS = 5
_OUTCOMES: tuple[Outcome, ...] = ("passed", "passed", "overshoot", "wrong_state", "passed")


def _transcript(arm: str, seed: int, attempt: int) -> dict[str, object]:
    """About 3 KB: the size of a short runner transcript (messages, calls, observations)."""
    msg = {"role": "assistant", "content": f"calling the next stage of {arm} for {seed}/{attempt}"}
    return {"messages": [msg] * 20, "observations": ["ok 0123456789abcdef" * 2] * 8}


def write_synthetic(folder: Path, tasks: int) -> None:
    lines = []
    for arm in PUBLISHED_ARMS:
        for seed in range(tasks):
            for attempt in range(ATTEMPTS):
                h = hashlib.sha256(f"{arm}|{seed}|{attempt}".encode()).digest()
                lines.append(
                    line(
                        arm,
                        seed,
                        attempt,
                        _OUTCOMES[h[0] % len(_OUTCOMES)],
                        usage=Usage(
                            uncached_input_tokens=900 + h[1],
                            cached_input_tokens=h[2],
                            completion_tokens=100 + h[3],
                            reasoning_tokens=h[3],
                        ),
                        timing=Timing(
                            episode_s=1 + h[4] / 50,
                            model_s=1 + h[4] / 60,
                            harness_s=h[5] / 500,
                            setup_s=0.05,
                        ),
                        transcript=_transcript(arm, seed, attempt),
                    )
                )
    write_run(folder, header(PUBLISHED_ARMS, range(tasks), ATTEMPTS), lines)


def build(folder: Path) -> int:
    """The whole card from the folder; returns the card.json size so nothing is optimised away."""
    a = build_artifact(
        records_from_run(folder),
        provenance_from_run(folder),
        installed_generator_hash=FAKE_HASH,
        installed_engine_hash=FAKE_ENGINE_HASH,
        published=[],
    )
    return len(card_json(a)) + len(render_document(a))


def measure(tasks: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write_synthetic(folder, tasks)
        size_mb = (folder / EPISODES).stat().st_size / 1e6
        build(folder)  # warm: imports, first-call caches
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            build(folder)
            best = min(best, time.perf_counter() - t0)
        tracemalloc.start()
        build(folder)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    episodes = len(PUBLISHED_ARMS) * tasks * ATTEMPTS
    row = (
        f"{episodes:,}",
        str(tasks),
        f"{size_mb:.1f}",
        f"{best:.2f}",
        f"{peak / 1e6:.0f}",
        f"{rss_mb:.0f}",
    )
    print(json.dumps(row))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, help="one size only (tasks per arm)")
    args = parser.parse_args()
    if args.tasks is not None:
        measure(args.tasks)  # one size in this process: its row as JSON, for the parent
        return
    rows = []
    for tasks in (60, 600):
        done = subprocess.run(
            [sys.executable, __file__, "--tasks", str(tasks)],
            check=True,
            capture_output=True,
            text=True,
        )
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    columns = ("episodes", "tasks per arm", "episodes.jsonl MB", "seconds (best of 3)")
    print(markdown_table((*columns, "peak traced MB", "peak RSS MB (whole process)"), rows))
    print(command_line())


if __name__ == "__main__":
    main()
