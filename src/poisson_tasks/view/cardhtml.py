"""The card to look at: an Artifact as static HTML, plots drawn as inline SVG.

Every figure here is read from the Artifact, the object card.md is rendered from; nothing is
computed again. Fields this page does not lay out by name (a section a later card adds) are shown
by `tree`, which renders any JSON value, so a new field of the Artifact appears without code here.
Every string is escaped: a model's name or a server's words are text, never markup. What card.md
prints too (a pair's cells and columns, the verdict and ordering words, headings, `n/a` and the
three-decimal precision) is imported from calibration/sections, never written here again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from poisson_tasks import supplied
from poisson_tasks.calibration.artifact import Artifact, Cell, Comparison, KnobTable, RateFigure
from poisson_tasks.calibration.comparisons import ordering_reading
from poisson_tasks.calibration.sections.closing import (
    DEPTH_TITLE,
    NOT_CLAIMED_TITLE,
    WHAT_IT_IS_TITLE,
)
from poisson_tasks.calibration.sections.costs import render_costs
from poisson_tasks.calibration.sections.knob import (
    CONTROLS_NOTE,
    CONTROLS_TITLE,
    VERDICT_TERMS,
    comparison_cells,
    comparison_columns,
    ordering_words,
)
from poisson_tasks.calibration.sections.text import NA, rate_text
from poisson_tasks.errors import escape_controls
from poisson_tasks.verifier import OUTCOMES
from poisson_tasks.view.markdown import card_html, defined, inline

__all__ = ["card_sections", "outcome_bar", "plot", "prose", "tree"]

# The Artifact's fields laid out by name below; any other field is shown by `tree`.
_LAID_OUT = frozenset(
    {
        "format",
        "kind",
        "model",
        "stale",
        "installed_generator_hash",
        "provenance",
        "thresholds",
        "cells",
        "knobs",
        "controls",
        "run_totals",
        "no_call_peak",
        "published_cards",
        "statements",
    }
)
_W, _H, _PAD_L, _PAD_R, _PAD_T, _PAD_B = 560, 230, 44, 16, 14, 46


def _e(value: object) -> str:
    """A value as HTML text: one line, escaped, at most 2,000 characters (supplied.html)."""
    return supplied.html(value)


def prose(text: str) -> str:
    """The card's own sentences (Markdown: code spans, bold) as escaped HTML, control characters
    shown as escapes (any supplied value in them is already clipped and Markdown-escaped)."""
    return inline(escape_controls(text))


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def tree(value: Any) -> str:
    """Any JSON value as HTML: objects as key/value tables, lists of objects as tables."""
    if isinstance(value, dict):
        if not value:
            return "<span class=dim>none</span>"
        rows = "".join(f"<tr><th>{_e(k)}</th><td>{tree(v)}</td></tr>" for k, v in value.items())
        return f"<table class=kv>{rows}</table>"
    if isinstance(value, list):
        if not value:
            return "<span class=dim>none</span>"
        if all(isinstance(v, dict) for v in value):
            keys = list(dict.fromkeys(k for v in value for k in v))
            head = "".join(f"<th>{_e(k)}</th>" for k in keys)
            body = "".join(
                "<tr>" + "".join(f"<td>{tree(v.get(k))}</td>" for k in keys) + "</tr>"
                for v in value
            )
            return f"<div class=scroll><table class=grid><tr>{head}</tr>{body}</table></div>"
        return ", ".join(tree(v) for v in value)
    if value is None:
        return "<span class=dim>—</span>"
    return _e(_fmt(value))


def _short(arm: str) -> str:
    return arm.split(":", 1)[1] if ":" in arm else arm


def _y(rate: float) -> float:
    return _PAD_T + (1.0 - rate) * (_H - _PAD_T - _PAD_B)


def _mark(at: float, fig: RateFigure | None, rate: str, arm: str) -> str:
    if fig is None:
        return ""
    mid, lo, hi = _y(fig.pass_at_1), _y(fig.high), _y(fig.low)
    tip = f"{arm}: {rate} pass@1 {fig.pass_at_1:.3f} [{fig.low:.3f}, {fig.high:.3f}]" + (
        " (few events: interval wide)" if fig.few_events else ""
    )
    shape = (
        f'<circle cx="{at:.1f}" cy="{mid:.1f}" r="4.5"/>'
        if rate == "strict"
        else f'<rect x="{at - 4:.1f}" y="{mid - 4:.1f}" width="8" height="8"/>'
    )
    return (
        f'<g class="mark {rate}"><title>{_e(tip)}</title>'
        f'<line x1="{at:.1f}" x2="{at:.1f}" y1="{lo:.1f}" y2="{hi:.1f}"/>'
        f'<line x1="{at - 4:.1f}" x2="{at + 4:.1f}" y1="{lo:.1f}" y2="{lo:.1f}"/>'
        f'<line x1="{at - 4:.1f}" x2="{at + 4:.1f}" y1="{hi:.1f}" y2="{hi:.1f}"/>{shape}</g>'
    )


def plot(cells: Sequence[Cell], title: str, read_on: str | None = None) -> str:
    """Strict (circles) and leaky (squares) pass@1 per level with their intervals; each level is
    a button that opens its episodes."""
    count = max(1, len(cells))
    step = (_W - _PAD_L - _PAD_R) / count
    parts = [
        f'<svg class=plot viewBox="0 0 {_W} {_H}" role="img" aria-label="{_e(title)}">',
        f"<title>{_e(title)}</title>",
    ]
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        height = _y(tick)
        parts.append(
            f'<line class=grid x1="{_PAD_L}" x2="{_W - _PAD_R}" y1="{height:.1f}" y2="{height:.1f}"/>'
            f'<text class=tick x="{_PAD_L - 6}" y="{height + 4:.1f}" text-anchor="end">{tick:g}</text>'
        )
    for index, cell in enumerate(cells):
        at = _PAD_L + step * (index + 0.5)
        parts.append(f'<g class=level data-arm="{_e(cell.arm_id)}" tabindex="0">')
        parts.append(
            f'<rect class=hit x="{at - step / 2 + 2:.1f}" y="{_PAD_T}" width="{step - 4:.1f}" '
            f'height="{_H - _PAD_T - 8:.1f}"/>'
        )
        if cell.withheld is not None or (cell.strict is None and cell.leaky is None):
            parts.append(
                f'<text class=withheld x="{at:.1f}" y="{_y(0.5):.1f}" text-anchor="middle">'
                f"{'withheld' if cell.withheld else 'no figure'}</text>"
            )
        parts.append(_mark(at - 7, cell.strict, "strict", cell.arm_id))
        parts.append(_mark(at + 7, cell.leaky, "leaky", cell.arm_id))
        parts.append(
            f'<text class=xlabel x="{at:.1f}" y="{_H - _PAD_B + 18}" text-anchor="middle">'
            f"{_e(_short(cell.arm_id))}</text></g>"
        )
    legend_y = _H - 10
    parts.append(
        f'<g class=legend><circle class="strict" cx="{_PAD_L + 6}" cy="{legend_y - 4}" r="4"/>'
        f'<text x="{_PAD_L + 14}" y="{legend_y}">strict pass@1</text>'
        f'<rect class="leaky" x="{_PAD_L + 120}" y="{legend_y - 8}" width="8" height="8"/>'
        f'<text x="{_PAD_L + 132}" y="{legend_y}">leaky pass@1</text>'
        + (
            f'<text x="{_W - _PAD_R}" y="{legend_y}" text-anchor="end">read on {_e(read_on)}'
            " pass@1; bars: the card's intervals</text>"
            if read_on
            else ""
        )
        + "</g></svg>"
    )
    return "".join(parts)


def outcome_bar(outcomes: dict[str, int]) -> str:
    """A cell's outcomes (the Artifact's counts) as one stacked bar, in the vocabulary's order."""
    total = sum(outcomes.values())
    if not total:
        return "<span class=dim>no episode</span>"
    parts = []
    for name in OUTCOMES:
        count = outcomes.get(name, 0)
        if count:
            parts.append(
                f'<span class="seg o-{name}" style="flex:{count}" title="{name}: {count}"></span>'
            )
    return f'<span class=bar role="img" aria-label="outcomes">{"".join(parts)}</span>'


