"""Generation and verification throughput, measured side by side in one process.

Usage: python benchmarks/bench_generate.py [--seeds 60] [--knobs depth,distractor] [--pins]

Prints bundles/s and verdicts/s for the published-card arms (depth and distractor, 14 arms) and,
with --knobs all, for every knob this build generates. With --pins it also times the pin ledger:
every knob's levels and controls generated at every seed, measured, and pin-checked one contrast
per knob and seed (issue target: all nine knobs x 60 seeds in under 5 s on this machine).
The first pass includes the one-time tokenizer load and cold caches; the second pass is warm.
Compare against the issue's target: 840 bundles generated and their references and controls
verified in under 0.3 s (1 s at most).
"""

from __future__ import annotations

import argparse
import gc
import platform
import subprocess
import sys
import time

from common import command_line, markdown_table

from poisson_tasks.arms import all_arms
from poisson_tasks.bundle import TaskBundle
from poisson_tasks.generator import generate
from poisson_tasks.generator.assemble import BUILDERS
from poisson_tasks.pins import check_pins, measure_pins, pinned_bundle
from poisson_tasks.tokens import count_tokens
from poisson_tasks.verifier import verify


def one_pass(arms: list[str], seeds: range, pins: bool) -> tuple[float, float, int, int]:
    """Every bundle generated, then every reference and control verified; all bundles held."""
    t0 = time.perf_counter()
    make = pinned_bundle if pins else generate
    bundles = [make(a, s) for a in arms for s in seeds]
    t1 = time.perf_counter()
    verdicts = 0
    for b in bundles:
        verdicts += _verify_all(b)
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, len(bundles), verdicts


def streamed_pass(arms: list[str], seeds: range) -> tuple[float, float, int, int]:
    """Generate a bundle, verify its reference and controls, let it go: how a sweep uses them."""
    gen = ver = 0.0
    n = verdicts = 0
    for a in arms:
        for s in seeds:
            t0 = time.perf_counter()
            b = generate(a, s)
            t1 = time.perf_counter()
            verdicts += _verify_all(b)
            ver += time.perf_counter() - t1
            gen += t1 - t0
            n += 1
    return gen, ver, n, verdicts


def _verify_all(b: TaskBundle) -> int:
    verify(b, [[c] for c in b.reference_calls], True, False)
    for ep in b.negative_controls.values():
        verify(b, ep.turns, ep.ended_with_reply, ep.turn_limit_hit)
    return 1 + len(b.negative_controls)


def pins_pass(knobs: list[str], seeds: range) -> tuple[float, float, float, int, int, int, float]:
    """One pin-ledger sweep: generate, measure and check seconds, counts, refusals, CPU seconds."""
    cpu = time.process_time()
    t0 = time.perf_counter()
    contrasts = [{a.id: generate(a, s) for a in all_arms(k)} for k in knobs for s in seeds]
    t1 = time.perf_counter()
    measured = [{a: measure_pins(b) for a, b in c.items()} for c in contrasts]
    t2 = time.perf_counter()
    pairs = zip(contrasts, measured, strict=True)
    refused = sum(check_pins(c, measurements=m).refused for c, m in pairs)
    t3 = time.perf_counter()
    bundles = sum(len(c) for c in contrasts)
    return t1 - t0, t2 - t1, t3 - t2, bundles, len(contrasts), refused, time.process_time() - cpu


_PLAN_SCRIPT = """
import sys, time
t = time.perf_counter()
from poisson_tasks.arms import all_arms
from poisson_tasks.pins import check_plan
arms = [a.id for k in sys.argv[1].split(",") for a in all_arms(k)]
report = check_plan(arms, range(int(sys.argv[2])), workers=int(sys.argv[3]))
print(time.perf_counter() - t, sum(c.refused for c in report.contrasts))
"""


