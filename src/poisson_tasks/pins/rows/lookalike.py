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


def _lookalike_ledgers(facts: BundleFacts) -> tuple[int, list[str]]:
    """(lookalike stage tools, their distinct ledgers in block order): same class, other ledger."""
    goal, cls = views.goal_ledger(facts.bundle), views.goal_class(facts.bundle)
    tools, ledgers = 0, []
    for name in facts.names:
        bd = facts.binding(name)
        if bd is None or bd.kind != "stage" or bd.ledger == goal:
            continue
        if bd.ledger.split("-")[0] == cls:
            tools += 1
            if bd.ledger not in ledgers:
                ledgers.append(bd.ledger)
    return tools, ledgers


def _number(ledger: str) -> str:
    return ledger.split("-", 1)[1] if "-" in ledger else ""


def _hold_n19(contrast: Contrast) -> Outcome:
    return each(
        contrast,
        "N19",
        lambda arm: (
            None
            if arm.value("N19")["lookalike_tools"] == LOOKALIKE_TOOLS
            else f"{arm.value('N19')['lookalike_tools']} lookalike tools, not {LOOKALIKE_TOOLS}"
        ),
        f"{LOOKALIKE_TOOLS} lookalike tools",
    )


def _measure_n21(facts: BundleFacts) -> dict[str, Any]:
    target = _number(views.goal_ledger(facts.bundle))
    _, ledgers = _lookalike_ledgers(facts)
    looks = [_number(led) for led in ledgers]
    return {
        "target": target,
        "lookalikes": [
            [n, sum(mine == theirs for mine, theirs in zip(n, target, strict=False))] for n in looks
        ],
    }


def _hold_n21(contrast: Contrast) -> Outcome:
    def test(arm: Arm) -> str | None:
        value = arm.value("N21")
        target, looks = value["target"], value["lookalikes"]
        numbers = [n for n, _ in looks]
        if len(looks) != LOOKALIKE_LEDGERS or len(set(numbers)) != LOOKALIKE_LEDGERS:
            return f"{len(set(numbers))} distinct lookalike ledgers, not {LOOKALIKE_LEDGERS}"
        for name, shared in looks:
            if (
                len(name) != len(target)
                or not name.isdigit()
                or name.startswith("0")
                or name == target
            ):
                return f"lookalike number {name!r} is not a four-digit number apart from {target}"
            if shared != arm.spec.level:
                return (
                    f"lookalike {name} shares {shared} digits with {target}, not {arm.spec.level}"
                )
        return None

    return each(contrast, "N21", test, "six lookalikes, each sharing the level's digits")


def _measure_n22(facts: BundleFacts) -> dict[str, Any]:
    return {"names": facts.right[:2], "schemas": digest([facts.schema(n) for n in facts.right[:2]])}


ROWS: tuple[PinRow, ...] = (
    PinRow(
        id="N19",
        name="lookalike tools",
        who=("similarity",),
        mode="refused",
        holds="twelve lookalike stage tools in the block",
        measure=lambda facts: {"lookalike_tools": _lookalike_ledgers(facts)[0]},
        figure=lambda value: value["lookalike_tools"],
        hold=_hold_n19,
    ),
    PinRow(
        id="N20",
        name="block tokens held",
        who=("similarity",),
        mode="refused",
        holds="the block's token count",
        measure=lambda facts: {"block_tokens": facts.block_tokens},
        figure=lambda value: value["block_tokens"],
        hold=lambda contrast: equal(
            contrast, "N20", lambda value: value["block_tokens"], "block tokens"
        ),
    ),
    PinRow(
        id="N21",
        name="lookalike numbers",
        who=("similarity",),
        mode="refused",
        holds="six distinct lookalike numbers, each sharing exactly the level's digits in place "
        "with the target's, none starting with 0",
        measure=_measure_n21,
        figure=lambda value: ",".join(str(s) for _, s in value["lookalikes"]) or "none",
        hold=_hold_n21,
    ),
    PinRow(
        id="N22",
        name="right tools",
        who=("similarity",),
        mode="refused",
        holds="the two right tools' names, descriptions and parameters",
        measure=_measure_n22,
        figure=lambda value: short(value["schemas"]),
        hold=lambda contrast: equal(contrast, "N22", lambda value: value, "right tools' schemas"),
    ),
)
