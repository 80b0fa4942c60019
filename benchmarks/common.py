"""What every benchmark shares: the one table format, and how a script reports its rows (benchmarks/
perf.py, the one driver, writes them into RESULTS.md). The pre-registration that tests and benchmarks both write
against the reference endpoint is tests/synthetic_runs.reference_preregistration (on the path here).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TypedDict, TypeVar

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "RESULTS.md"
sys.path.insert(0, str(ROOT / "tests"))  # synthetic_runs: the helpers tests and benchmarks share

ROW_COLUMNS = ("stage", "now", "anchor", "target", "ratio", "met", "note")
Measured = TypeVar("Measured")


class Row(TypedDict):
    """One measured row of a stage with a target: its figure beside its anchor."""

    stage: str
    now: str
    anchor: str
    target: str
    ratio: str
    met: bool
    note: str


def markdown_head(columns: Sequence[str]) -> str:
    """The one table format's first two lines: the header and its rule."""
    return "| " + " | ".join(columns) + " |\n" + "|" + "---|" * len(columns)


def markdown_line(row: Sequence[object]) -> str:
    """One row of the one table format ('|' in a cell escaped); a long grid prints these as it goes."""
    return "| " + " | ".join(str(cell).replace("|", "\\|") for cell in row) + " |"


def markdown_table(columns: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """The one table format of RESULTS.md: a header, its rule, one line per row."""
    return "\n".join([markdown_head(columns), *(markdown_line(row) for row in rows)])


def rows_table(rows: Iterable[Row]) -> str:
    """Rows with targets as one table, "met" written out."""
    return markdown_table(
        ROW_COLUMNS,
        (
            [
                row[key] if key != "met" else ("met" if row["met"] else "**not met**")  # type: ignore[literal-required]
                for key in ROW_COLUMNS
            ]
            for row in rows
        ),
    )


def report(rows: list[Row], as_json: bool) -> None:
    """How a stage script ends: one JSON list of rows for the driver, else the table and the
    command that made it."""
    if as_json:
        print(json.dumps(rows))
        return
    print(rows_table(rows))
    print(command_line())


def command_line() -> str:
    """The command as run, for the line under a table."""
    return f"command: {' '.join([Path(sys.executable).name, *sys.argv])}"


def interleaved(
    commands: Mapping[str, list[str]], repeats: int, run: Callable[[list[str]], Measured]
) -> tuple[dict[str, list[Measured]], list[float]]:
    """Every command run `repeats` times, interleaved (the order reversed every other round, so
    a load that drifts falls on each alike): each command's results, and the one-minute load
    average before the first round and after each."""
    runs: dict[str, list[Measured]] = {name: [] for name in commands}
    loads = [os.getloadavg()[0]]
    for repeat in range(repeats):
        order = list(commands) if repeat % 2 == 0 else list(reversed(commands))
        for name in order:
            runs[name].append(run(commands[name]))
        loads.append(os.getloadavg()[0])
    return runs, loads


def cli() -> list[str]:
    """The `poisson-tasks` command as a user starts it: the script beside this interpreter."""
    script = Path(sys.executable).parent / "poisson-tasks"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "poisson_tasks"]


def user_env() -> dict[str, str]:
    """This environment as a user's process sees it: their interpreter keeps its bytecode caches,
    which PYTHONDONTWRITEBYTECODE (set on this kind of machine) would stop."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env
