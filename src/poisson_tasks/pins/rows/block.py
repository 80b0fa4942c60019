"""Rows that hold the tool block: its content (N4), its token count (N5, N29), its size (N27)
and where the right tools sit (N28)."""

from __future__ import annotations

import hashlib
from typing import Any

from poisson_tasks.arms import knob_def
from poisson_tasks.bundle import canonical_json
from poisson_tasks.pins.facts import BundleFacts
from poisson_tasks.pins.holding import Contrast, Outcome, each, equal, short, within
from poisson_tasks.pins.row import PinRow
from poisson_tasks.transcript import BAND


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _measure_n4(facts: BundleFacts) -> dict[str, Any]:
    """Digests of the block's canonical JSON and of [names, non-stage schemas], from tool_texts.

    The same digests as bundle.digest() of those lists: canonical JSON of a list is its items'
    canonical JSON joined by commas inside brackets.
    """
    reads = [
        t
        for n, t in zip(facts.names, facts.tool_texts, strict=True)
        if (bd := facts.binding(n)) is None or bd.kind != "stage"
    ]
    names = canonical_json(facts.names).decode()
    return {
        "block": _sha("[" + ",".join(facts.tool_texts) + "]"),
        "names_and_reads": _sha(f"[{names},[{','.join(reads)}]]"),
    }


def _hold_n4(contrast: Contrast) -> Outcome:
    if knob_def(contrast.knob).schema_changes:  # the stage tools' schemas are the knob itself
        return equal(
            contrast, "N4", lambda value: value["names_and_reads"], "block names, order and reads"
        )
    return equal(contrast, "N4", lambda value: value["block"], "tool block")


def _hold_n27(contrast: Contrast) -> Outcome:
    return each(
        contrast,
        "N27",
        lambda arm: (
            None
            if arm.value("N27")["tools"] == arm.spec.level
            else f"{arm.value('N27')['tools']} tools, not {arm.spec.level}"
        ),
        "tools = level",
    )


def _hold_n28(contrast: Contrast) -> Outcome:
    out = equal(contrast, "N28", lambda value: value["right_slots"], "right tools' slots")
    out.problems += each(
        contrast,
        "N28",
        lambda arm: (
            None
            if all(s < 8 for s in arm.value("N28")["right_slots"])
            else f"right tools in slots {arm.value('N28')['right_slots']}, not all among the first eight"
        ),
        "",
    ).problems
    return out


def _hold_n29(contrast: Contrast) -> Outcome:
    out = Outcome(report=True)
    notes = []
    for arm in contrast.controls:
        own = arm.value("N29")
        higher = contrast.level_arm(arm.spec, arm.spec.control or 0).measured["N29"]["block_tokens"]
        extra = higher - own["block_tokens"]
        notes.append(f"{arm.id} filler {own['filler_tokens']} vs extra block {extra}")
        if not within(own["filler_tokens"], extra):
            out.problems.append(
                (
                    [arm.id],
                    f"filler {own['filler_tokens']} tokens; the higher "
                    f"arm's extra block is {extra}, more than {BAND} apart",
                )
            )
    out.detail = "; ".join(notes) or "no control arm: block tokens reported"
    return out


ROWS: tuple[PinRow, ...] = (
    PinRow(
        id="N4",
        name="tool block",
        who=("depth", "faults", "history", "arguments", "spread"),
        mode="refused",
        holds="the tool block (for arguments: names, order and read tools; N30 holds the stage "
        "schemas)",
        measure=_measure_n4,
        figure=lambda value: short(value["block"]),
        hold=_hold_n4,
    ),
    PinRow(
        id="N5",
        name="block tokens",
        who=("distractor",),
        mode="reported",
        holds="the block's token count",
        note="it moves with the distractor level by design, so it is recorded, never refused",
        measure=lambda facts: {"block_tokens": facts.block_tokens},
        figure=lambda value: value["block_tokens"],
        hold=lambda contrast: Outcome(report=True, detail="block tokens by arm"),
    ),
    PinRow(
        id="N27",
        name="block size",
        who=("block",),
        mode="refused",
        holds="the block holds exactly the level's number of tools",
        measure=lambda facts: {"tools": len(facts.names)},
        figure=lambda value: value["tools"],
        hold=_hold_n27,
    ),
    PinRow(
        id="N28",
        name="right tools' slots",
        who=("block",),
        mode="refused",
        holds="the right tools sit in the same slots, all among the first eight",
        measure=lambda facts: {
            "right_slots": [facts.names.index(n) for n in facts.right if n in facts.names]
        },
        figure=lambda value: ",".join(str(s) for s in value["right_slots"]),
        hold=_hold_n28,
    ),
    PinRow(
        id="N29",
        name="block growth and filler",
        who=("block",),
        mode="reported-and-refused",
        holds="reports the block's token count; refuses a control whose filler is not the "
        "higher arm's extra block tokens, within two",
        measure=lambda facts: {
            "block_tokens": facts.block_tokens,
            "filler_tokens": facts.filler_tokens,
        },
        figure=lambda value: value["block_tokens"],
        hold=_hold_n29,
        reports_without_controls=True,
    ),
)
