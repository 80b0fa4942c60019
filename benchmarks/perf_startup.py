"""Issue 15, start-up and the pin sweep: whole `poisson-tasks` processes against a bare interpreter.

    python benchmarks/perf_startup.py            # a table
    python benchmarks/perf_startup.py --json     # one JSON list of rows (TEAM.md's perf protocol)

Every figure is a whole process, started the way a user starts it (the `poisson-tasks` script next
to this interpreter), timed from spawn to exit, with its peak resident memory from the kernel
(wait4's ru_maxrss). The anchor, `python -c pass`, runs in the same loop, so both see the same load.
Rows:

  generate one task   `poisson-tasks generate depth:d3 --seed 7 --json`: wall time and peak memory
  --help              `poisson-tasks --help`: wall time
  pin sweep           `poisson-tasks generate --arms <every level and control of the nine knobs,
                      45 arms> --seeds 0-59`, with --workers 1 and with --workers 2 (the 2-worker
                      row's anchor is the 1-worker sweep of the same round: never slower than it)

Each command runs once untimed first (the interpreter writes its bytecode caches then, as it does
for a user, even where PYTHONDONTWRITEBYTECODE is set here), then --repeats rounds, the commands
interleaved within a round; the median is reported.

`--against SRC` also runs the one-task generate and --help with another checkout's package
(PYTHONPATH=SRC, e.g. a `git archive` of an earlier commit's src/), interleaved in the same rounds,
and adds a row for each: this tree's figure beside that tree's, measured side by side.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from typing import Any

from common import (  # the table format, the driver's rows, the loop, the command
    cli,
    interleaved,
    report,
    user_env,
)

GENERATE_S = 0.25
GENERATE_MIB = 80.0
HELP_S = 0.1
SWEEP_S = 3.0


def run(argv: list[str], source: str | None = None) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak RSS MiB) of one process running argv to a zero exit
    (`source`: the package imported from that folder instead of this tree's)."""
    env = user_env() if source is None else {**user_env(), "PYTHONPATH": source}
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise SystemExit(f"{' '.join(argv[:3])} ... exited {proc.returncode}: {tail}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def _s(seconds: float) -> str:
    return f"{seconds:.3f} s"


def every_arm() -> str:
    """The 45 arm ids, comma-separated, read in a child process: this parent stays small, since a
    child's peak memory (ru_maxrss) counts the parent's resident pages it starts from."""
    code = (
        "from poisson_tasks.arms import KNOBS, all_arms\n"
        "print(','.join(a.id for knob in KNOBS for a in all_arms(knob)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=user_env()
    )
    return done.stdout.strip()


def measure(repeats: int, seeds: str, against: str | None = None) -> list[dict[str, Any]]:
    arms = every_arm()
    commands = {
        "anchor": [sys.executable, "-c", "pass"],
        "generate": [*cli(), "generate", "depth:d3", "--seed", "7", "--json"],
        "help": [*cli(), "--help"],
        "sweep1": [*cli(), "generate", "--arms", arms, "--seeds", seeds, "--workers", "1"],
        "sweep2": [*cli(), "generate", "--arms", arms, "--seeds", seeds, "--workers", "2"],
    }
    sources: dict[str, str | None] = dict.fromkeys(commands)
    if against is not None:
        commands["generate@"], commands["help@"] = commands["generate"], commands["help"]
        sources["generate@"] = sources["help@"] = against
    for name in ("anchor", "generate", "help", *(("generate@", "help@") if against else ())):
        run(commands[name], sources[name])
    run([*cli(), "generate", "--arms", "history:t300,history:t600", "--seeds", "0"])
    by_name = {name: [name] for name in commands}  # interleaved hands each run its name
    runs, loads = interleaved(by_name, repeats, lambda key: run(commands[key[0]], sources[key[0]]))

    def median(name: str, field: int) -> float:
        return statistics.median(r[field] for r in runs[name])

    anchor, anchor_mib = median("anchor", 0), median("anchor", 2)
    generate, generate_mib = median("generate", 0), median("generate", 2)
    help_s = median("help", 0)
    sweep1, sweep2 = median("sweep1", 0), median("sweep2", 0)
    load = f"load average {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} cores"
    common = f"median of {repeats}, whole process, {load}"
    beside: list[dict[str, Any]] = []
    if against is not None:
        for name, what in (("generate", "generate depth:d3 --seed 7 --json"), ("help", "--help")):
            now, then = median(name, 0), median(f"{name}@", 0)
            beside.append(
                {
                    "stage": f"start-up: {what}, this tree against {against}",
                    "now": _s(now),
                    "anchor": f"{against} {_s(then)}",
                    "target": "<= that tree",
                    "ratio": f"{now / then:.2f}x",
                    "met": now <= then,
                    "note": (
                        f"CPU {_s(median(name, 1))} against {_s(median(f'{name}@', 1))}; "
                        f"peak {median(name, 2):.0f} MiB against {median(f'{name}@', 2):.0f} "
                        f"MiB; {common}"
                    ),
                }
            )
    return [
        *beside,
        {
            "stage": "start-up: generate depth:d3 --seed 7 --json (one task), time",
            "now": _s(generate),
            "anchor": f"python -c pass {_s(anchor)}",
            "target": f"< {GENERATE_S} s",
            "ratio": f"{generate / anchor:.0f}x",
            "met": generate < GENERATE_S,
            "note": f"CPU {_s(median('generate', 1))}; {common}",
        },
        {
            "stage": "start-up: generate depth:d3 --seed 7 --json (one task), peak memory",
            "now": f"{generate_mib:.0f} MiB",
            "anchor": f"python -c pass {anchor_mib:.0f} MiB",
            "target": f"< {GENERATE_MIB:.0f} MiB",
            "ratio": f"{generate_mib / anchor_mib:.1f}x",
            "met": generate_mib < GENERATE_MIB,
            "note": (
                "peak resident set (ru_maxrss); bpe-openai's o200k tokenizer alone is about "
                f"67 MiB of it; {common}"
            ),
        },
        {
            "stage": "start-up: poisson-tasks --help",
            "now": _s(help_s),
            "anchor": f"python -c pass {_s(anchor)}",
            "target": f"< {HELP_S} s",
            "ratio": f"{help_s / anchor:.0f}x",
            "met": help_s < HELP_S,
            "note": f"peak {median('help', 2):.0f} MiB; {common}",
        },
        {
            "stage": f"pin sweep, 45 arms x seeds {seeds}, CLI, --workers 1",
            "now": _s(sweep1),
            "anchor": f"python -c pass {_s(anchor)}",
            "target": f"< {SWEEP_S} s",
            "ratio": f"{sweep1 / anchor:.0f}x",
            "met": sweep1 < SWEEP_S,
            "note": (
                f"CPU {_s(median('sweep1', 1))}, peak {median('sweep1', 2):.0f} MiB; {common}"
            ),
        },
        {
            "stage": f"pin sweep, 45 arms x seeds {seeds}, CLI, --workers 2",
            "now": _s(sweep2),
            "anchor": f"--workers 1 {_s(sweep1)}",
            "target": "<= --workers 1",
            "ratio": f"{sweep2 / sweep1:.2f}x",
            "met": sweep2 <= sweep1,
            "note": (
                f"CPU of the parent and its reaped workers {_s(median('sweep2', 1))}; the "
                f"tokenizer is built once before the fork; {common}"
            ),
        },
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--json", action="store_true", help="print one JSON list of rows")
    parser.add_argument("--repeats", type=int, default=3, help="rounds of every command")
    parser.add_argument("--seeds", default="0-59", help="the pin sweep's seeds (default 0-59)")
    parser.add_argument(
        "--against", metavar="SRC", help="another checkout's src/, measured side by side"
    )
    args = parser.parse_args()
    rows = measure(max(1, args.repeats), args.seeds, args.against)
    report(rows, args.json)


if __name__ == "__main__":
    main()
