"""Rows that hold a control's request length to the higher arm's: arguments (N32), shape (N34)."""

from __future__ import annotations

from poisson_tasks.pins.holding import Contrast, Outcome, within
from poisson_tasks.pins.row import PinRow
from poisson_tasks.transcript import BAND


def _request_match(contrast: Contrast, row: str) -> Outcome:
    out = Outcome()
    notes = []
    for arm in contrast.controls:
        own = arm.value(row)["request_tokens"]
        want = contrast.level_arm(arm.spec, arm.spec.control or 0).measured[row]["request_tokens"]
        notes.append(f"{arm.id} {own} vs {want}")
        if not within(own, want):
            out.problems.append(
                (
                    [arm.id],
                    f"request {own} tokens; the higher arm's is {want}, more than {BAND} apart",
                )
            )
    out.detail = "; ".join(notes)
    return out


ROWS: tuple[PinRow, ...] = (
    PinRow(
        id="N32",
        name="arguments control's length",
        who=("arguments control",),
        mode="refused",
        holds="the control's request is the higher arm's length, within two tokens",
        measure=lambda facts: {"request_tokens": facts.request_tokens},
        figure=lambda value: value["request_tokens"],
        hold=lambda contrast: _request_match(contrast, "N32"),
    ),
    PinRow(
        id="N34",
        name="shape control's length",
        who=("shape control",),
        mode="refused",
        holds="the control's request is the widest arm's length, within two tokens",
        measure=lambda facts: {"request_tokens": facts.request_tokens},
        figure=lambda value: value["request_tokens"],
        hold=lambda contrast: _request_match(contrast, "N34"),
    ),
)
