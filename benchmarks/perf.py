"""Issue 15's performance table in one run: every `benchmarks/perf_*.py` stage, its target and anchor.

Each stage script, run with `--json`, measures its rows side by side with their anchors and prints one
JSON list of rows (stage, now, anchor, target, ratio, met, note). This driver runs them one after the
other in fresh processes, prints one table and, with `--write`, replaces the "Performance (issue 15)"
section of `benchmarks/RESULTS.md` with that table, the command, the date and the machine's load.

    .venv/bin/python benchmarks/perf.py            # print the table
    .venv/bin/python benchmarks/perf.py --write    # and regenerate RESULTS.md's section
    .venv/bin/python benchmarks/perf.py --only card,startup
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
from pathlib import Path
from typing import TypedDict

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "RESULTS.md"
TITLE = "## Performance (issue 15)"
COLUMNS = ("stage", "now", "anchor", "target", "ratio", "met", "note")


class Row(TypedDict):
    """One measured row as a stage script prints it."""

    stage: str
    now: str
    anchor: str
    target: str
    ratio: str
    met: bool
    note: str


def stage_scripts(only: set[str] | None) -> list[Path]:
    """The stage scripts, in name order; `only` keeps those named perf_<name>.py."""
    scripts = sorted(HERE.glob("perf_*.py"))
    if only is not None:
        scripts = [path for path in scripts if path.stem.removeprefix("perf_") in only]
    return scripts


def run_stage(script: Path) -> tuple[list[Row], float, str]:
    """Run one stage script in a fresh process; its rows, its wall seconds and any failure line."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(script), "--json"], capture_output=True, text=True, check=False
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        return [], seconds, f"{script.name} exited {done.returncode}: {tail}"
    try:
        rows = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError) as exc:
        return [], seconds, f"{script.name} printed no JSON row list ({exc})"
    missing = [key for row in rows for key in COLUMNS if key not in row]
    if missing:
        return [], seconds, f"{script.name} rows lack {sorted(set(missing))}"
    return rows, seconds, ""


def table(rows: list[Row]) -> str:
    """The rows as a Markdown table, "met" written out."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in rows:
        cells = [str(row[key]) for key in COLUMNS]  # type: ignore[literal-required]
        cells[COLUMNS.index("met")] = "met" if row["met"] else "**not met**"
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines)


def section(rows: list[Row], failures: list[str], argv: list[str]) -> str:
    """RESULTS.md's section: the command, when and where it ran, the table, any stage that failed."""
    load = os.getloadavg()
    met = sum(row["met"] for row in rows)
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts = [
        TITLE,
        "",
        "`" + " ".join(["python benchmarks/perf.py", *argv]) + "`"
        f" — {when}; {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"load average at the end {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} (1 / 5 / 15 min). "
        "Each row's figure and its anchor were measured side by side in the same stage run. "
        f"**{met} of {len(rows)} targets met.**",
        "",
        table(rows),
    ]
    if failures:
        parts += ["", "Stages that did not report:", *[f"- {line}" for line in failures]]
    return "\n".join(parts) + "\n"


def write_section(text: str, results: Path = RESULTS) -> None:
    """Replace (or append) the Performance section of RESULTS.md, leaving the others as they are."""
    current = results.read_text(encoding="utf-8")
    start = current.find(TITLE)
    if start < 0:
        updated = current.rstrip("\n") + "\n\n" + text
    else:
        following = current.find("\n## ", start + len(TITLE))
        rest = current[following + 1 :] if following >= 0 else ""
        updated = current[:start] + text + ("\n" + rest if rest else "")
    results.write_text(updated, encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="regenerate RESULTS.md's section")
    parser.add_argument("--only", help="comma-separated stage names (perf_<name>.py)")
    args = parser.parse_args()
    only = set(args.only.split(",")) if args.only else None
    scripts = stage_scripts(only)
    if not scripts:
        print("perf: no benchmarks/perf_*.py stage matches; check --only", file=sys.stderr)
        return 2
    rows: list[Row] = []
    failures: list[str] = []
    for script in scripts:
        stage_rows, seconds, failure = run_stage(script)
        print(
            f"{script.name}: {len(stage_rows)} rows in {seconds:.1f} s {failure}", file=sys.stderr
        )
        rows += stage_rows
        if failure:
            failures.append(failure)
    print(table(rows))
    for line in failures:
        print(f"not reported: {line}")
    if args.write:
        write_section(section(rows, failures, sys.argv[1:]))
        print(f"wrote {RESULTS.relative_to(HERE.parent)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
