"""The level table (one row per arm, the card's own confidence level in its interval columns) and
the outcome table (how each arm's episodes ended), as card.md prints them for a knob or the
control arms.
"""

from __future__ import annotations

from collections.abc import Sequence

from poisson_tasks.calibration.artifact import Cell
from poisson_tasks.calibration.sections.text import (
    NA,
    SHOWN_K,
    interval_text,
    md_table,
    num_text,
    percent,
    rate_text,
    secs_text,
    short_arm,
)
from poisson_tasks.verifier import INSTRUMENT_OUTCOMES, OUTCOMES

__all__ = [
    "LEVEL_COLUMNS",
    "SCORED_OUTCOMES",
    "instrument_text",
    "level_columns",
    "level_row",
    "outcome_columns",
    "outcome_table",
]


def level_columns(confidence: float) -> tuple[str, ...]:
    """The level table's header, with the card's own confidence level in the interval columns."""
    level = percent(confidence)
    return (
        LEVEL_COLUMNS[0],
        LEVEL_COLUMNS[1],
        f"{level} interval",
        LEVEL_COLUMNS[3],
        f"leaky {level} interval",
        *LEVEL_COLUMNS[5:],
    )


LEVEL_COLUMNS = (
    "level",
    "strict pass@1",
    "interval",
    "leaky pass@1",
    "leaky interval",
    "overshoot",
    *(f"strict pass@{k}" for k in SHOWN_K),
    *(f"strict pass^{k}" for k in SHOWN_K),
    "median model calls",
    "median tokens",
    "median episode seconds",
    "min calls",
    "no tool call",
    "stopped short",
    "saturated",
    "instrument",
    "incomplete",
)


def _pass_at(cell: Cell, attempts: int) -> str:
    for figure in cell.pass_at_k:
        if figure.attempts == attempts:
            return rate_text(figure.value)
    return NA


def _pass_hat(cell: Cell, attempts: int) -> str:
    for figure in cell.pass_hat_k:
        if figure.attempts == attempts:
            return rate_text(figure.value)
    return NA


def _saturated(cell: Cell, leaky_too: bool) -> str:
    if cell.saturated_strict is None:
        return NA
    strict = "yes" if cell.saturated_strict else "no"
    if not leaky_too:
        return strict
    return f"strict {strict}, leaky {'yes' if cell.saturated_leaky else 'no'}"


def instrument_text(cell: Cell) -> str:
    instrument = cell.instrument
    return "0" if instrument.count == 0 else f"{instrument.count} ({rate_text(instrument.rate)})"


def _published_row(cell: Cell, leaky_too: bool) -> list[str]:
    return [
        f"`{short_arm(cell.arm_id)}`",
        rate_text(cell.strict.pass_at_1 if cell.strict else None),
        interval_text(cell.strict),
        rate_text(cell.leaky.pass_at_1 if cell.leaky else None),
        interval_text(cell.leaky),
        rate_text(cell.overshoot),
        *(_pass_at(cell, k) for k in SHOWN_K),
        *(_pass_hat(cell, k) for k in SHOWN_K),
        num_text(cell.median_model_calls, NA),
        num_text(cell.median_tokens),
        secs_text(cell.median_episode_s),
        str(cell.min_calls),
        rate_text(cell.no_tool_call),
        rate_text(cell.stopped_short),
        _saturated(cell, leaky_too),
        instrument_text(cell),
        "yes" if cell.incomplete else "no",
    ]


def _withheld_row(cell: Cell) -> list[str]:
    """A withheld cell's row: its counts stay, every figure reads withheld."""
    row = ["withheld"] * len(LEVEL_COLUMNS)
    row[0] = f"`{short_arm(cell.arm_id)}`"
    row[LEVEL_COLUMNS.index("min calls")] = str(cell.min_calls)
    row[LEVEL_COLUMNS.index("instrument")] = instrument_text(cell)
    row[LEVEL_COLUMNS.index("incomplete")] = "yes" if cell.incomplete else "no"
    return row


def level_row(cell: Cell, leaky_too: bool) -> list[str]:
    return _published_row(cell, leaky_too) if cell.published else _withheld_row(cell)


# The scored outcomes, best first: the verifier's closed vocabulary in reverse priority order.

SCORED_OUTCOMES: tuple[str, ...] = tuple(
    o for o in reversed(OUTCOMES) if o not in INSTRUMENT_OUTCOMES
)


def outcome_columns() -> tuple[str, ...]:
    """The outcome table's header: the scored outcomes, then no tool call and the instrument."""
    return ("level", "scored", *SCORED_OUTCOMES, "no tool call", "instrument failures")


def _clauses(cell: Cell) -> str:
    count = cell.outcomes.get("malformed_call", 0)
    if not count:
        return "0"
    clauses = ", ".join(
        f"clause {c} {n}" if c.isdigit() else f"{c} {n}" for c, n in cell.malformed_clauses.items()
    )
    return f"{count} ({clauses})"


def _outcome_row(cell: Cell, label: str) -> list[str]:
    if not cell.published:
        row = ["withheld"] * len(outcome_columns())
        row[0], row[-1] = label, _failures(cell)
        return row
    cells = [
        _clauses(cell) if outcome == "malformed_call" else str(cell.outcomes.get(outcome, 0))
        for outcome in SCORED_OUTCOMES
    ]
    return [label, str(cell.scored), *cells, _no_calls(cell), _failures(cell)]


def _no_calls(cell: Cell) -> str:
    calls = cell.no_calls
    if not calls.as_text:
        return str(calls.episodes)
    dialects = ", ".join(f"{d} {n}" for d, n in calls.dialects.items())
    return f"{calls.episodes} ({calls.as_text} wrote a call as text: {dialects})"


def _failures(cell: Cell) -> str:
    instrument = cell.instrument
    if not instrument.count:
        return "0"
    return (
        f"{instrument.count} ("
        + ", ".join(f"{o} {n}" for o, n in instrument.by_outcome.items())
        + ")"
    )


def outcome_table(cells: Sequence[Cell], title: str) -> list[str]:
    """How each level's episodes ended: how a level fails, not only how often."""
    rows = [
        _outcome_row(c, f"`{c.arm_id}`" if c.control else f"`{short_arm(c.arm_id)}`") for c in cells
    ]
    intro = (
        "Scored episodes by outcome (malformed calls by the format clause they broke); no tool "
        "call counts the scored episodes that made none, whatever their outcome; instrument "
        "failures are out of every denominator."
    )
    return ["", title, "", intro, "", *md_table(outcome_columns(), rows)]