def _rate(fig: RateFigure | None) -> str:
    if fig is None:
        return f"<span class=dim>{NA}</span>"
    few = ' <span class=few title="fewer than 15 passes or failures">few events</span>'
    return f"{fig.pass_at_1:.3f} <span class=dim>[{fig.low:.3f}, {fig.high:.3f}]</span>" + (
        few if fig.few_events else ""
    )


def _level_table(cells: Sequence[Cell]) -> str:
    head = (
        f"<tr><th>{defined('level')}</th><th>{defined('episodes')}</th>"
        f"<th>{defined('strict pass@1')} [{defined('interval')}]</th>"
        f"<th>{defined('leaky pass@1')} [{defined('interval')}]</th>"
        f"<th>{defined('overshoot')}</th><th>{defined('outcomes')}</th><th>note</th></tr>"
    )
    rows = []
    for cell in cells:
        note = cell.withheld or ("incomplete" if cell.incomplete else "")
        rows.append(
            f'<tr class=cellrow data-arm="{_e(cell.arm_id)}">'
            f'<td><button class=open data-arm="{_e(cell.arm_id)}">{_e(cell.arm_id)}</button></td>'
            f"<td>{cell.episodes}</td><td>{_rate(cell.strict)}</td><td>{_rate(cell.leaky)}</td>"
            f"<td>{rate_text(cell.overshoot)}</td><td>{outcome_bar(cell.outcomes)}</td>"
            f"<td>{_e(note)}</td></tr>"
        )
    return f"<div class=scroll><table class=grid>{head}{''.join(rows)}</table></div>"


def _comparison_rows(comparisons: Sequence[Comparison], confidence: float) -> str:
    """The adjacent pairs with the card's own columns and cells (sections.knob), beside the rate
    each is read on, the sign test's p and a button that opens the pair side by side."""
    *columns, verdict_column = comparison_columns(confidence)
    labels = ("rate", *columns, "sign test p", verdict_column)
    head = "<tr>" + "".join(f"<th>{defined(label)}</th>" for label in labels) + "<th></th></tr>"
    rows = []
    for cmp in comparisons:
        pair, diff, interval, churn, seeds, verdict = (prose(c) for c in comparison_cells(cmp))
        rows.append(
            f'<tr class="cmp v-{_e(cmp.verdict)}"><td>{_e(cmp.rate)}</td>'
            f"<td>{pair}</td><td>{diff}</td><td>{interval}</td><td>{churn}</td><td>{seeds}</td>"
            f"<td>{rate_text(cmp.sign_p)}</td><td>{defined(VERDICT_TERMS[cmp.verdict], verdict)}</td>"
            f'<td><button class=pair data-pair="{_e(f"{cmp.lower}|{cmp.upper}")}">side by side'
            "</button></td></tr>"
        )
    return f"<div class=scroll><table class=grid>{head}{''.join(rows)}</table></div>"


def _ordering(table: KnobTable) -> str:
    lines = []
    for ordering in (table.ordering_strict, table.ordering_leaky):
        if ordering is None:
            continue
        question, verdict = ordering_words(ordering)
        lines.append(
            f"<li>{_e(question)}: <strong>{_e(verdict)}</strong>"
            + (
                ""
                if ordering.verdict == "single_level"
                else f" <span class=dim>({_e(ordering_reading(ordering))})</span>"
            )
            + "</li>"
        )
    return f"<ul class=ordering>{''.join(lines)}</ul>"


def _knob(artifact: Artifact, table: KnobTable) -> str:
    cells = [artifact.cell(arm) for arm in table.levels]
    title = f"{table.knob}: pass@1 per level"
    read_first = sorted(table.comparisons, key=lambda cmp: cmp.rate != table.read_on)
    return (
        f'<section class=knob id="knob-{_e(table.knob)}"><h2><code>{_e(table.knob)}</code> '
        f"<span class=dim>read on {_e(table.read_on)} pass@1</span></h2>"
        f"{plot(cells, title, table.read_on)}{_level_table(cells)}"
        f"<h3>Adjacent levels</h3>{_comparison_rows(read_first, artifact.thresholds.confidence)}"
        f"{_ordering(table)}</section>"
    )


def _controls(artifact: Artifact) -> str:
    if not artifact.controls:
        return ""
    cells = [artifact.cell(arm) for arm in artifact.controls]
    return (
        f"<section id=controls><h2>{_e(CONTROLS_TITLE)}</h2><p class=dim>{prose(CONTROLS_NOTE)} "
        "“Side by side” shows one beside the level it keeps and the level whose length it adds.</p>"
        f"{plot(cells, 'control arms: pass@1')}{_level_table(cells)}</section>"
    )


def _costs(artifact: Artifact) -> str:
    """The card's cost tables, as card.md prints them: labelled columns, figures as counted."""
    return f"<section id=costs><h2>Costs</h2>{card_html(render_costs(artifact))}</section>"


def _statements(artifact: Artifact) -> str:
    st = artifact.statements
    claims = "".join(f'<li data-key="{_e(c.key)}">{prose(c.text)}</li>' for c in st.does_not_claim)
    depth = f"<h3>{DEPTH_TITLE}</h3><p>{prose(st.depth_note)}</p>" if st.depth_note else ""
    return (
        f"<section id=statements><h2>{WHAT_IT_IS_TITLE}</h2><p>{prose(st.what_it_is)}</p>"
        f"<h2>{NOT_CLAIMED_TITLE}</h2><ul class=claims>{claims}</ul>{depth}</section>"
    )


def _provenance(artifact: Artifact) -> str:
    data = artifact.model_dump(mode="json")
    extra = {k: v for k, v in data.items() if k not in _LAID_OUT}
    more = f"<h2>More from the card</h2>{tree(extra)}" if extra else ""
    return (
        "<section id=provenance><h2>Provenance</h2>"
        f"{tree(data['provenance'])}<h3>Thresholds</h3>{tree(data['thresholds'])}"
        f"<h3>Card</h3>{tree({k: data[k] for k in ('format', 'kind', 'stale', 'installed_generator_hash', 'no_call_peak', 'published_cards')})}"
        f"{more}</section>"
    )


def card_sections(artifact: Artifact) -> str:
    """The card's figures, comparisons, controls, statements, costs and provenance as HTML."""
    knobs = "".join(_knob(artifact, table) for table in artifact.knobs)
    return (
        knobs
        + _controls(artifact)
        + _statements(artifact)
        + _costs(artifact)
        + _provenance(artifact)
    )
