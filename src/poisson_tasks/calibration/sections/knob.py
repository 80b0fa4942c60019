"""A knob's section of the card (its levels, how their episodes ended, adjacent levels on each rate
it is read on, the ordering) and the control arms' section. The verdict's words are written here
once: card.md prints them, and the view's comparison table shows the same text.
"""

from __future__ import annotations

from poisson_tasks.calibration.artifact import Artifact, Comparison, KnobTable, Ordering
from poisson_tasks.calibration.comparisons import ordering_reading
from poisson_tasks.calibration.sections.levels import level_columns, level_row, outcome_table
from poisson_tasks.calibration.sections.text import NA, md_table, percent, rate_text, short_arm

__all__ = [
    "CONTROLS_NOTE",
    "CONTROLS_TITLE",
    "VERDICT_TERMS",
    "comparison_cells",
    "comparison_columns",
    "controls_section",
    "knob_section",
    "ordering_words",
    "render_knob",
    "verdict_text",
]


# A verdict's term, as the glossary names it: card.md and the view both print these words.
VERDICT_TERMS: dict[str, str] = {
    "distinguishable": "distinguishable",
    "too_small": "too small for this design to call",
    "left_out": "left out",
}


def verdict_text(comparison: Comparison) -> str:
    """The verdict as the card words it: its term, then why or which way (Markdown)."""
    term = VERDICT_TERMS[comparison.verdict]
    if comparison.verdict == "left_out":
        return f"{term}: {comparison.reason}"
    if comparison.verdict == "too_small":
        return term + (f" ({comparison.reason})" if comparison.reason else "")
    direction = "falls" if (comparison.diff or 0.0) > 0 else "rises"
    return f"{term} (the rate {direction} at `{short_arm(comparison.upper)}`)"


def comparison_columns(confidence: float) -> tuple[str, ...]:
    """The header of `comparison_cells`, with the card's own confidence level."""
    return (
        "pair",
        "difference (lower − upper)",
        f"paired {percent(confidence)} interval",
        "churn",
        "seeds",
        "verdict",
    )


def comparison_cells(comparison: Comparison) -> list[str]:
    """One adjacent pair as the card prints it (Markdown): pair, difference, paired interval,
    churn, seeds, verdict. The view's comparison table shows the same cells."""
    interval = (
        NA
        if comparison.low is None or comparison.high is None
        else f"[{comparison.low:.3f}, {comparison.high:.3f}]"
    )
    return [
        f"`{short_arm(comparison.lower)}` → `{short_arm(comparison.upper)}`",
        rate_text(comparison.diff),
        interval,
        rate_text(comparison.churn),
        str(comparison.pairs_used),
        verdict_text(comparison),
    ]


def ordering_words(ordering: Ordering) -> tuple[str, str]:
    """An ordering's question and its verdict in words; card.md and the view print both."""
    return (
        f"{ordering.rate} pass@1 non-increasing across the levels",
        ordering.verdict.replace("_", " "),
    )


def _ordering(ordering: Ordering) -> str:
    question, verdict = ordering_words(ordering)
    return f"{question.capitalize()}: {verdict} ({ordering_reading(ordering)})."


def knob_section(artifact: Artifact, table: KnobTable) -> list[str]:
    leaky_too = table.read_on == "leaky"  # read on leaky (depth): strict is compared as well
    cells = [artifact.cell(arm) for arm in table.levels]
    title = f"## `{table.knob}`: one row per level (read on {table.read_on} pass@1)"
    out = ["", title, ""]
    out += md_table(
        level_columns(artifact.thresholds.confidence), [level_row(c, leaky_too) for c in cells]
    )
    out += outcome_table(cells, f"### `{table.knob}`: how each level's episodes ended")
    rates = ("leaky", "strict") if leaky_too else ("strict",)
    for rate in rates:
        comps = [c for c in table.comparisons if c.rate == rate]
        out += ["", f"### `{table.knob}`: adjacent levels on {rate} pass@1", ""]
        if not comps:
            out.append("One level only: nothing to compare.")
            continue
        out += md_table(
            comparison_columns(artifact.thresholds.confidence),
            [comparison_cells(c) for c in comps],
        )
    if table.ordering_strict.verdict == "single_level":
        out += [
            "",
            f"Ordering: the card has one level of `{table.knob}`, so there is nothing to order.",
        ]
        return out
    orderings = [table.ordering_strict, table.ordering_leaky]
    order = " ".join(_ordering(o) for o in orderings if o is not None)
    out += ["", f"Ordering, from the point estimates and the adjacent comparisons. {order}"]
    return out


def render_knob(artifact: Artifact, knob: str) -> str:
    """One knob's section of the card (levels, adjacent comparisons, ordering) as markdown."""
    for table in artifact.knobs:
        if table.knob == knob:
            return "\n".join(knob_section(artifact, table)).lstrip("\n") + "\n"
    raise KeyError(f"the card has no knob {knob!r}")


CONTROLS_TITLE = "Control arms"
CONTROLS_NOTE = (
    "Each control arm separates a knob from something that travels with it (history, "
    "block or prompt length). They are not levels, and no comparison or ordering reads them."
)


def controls_section(artifact: Artifact) -> list[str]:
    if not artifact.controls:
        return []
    out = ["", f"## {CONTROLS_TITLE}", "", CONTROLS_NOTE, ""]
    header = level_columns(artifact.thresholds.confidence)
    cells = [artifact.cell(arm) for arm in artifact.controls]
    out += md_table(header, [level_row(cell, False) for cell in cells])
    return out + outcome_table(cells, f"### {CONTROLS_TITLE}: how each arm's episodes ended")