def plan_rows(knobs: list[str], seeds: int) -> None:
    """check_plan over the whole sweep in a fresh process (cold: imports, tokenizer, caches)."""
    print()
    print("check_plan, fresh process each (imports and tokenizer load included):")
    print()
    rows: list[tuple[object, ...]] = []
    for workers in (1, 2):
        out = subprocess.run(
            [sys.executable, "-c", _PLAN_SCRIPT, ",".join(knobs), str(seeds), str(workers)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        rows.append((workers, f"{float(out[0]):.3f}", out[1]))
    print(markdown_table(("workers", "seconds", "contrast groups refused"), rows))


def pins_section(knobs: list[str], seeds: int) -> None:
    """The pin ledger's table: a cold and a warm pass over every knob's full sweep."""
    plan_rows(knobs, seeds)
    print()
    print(
        f"pin ledger: {len(knobs)} knobs ({', '.join(knobs)}), levels and controls x {seeds} seeds"
    )
    print()
    rows: list[tuple[object, ...]] = []
    for label in ("cold caches", "warm caches"):
        gc.collect()
        g, m, c, nb, nc, refused, cpu = pins_pass(knobs, range(seeds))
        total = g + m + c
        rows.append(
            (
                label,
                nb,
                nc,
                f"{g:.3f}",
                f"{m:.3f}",
                f"{c:.3f}",
                f"{total:.3f}",
                f"{cpu:.3f}",
                f"{nb / total:,.0f}",
                f"{nc / total:,.0f}",
                refused,
            )
        )
    columns = ("pass", "bundles", "contrasts", "generate s", "measure s", "check s", "total s")
    columns += ("cpu s", "bundles/s", "contrasts/s", "refused")
    print(markdown_table(columns, rows))
    print()
    print(
        "bundles/s and contrasts/s are over the whole sweep (generate + measure + check); "
        "measure + check alone is the pin ledger's own cost; cpu s is this process's CPU time, "
        "the figure to read on a shared machine."
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=60)
    ap.add_argument("--knobs", default="depth,distractor", help="comma list, or 'all'")
    ap.add_argument("--pins", action="store_true", help="also time the pin ledger on every knob")
    args = ap.parse_args()
    knobs = list(BUILDERS) if args.knobs == "all" else args.knobs.split(",")
    arms = [a.id for k in knobs for a in all_arms(k)]
    print(
        f"python {platform.python_version()} on {platform.machine()}, "
        f"{len(arms)} arms x {args.seeds} seeds"
    )
    t = time.perf_counter()
    count_tokens("load the tokenizer")
    generate(arms[0], 10_000)
    print(f"one-time start (tokenizer tables, source hashes): {time.perf_counter() - t:.3f} s")
    rows = []
    gc.collect()
    g, v, n, nv = streamed_pass(arms, range(args.seeds))
    rows.append(("cold caches, streamed, pins=False", n, g, nv, v))
    gc.collect()
    g, v, n, nv = streamed_pass(arms, range(args.seeds))
    rows.append(("warm caches, streamed, pins=False", n, g, nv, v))
    for label, pins in (
        ("warm caches, all held, pins=False", False),
        ("warm caches, all held, pins=True", True),
    ):
        gc.collect()
        g, v, n, nv = one_pass(arms, range(args.seeds), pins)
        rows.append((label, n, g, nv, v))
    print()
    columns = ("pass", "bundles", "generate s", "bundles/s", "verdicts", "verify s")
    print(
        markdown_table(
            (*columns, "verdicts/s", "total s"),
            (
                (
                    label,
                    n,
                    f"{g:.3f}",
                    f"{n / g:,.0f}",
                    nv,
                    f"{v:.3f}",
                    f"{nv / v:,.0f}",
                    f"{g + v:.3f}",
                )
                for label, n, g, nv, v in rows
            ),
        )
    )
    print()
    print(
        f"per bundle: {rows[0][2] / rows[0][1] * 1e6:.0f} us generate (cold), "
        f"{rows[0][4] / rows[0][3] * 1e6:.0f} us per verdict. 'streamed' verifies each bundle as it "
        "is made and lets it go; 'all held' keeps all of them alive first, which costs Python's "
        "cyclic garbage collector extra passes; pins=True adds the pin ledger's measurement of "
        "each bundle (issue 3)"
    )
    if args.pins:
        pins_section(list(BUILDERS), args.seeds)
    print(command_line())


if __name__ == "__main__":
    main()
