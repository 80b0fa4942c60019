"""The one benchmark driver: every measured block of benchmarks/RESULTS.md, by name, with its command.

Each block of RESULTS.md that a script measures sits between two markers,
`<!-- measured: NAME -->` and `<!-- /measured: NAME -->`; the prose around it (what the figures
show, on what machine) is written by hand and left alone. This driver runs a block's command in a
fresh process and puts what it prints between its markers. A block with a target is the
"Performance (issue 15)" kind: its stage scripts print JSON rows (`--json`) and the driver writes
one table of them with the command, the date and the machine's load. Every table, in every block,
is common.markdown_table's one format.

    python benchmarks/perf.py --list                 # every block: its section and its command
    python benchmarks/perf.py --only cards           # measure one block and print it
    python benchmarks/perf.py --write                # measure every block; rewrite RESULTS.md's
    python benchmarks/perf.py --only view --write    # ... or only the blocks named
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from common import HERE, RESULTS, ROOT, Row, command_line, rows_table


@dataclass(frozen=True)
class Block:
    """One measured block: the section it stands in, and either a script's own output or the rows
    of stage scripts (each run with --json) as one table of targets."""

    section: str
    script: str = ""
    arguments: tuple[str, ...] = ()
    stages: tuple[str, ...] = ()
    python: str = ""  # an interpreter other than this one (the verifiers extra's venv)

    def commands(self) -> list[list[str]]:
        python = str(ROOT / self.python) if self.python else sys.executable
        if self.stages:
            return [[python, str(HERE / f"perf_{stage}.py"), "--json"] for stage in self.stages]
        return [[python, str(HERE / self.script), *self.arguments]]


BLOCKS: dict[str, Block] = {
    "generation": Block("## Generation and verification (issue 2)", "bench_generate.py"),
    "pins": Block("## Pin ledger sweep (issue 3)", "bench_generate.py", ("--pins",)),
    "runner": Block("## Runner against the reference endpoint (issue 4)", "bench_runner.py"),
    "concurrency": Block(
        "## Runner against the reference endpoint (issue 4)",
        "bench_concurrency.py",
        ("20", "64", "16", "8", "4"),
    ),
    "cards": Block("## Cards (issue 5)", "bench_card.py"),
    "coverage": Block(
        "## Interval coverage of the card's own intervals (issue 9)",
        "coverage_sim.py",
        ("--runs", "2000"),
    ),
    "harnesses": Block(
        "## The two harnesses side by side (issue 13)",
        "bench_harness.py",
        ("--tasks", "10", "--concurrency", "8"),
        python=".venv-vf/bin/python",
    ),
    "performance": Block(
        "## Performance (issue 15)", stages=("card", "generate", "runner", "startup")
    ),
    "view": Block("## View report (issue 23)", stages=("view",)),
    "published-tasks": Block(
        "## Published cards' tasks regenerated (issue 32)", "bench_published_tasks.py"
    ),
    "refusals": Block("## Hostile input refused fast (issue 33)", stages=("refusal",)),
    "mainjob": Block("## The main job (issue 34)", stages=("mainjob",)),
    "reference-http": Block(
        "## What a server sends, read within bounds (issue 33)", "bench_reference_http.py"
    ),
    "received": Block("## What a server sends, read within bounds (issue 33)", "bench_received.py"),
    "pacing": Block("## Pacing against a rate-limited endpoint (issue 37)", "bench_pacing.py"),
}


def begin(name: str) -> str:
    return f"<!-- measured: {name} -->"


def end(name: str) -> str:
    return f"<!-- /measured: {name} -->"


def run_stage(command: list[str]) -> tuple[list[Row], str]:
    """Run one stage script in a fresh process; its rows, or a line saying why there are none."""
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    script = Path(command[1]).name
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        return [], f"{script} exited {done.returncode}: {tail}"
    try:
        rows: list[Row] = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError) as exc:
        return [], f"{script} printed no JSON row list ({exc})"
    return rows, ""


def targets_text(rows: list[Row], failures: list[str]) -> str:
    """A block of targets: the command, when and where it ran, the table, any stage that failed."""
    load = os.getloadavg()
    met = sum(row["met"] for row in rows)
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts = [
        f"`python benchmarks/perf.py {' '.join(sys.argv[1:])}`"
        f" — {when}; {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"load average at the end {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} (1 / 5 / 15 min). "
        "Each row's figure and its anchor were measured side by side in the same stage run. "
        f"**{met} of {len(rows)} targets met.**",
        "",
        rows_table(rows),
    ]
    if failures:
        parts += ["", "Stages that did not report:", *[f"- {line}" for line in failures]]
    return "\n".join(parts)


def measure(name: str) -> tuple[str, bool]:
    """The block's new text, and whether every command in it reported."""
    block = BLOCKS[name]
    if block.python and not (ROOT / block.python).exists():
        return f"{name}: needs {block.python} (scripts/ci/verifiers-eval makes it)", False
    started = time.perf_counter()
    if block.stages:
        rows: list[Row] = []
        failures: list[str] = []
        for command in block.commands():
            stage_rows, failure = run_stage(command)
            rows += stage_rows
            failures += [failure] if failure else []
        text, ok = targets_text(rows, failures), not failures
    else:
        (command,) = block.commands()
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        ok = done.returncode == 0
        text = done.stdout.rstrip("\n") if ok else (done.stderr.strip().splitlines() or [""])[-1]
    print(f"{name}: {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return text, ok


def replace_block(current: str, name: str, text: str) -> str:
    """RESULTS.md with the block `name` holding `text`; refused when its markers are missing."""
    head, tail = begin(name), end(name)
    start, stop = current.find(head), current.find(tail)
    if start < 0 or stop < start:
        raise SystemExit(
            f"error: RESULTS.md has no block {name} ({head} ... {tail}); add the two markers "
            f"inside its section, {BLOCKS[name].section!r}"
        )
    return current[: start + len(head)] + "\n" + text + "\n" + current[stop:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated block names (--list shows them)")
    parser.add_argument("--list", action="store_true", help="list every block and its command")
    parser.add_argument("--write", action="store_true", help="rewrite the blocks in RESULTS.md")
    parser.add_argument("--results", type=Path, default=RESULTS, help="the file --write rewrites")
    args = parser.parse_args()
    names = list(BLOCKS) if args.only is None else args.only.split(",")
    unknown = [name for name in names if name not in BLOCKS]
    if unknown:
        print(f"error: no block {', '.join(unknown)}; blocks: {', '.join(BLOCKS)}", file=sys.stderr)
        return 2
    if args.list:
        for name in names:
            block = BLOCKS[name]
            commands = "; ".join(
                " ".join([Path(part).name if i < 2 else part for i, part in enumerate(command)])
                for command in block.commands()
            )
            print(f"{name}\t{block.section.removeprefix('## ')}\t{commands}")
        return 0
    measured = {name: measure(name) for name in names}
    for name, (text, ok) in measured.items():
        print(f"{begin(name)}\n{text}\n{end(name)}" if ok else f"not measured: {text}")
    if args.write:
        current = args.results.read_text(encoding="utf-8")
        for name, (text, ok) in measured.items():
            if ok:
                current = replace_block(current, name, text)
        args.results.write_text(current, encoding="utf-8")
        print(f"wrote {args.results}", file=sys.stderr)
    print(command_line(), file=sys.stderr)
    return 0 if all(ok for _, ok in measured.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
