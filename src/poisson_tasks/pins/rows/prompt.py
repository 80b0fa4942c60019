"""Rows that hold the prompts: the system prompt (N3), the user prompt's template (N6) and the
instruction words inside tool names (N7)."""

from __future__ import annotations

from typing import Any

from poisson_tasks.arms import KNOB_DEFS, KNOBS
from poisson_tasks.bundle import digest
from poisson_tasks.pins import views
from poisson_tasks.pins.facts import BundleFacts
from poisson_tasks.pins.holding import Arm, Contrast, Outcome, each, equal, short
from poisson_tasks.pins.row import PinRow

_FILLER_KNOBS = " or ".join(d.name for d in KNOB_DEFS.values() if d.filler_control)


def _measure_n3(facts: BundleFacts) -> dict[str, Any]:
    fill = facts.bundle.system_filler
    return {
        "base": digest(facts.system_base),
        "filler": bool(fill),
        "filler_at_end": not fill or facts.system_base != facts.bundle.system_prompt,
        "filler_tokens": facts.filler_tokens,
    }


def _hold_n3(contrast: Contrast) -> Outcome:
    out = equal(contrast, "N3", lambda value: value["base"], "system prompt less filler")

    def filler_ok(arm: Arm) -> str | None:
        value = arm.value("N3")
        if not value["filler"]:
            return None
        if arm.spec.control is None or not KNOB_DEFS[arm.spec.knob].filler_control:
            return f"carries a filler; only a {_FILLER_KNOBS} control may"
        return (
            None if value["filler_at_end"] else "its filler is not at the end of the system prompt"
        )

    out.problems += each(contrast, "N3", filler_ok, "").problems
    return out


def _measure_n6(facts: BundleFacts) -> dict[str, Any]:
    parts = facts.bundle.prompt_parts
    try:
        renders = parts.template.format(**parts.slots) == facts.instruction
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


def _hold_n6(contrast: Contrast) -> Outcome:
    out = equal(
        contrast,
        "N6",
        lambda value: (value["template"], value["knob_slots"], value["slot_tokens"]),
        "template, knob slots and slot tokens",
    )
    out.problems += each(
        contrast,
        "N6",
        lambda arm: None if arm.value("N6")["renders"] else "the prompt is not its template filled",
        "",
    ).problems
    return out


def _measure_n7(facts: BundleFacts) -> dict[str, Any]:
    names = "\n".join(facts.names).lower()  # a word never holds "\n", so no match spans two names
    hits = [w for w in views.words(facts.instruction) if w in names]
    return {"words": sorted(hits), "count": len(hits)}


ROWS: tuple[PinRow, ...] = (
    PinRow(
        id="N3",
        name="system prompt",
        who=KNOBS,
        mode="refused",
        holds="the system prompt; only a distractor or block control may append its filler",
        measure=_measure_n3,
        figure=lambda value: (
            short(value["base"]) + (f"+{value['filler_tokens']}" if value["filler"] else "")
        ),
        hold=_hold_n3,
    ),
    PinRow(
        id="N6",
        name="user prompt",
        who=KNOBS,
        mode="refused",
        holds="the user prompt's template, its knob slots and each other slot's token count",
        note="the knob's own slots are left out: depth's goal, arguments' values, shape's goal "
        "lines",
        measure=_measure_n6,
        figure=lambda value: f"{short(value['template'])}/{sum(value['slot_tokens'].values())}",
        hold=_hold_n6,
    ),
    PinRow(
        id="N7",
        name="prompt words in tool names",
        who=KNOBS,
        mode="refused",
        report_only_for=("shape",),
        holds="how many instruction words (4+ characters) occur inside some tool name",
        measure=_measure_n7,
        figure=lambda value: value["count"],
        hold=lambda contrast: equal(
            contrast, "N7", lambda value: value["count"], "instruction words in tool names"
        ),
    ),
)
