"""Rows that hold the tool block: its content (N4), its token count (N5, N29), its size (N27)
and where the right tools sit (N28)."""

from __future__ import annotations

import hashlib
from typing import Any

from poisson_tasks.bundle import canonical_json
from poisson_tasks.pins.facts import BundleFacts
from poisson_tasks.pins.holding import Contrast, Outcome, each, equal, short, within
from poisson_tasks.pins.row import PinRow
from poisson_tasks.transcript import BAND


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _measure_n4(x: BundleFacts) -> dict[str, Any]:
    """Digests of the block's canonical JSON and of [names, non-stage schemas], from tool_texts.

    The same digests as bundle.digest() of those lists: canonical JSON of a list is its items'
    canonical JSON joined by commas inside brackets.
    """
    reads = [
        t
        for n, t in zip(x.names, x.tool_texts, strict=True)
        if (bd := x.binding(n)) is None or bd.kind != "stage"
    ]
    names = canonical_json(x.names).decode()
    return {
        "block": _sha("[" + ",".join(x.tool_texts) + "]"),
        "names_and_reads": _sha(f"[{names},[{','.join(reads)}]]"),
    }


def _hold_n4(c: Contrast) -> Outcome:
    if c.knob == "arguments":
        return equal(c, "N4", lambda v: v["names_and_reads"], "block names, order and reads")
    return equal(c, "N4", lambda v: v["block"], "tool block")


def _hold_n27(c: Contrast) -> Outcome:
    return each(
        c,
        "N27",
        lambda a: (
            None
            if a.v("N27")["tools"] == a.spec.level
            else f"{a.v('N27')['tools']} tools, not {a.spec.level}"
        ),
        "tools = level",
    )


def _hold_n28(c: Contrast) -> Outcome:
    out = equal(c, "N28", lambda v: v["right_slots"], "right tools' slots")
    out.problems += each(
        c,
        "N28",
        lambda a: (
            None
            if all(s < 8 for s in a.v("N28")["right_slots"])
            else f"right tools in slots {a.v('N28')['right_slots']}, not all among the first eight"
        ),
        "",
    ).problems
    return out


def _hold_n29(c: Contrast) -> Outcome:
    out = Outcome(report=True)
    notes = []
    for a in c.controls:
        own = a.v("N29")
        higher = c.level_arm(a.spec, a.spec.control or 0).measured["N29"]["block_tokens"]
        extra = higher - own["block_tokens"]
        notes.append(f"{a.id} filler {own['filler_tokens']} vs extra block {extra}")
        if not within(own["filler_tokens"], extra):
            out.problems.append(
                (
                    [a.id],
                    f"filler {own['filler_tokens']} tokens; the higher "
                    f"arm's extra block is {extra}, more than {BAND} apart",
                )
            )
    out.detail = "; ".join(notes) or "no control arm: block tokens reported"
    return out


ROWS: tuple[PinRow, ...] = (
    PinRow(
        id="N4",
        who=("depth", "faults", "history", "arguments", "spread"),
        mode="refused",
        holds="the tool block (for arguments: names, order and read tools; N30 holds the stage "
        "schemas)",
        measure=_measure_n4,
        figure=lambda v: short(v["block"]),
        hold=_hold_n4,
    ),
    PinRow(
        id="N5",
        who=("distractor",),
        mode="reported",
        holds="the block's token count",
        note="it moves with the distractor level by design, so it is recorded, never refused",
        measure=lambda x: {"block_tokens": x.block_tokens},
        figure=lambda v: v["block_tokens"],
        hold=lambda c: Outcome(report=True, detail="block tokens by arm"),
    ),
    PinRow(
        id="N27",
        who=("block",),
        mode="refused",
        holds="the block holds exactly the level's number of tools",
        measure=lambda x: {"tools": len(x.names)},
        figure=lambda v: v["tools"],
        hold=_hold_n27,
    ),
    PinRow(
        id="N28",
        who=("block",),
        mode="refused",
        holds="the right tools sit in the same slots, all among the first eight",
        measure=lambda x: {"right_slots": [x.names.index(n) for n in x.right if n in x.names]},
        figure=lambda v: ",".join(str(s) for s in v["right_slots"]),
        hold=_hold_n28,
    ),
    PinRow(
        id="N29",
        who=("block",),
        mode="reported-and-refused",
        holds="reports the block's token count; refuses a control whose filler is not the "
        "higher arm's extra block tokens, within two",
        measure=lambda x: {"block_tokens": x.block_tokens, "filler_tokens": x.filler_tokens},
        figure=lambda v: v["block_tokens"],
        hold=_hold_n29,
        reports_without_controls=True,
    ),
)
