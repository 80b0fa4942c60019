"""Rows that hold a control's request length to the higher arm's: arguments (N32), shape (N34)."""

from __future__ import annotations

from poisson_tasks.pins.holding import Contrast, Outcome, within
from poisson_tasks.pins.row import PinRow
from poisson_tasks.transcript import BAND


def _request_match(c: Contrast, row: str) -> Outcome:
    out = Outcome()
    notes = []
    for a in c.controls:
        own = a.v(row)["request_tokens"]
        want = c.level_arm(a.spec, a.spec.control or 0).measured[row]["request_tokens"]
        notes.append(f"{a.id} {own} vs {want}")
        if not within(own, want):
            out.problems.append(
                (
                    [a.id],
                    f"request {own} tokens; the higher arm's is {want}, more than {BAND} apart",
                )
            )
    out.detail = "; ".join(notes)
    return out


ROWS: tuple[PinRow, ...] = (
    PinRow(
        id="N32",
        who=("arguments control",),
        mode="refused",
        holds="the control's request is the higher arm's length, within two tokens",
        measure=lambda x: {"request_tokens": x.request_tokens},
        figure=lambda v: v["request_tokens"],
        hold=lambda c: _request_match(c, "N32"),
    ),
    PinRow(
        id="N34",
        who=("shape control",),
        mode="refused",
        holds="the control's request is the widest arm's length, within two tokens",
        measure=lambda x: {"request_tokens": x.request_tokens},
        figure=lambda v: v["request_tokens"],
        hold=lambda c: _request_match(c, "N34"),
    ),
)
