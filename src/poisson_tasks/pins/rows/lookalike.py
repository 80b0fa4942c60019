"""Rows that hold the similarity knob's lookalikes: how many lookalike tools (N19), the block's
token count (N20), the lookalike numbers (N21) and the right tools (N22)."""

from __future__ import annotations

from typing import Any

from poisson_tasks.bundle import digest
from poisson_tasks.pins import views
from poisson_tasks.pins.facts import BundleFacts
from poisson_tasks.pins.holding import Arm, Contrast, Outcome, each, equal, short
from poisson_tasks.pins.row import PinRow

LOOKALIKE_TOOLS = 12
LOOKALIKE_LEDGERS = 6


def _lookalike_ledgers(x: BundleFacts) -> tuple[int, list[str]]:
    """(lookalike stage tools, their distinct ledgers in block order): same class, other ledger."""
    goal, cls = views.goal_ledger(x.b), views.goal_class(x.b)
    tools, ledgers = 0, []
    for n in x.names:
        bd = x.binding(n)
        if bd is None or bd.kind != "stage" or bd.ledger == goal:
            continue
        if bd.ledger.split("-")[0] == cls:
            tools += 1
            if bd.ledger not in ledgers:
                ledgers.append(bd.ledger)
    return tools, ledgers


def _number(ledger: str) -> str:
    return ledger.split("-", 1)[1] if "-" in ledger else ""


def _hold_n19(c: Contrast) -> Outcome:
    return each(
        c,
        "N19",
        lambda a: (
            None
            if a.v("N19")["lookalike_tools"] == LOOKALIKE_TOOLS
            else f"{a.v('N19')['lookalike_tools']} lookalike tools, not {LOOKALIKE_TOOLS}"
        ),
        f"{LOOKALIKE_TOOLS} lookalike tools",
    )


def _measure_n21(x: BundleFacts) -> dict[str, Any]:
    target = _number(views.goal_ledger(x.b))
    _, ledgers = _lookalike_ledgers(x)
    looks = [_number(led) for led in ledgers]
    return {
        "target": target,
        "lookalikes": [[n, sum(a == b for a, b in zip(n, target, strict=False))] for n in looks],
    }


def _hold_n21(c: Contrast) -> Outcome:
    def test(a: Arm) -> str | None:
        v = a.v("N21")
        target, looks = v["target"], v["lookalikes"]
        numbers = [n for n, _ in looks]
        if len(looks) != LOOKALIKE_LEDGERS or len(set(numbers)) != LOOKALIKE_LEDGERS:
            return f"{len(set(numbers))} distinct lookalike ledgers, not {LOOKALIKE_LEDGERS}"
        for n, shared in looks:
            if len(n) != len(target) or not n.isdigit() or n.startswith("0") or n == target:
                return f"lookalike number {n!r} is not a four-digit number apart from {target}"
            if shared != a.spec.level:
                return f"lookalike {n} shares {shared} digits with {target}, not {a.spec.level}"
        return None

    return each(c, "N21", test, "six lookalikes, each sharing the level's digits")


def _measure_n22(x: BundleFacts) -> dict[str, Any]:
    return {"names": x.right[:2], "schemas": digest([x.schema(n) for n in x.right[:2]])}


ROWS: tuple[PinRow, ...] = (
    PinRow(
        id="N19",
        who=("similarity",),
        mode="refused",
        holds="twelve lookalike stage tools in the block",
        measure=lambda x: {"lookalike_tools": _lookalike_ledgers(x)[0]},
        figure=lambda v: v["lookalike_tools"],
        hold=_hold_n19,
    ),
    PinRow(
        id="N20",
        who=("similarity",),
        mode="refused",
        holds="the block's token count",
        measure=lambda x: {"block_tokens": x.block_tokens},
        figure=lambda v: v["block_tokens"],
        hold=lambda c: equal(c, "N20", lambda v: v["block_tokens"], "block tokens"),
    ),
    PinRow(
        id="N21",
        who=("similarity",),
        mode="refused",
        holds="six distinct lookalike numbers, each sharing exactly the level's digits in place "
        "with the target's, none starting with 0",
        measure=_measure_n21,
        figure=lambda v: ",".join(str(s) for _, s in v["lookalikes"]) or "none",
        hold=_hold_n21,
    ),
    PinRow(
        id="N22",
        who=("similarity",),
        mode="refused",
        holds="the two right tools' names, descriptions and parameters",
        measure=_measure_n22,
        figure=lambda v: short(v["schemas"]),
        hold=lambda c: equal(c, "N22", lambda v: v, "right tools' schemas"),
    ),
)
