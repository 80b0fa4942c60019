"""The runner with the in-process reference endpoint (provider `reference`) at several concurrencies.

    python benchmarks/bench_concurrency.py [TASKS] [CONCURRENCY ...]     # default: 20 64 16 8 4

Runs the published-reference-oracle design cut to TASKS tasks per arm and one attempt, once per
concurrency, into temporary folders, and prints episodes per second. Reference-policy numbers
measure the instrument, never a model.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import yaml
from common import command_line, markdown_table

from poisson_tasks.prereg import validate_preregistration
from poisson_tasks.runner import run_preregistration
from poisson_tasks.tokens import count_tokens

DESIGN = (
    Path(__file__).resolve().parents[1] / "preregistrations" / "published-reference-oracle.yaml"
)


def main(argv: list[str]) -> None:
    tasks = int(argv[0]) if argv else 20
    levels = [int(c) for c in argv[1:]] or [64, 16, 8, 4]
    count_tokens("load the tokenizer before the clock")
    rows: list[tuple[object, ...]] = []
    for conc in levels:
        doc = yaml.safe_load(DESIGN.read_text(encoding="utf-8"))
        doc["design"]["tasks"] = tasks
        doc["design"]["attempts"] = 1
        doc["design"].pop("seed_list_hash", None)
        doc["execution"]["concurrency"] = conc
        plan = validate_preregistration(doc)
        out = Path(tempfile.mkdtemp()) / "run"
        t = time.perf_counter()
        summary = run_preregistration(plan, out, show_progress=False)
        elapsed = time.perf_counter() - t
        n = summary.scored_this_session
        rows.append((conc, n, f"{elapsed:.2f}", f"{n / elapsed:.1f}"))
    print(markdown_table(("concurrency", "episodes", "seconds", "episodes/s"), rows))
    print(command_line())


if __name__ == "__main__":
    main(sys.argv[1:])
