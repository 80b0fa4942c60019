"""How a card prints a figure: three decimals for a rate, two for seconds, counts as counted, and
the words for a figure that was not measured (`not recorded`) or has nothing to rate (`n/a`).
Every section of card.md prints through these, so a figure reads the same in every table.
"""

from __future__ import annotations

from collections.abc import Sequence

from poisson_tasks.calibration.artifact import RateFigure

__all__ = [
    "FEW_EVENTS_NOTE",
    "NA",
    "NOT_RECORDED",
    "SHOWN_K",
    "interval_text",
    "md_table",
    "num_text",
    "percent",
    "rate_text",
    "secs_text",
    "short_arm",
    "usd_text",
]


NOT_RECORDED = "not recorded"


NA = "n/a"


SHOWN_K = (2, 5)


FEW_EVENTS_NOTE = "few events: interval wide"


def rate_text(value: float | None) -> str:
    return NA if value is None else f"{value:.3f}"


def interval_text(fig: RateFigure | None) -> str:
    if fig is None:
        return NA
    text = f"[{fig.low:.3f}, {fig.high:.3f}]"
    return f"{text} ({FEW_EVENTS_NOTE})" if fig.few_events else text


def percent(confidence: float) -> str:
    """A confidence level as the card prints it: 0.9 -> 90%, 0.975 -> 97.5%."""
    return f"{confidence * 100:g}%"


def num_text(value: float | None, missing: str = NOT_RECORDED) -> str:
    """A count-like figure: an integer prints bare, anything else with one decimal."""
    if value is None:
        return missing
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


def secs_text(seconds: float | None) -> str:
    return NOT_RECORDED if seconds is None else f"{seconds:.2f}"


def usd_text(dollars: float | None, missing: str) -> str:
    return missing if dollars is None else f"${dollars:,.4f}"


def short_arm(arm_id: str) -> str:
    return arm_id.split(":", 1)[1]


def md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines
