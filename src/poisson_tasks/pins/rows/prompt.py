"""Rows that hold the prompts: the system prompt (N3), the user prompt's template (N6) and the
instruction words inside tool names (N7)."""

from __future__ import annotations

from typing import Any

from poisson_tasks.arms import KNOBS
from poisson_tasks.bundle import digest
from poisson_tasks.pins import views
from poisson_tasks.pins.facts import BundleFacts
from poisson_tasks.pins.holding import Arm, Contrast, Outcome, each, equal, short
from poisson_tasks.pins.row import PinRow

_FILLER_KNOBS = ("distractor", "block")


def _measure_n3(x: BundleFacts) -> dict[str, Any]:
    fill = x.b.system_filler
    return {
        "base": digest(x.system_base),
        "filler": bool(fill),
        "filler_at_end": not fill or x.system_base != x.b.system_prompt,
        "filler_tokens": x.filler_tokens,
    }


def _hold_n3(c: Contrast) -> Outcome:
    out = equal(c, "N3", lambda v: v["base"], "system prompt less filler")

    def filler_ok(a: Arm) -> str | None:
        v = a.v("N3")
        if not v["filler"]:
            return None
        if a.spec.control is None or a.spec.knob not in _FILLER_KNOBS:
            return "carries a filler; only a distractor or block control may"
        return None if v["filler_at_end"] else "its filler is not at the end of the system prompt"

    out.problems += each(c, "N3", filler_ok, "").problems
    return out


def _measure_n6(x: BundleFacts) -> dict[str, Any]:
    parts = x.b.prompt_parts
    try:
        renders = parts.template.format(**parts.slots) == x.instruction
    except (KeyError, IndexError, ValueError):
        renders = False
    return {
        "template": digest(parts.template),
        "knob_slots": sorted(parts.knob_slots),
        "slot_tokens": {
            k: views.tokens(v) for k, v in sorted(parts.slots.items()) if k not in parts.knob_slots
        },
        "renders": renders,
    }


def _hold_n6(c: Contrast) -> Outcome:
    out = equal(
        c,
        "N6",
        lambda v: (v["template"], v["knob_slots"], v["slot_tokens"]),
        "template, knob slots and slot tokens",
    )
    out.problems += each(
        c,
        "N6",
        lambda a: None if a.v("N6")["renders"] else "the prompt is not its template filled",
        "",
    ).problems
    return out


def _measure_n7(x: BundleFacts) -> dict[str, Any]:
    names = "\n".join(x.names).lower()  # a word never holds "\n", so no match spans two names
    hits = [w for w in views.words(x.instruction) if w in names]
    return {"words": sorted(hits), "count": len(hits)}


ROWS: tuple[PinRow, ...] = (
    PinRow(
        id="N3",
        who=KNOBS,
        mode="refused",
        holds="the system prompt; only a distractor or block control may append its filler",
        measure=_measure_n3,
        figure=lambda v: short(v["base"]) + (f"+{v['filler_tokens']}" if v["filler"] else ""),
        hold=_hold_n3,
    ),
    PinRow(
        id="N6",
        who=KNOBS,
        mode="refused",
        holds="the user prompt's template, its knob slots and each other slot's token count",
        note="the knob's own slots are left out: depth's goal, arguments' values, shape's goal "
        "lines",
        measure=_measure_n6,
        figure=lambda v: f"{short(v['template'])}/{sum(v['slot_tokens'].values())}",
        hold=_hold_n6,
    ),
    PinRow(
        id="N7",
        who=KNOBS,
        mode="refused",
        report_only_for=("shape",),
        holds="how many instruction words (4+ characters) occur inside some tool name",
        measure=_measure_n7,
        figure=lambda v: v["count"],
        hold=lambda c: equal(c, "N7", lambda v: v["count"], "instruction words in tool names"),
    ),
)
