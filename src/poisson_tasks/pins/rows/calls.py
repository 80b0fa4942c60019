"""Rows that hold the stage calls a knob reshapes: the stage schemas (N30) and fixed values (N31)
for arguments, four calls over sixteen tools for shape (N33), the reads and parts for spread (N35).
"""

from __future__ import annotations

import re
from typing import Any

from poisson_tasks.bundle import digest
from poisson_tasks.domain.vocabulary import EXTRA_FIELDS
from poisson_tasks.pins import views
from poisson_tasks.pins.facts import BundleFacts
from poisson_tasks.pins.holding import Arm, Contrast, Outcome, each, equal, short
from poisson_tasks.pins.row import PinRow

SHAPE_STAGE_CALLS = 4
SHAPE_TOOLS = 16
SPREAD_READS = 4
_PART = re.compile(r"^part_(\d+)_of_(\d+)$")


def _measure_n30(facts: BundleFacts) -> dict[str, Any]:
    """Stage schemas with EXTRA_FIELDS taken out of properties and required."""
    out = []
    for name in facts.names:
        bd = facts.binding(name)
        if bd is None or bd.kind != "stage":
            continue
        fn = dict(facts.schema(name)["function"])
        params = dict(fn["parameters"])
        params["properties"] = {
            k: v for k, v in params["properties"].items() if k not in EXTRA_FIELDS
        }
        params["required"] = [k for k in params["required"] if k not in EXTRA_FIELDS]
        fn["parameters"] = params
        out.append(fn)
    return {"stage_schemas": digest(out), "stage_tools": len(out)}


def _measure_n31(facts: BundleFacts) -> dict[str, Any]:
    fixed = []
    for name in facts.right:
        bd = facts.binding(name)
        fixed.append([name, [list(fv) for fv in (bd.fixed if bd else ())]])
    values = sorted({(f, v) for _, fv in fixed for f, v in fv})
    text, names = facts.instruction, facts.names
    fixed_by = {n: fv for n, fv in fixed}
    uncarried = [
        f"{call.name} lacks {f}={v}"
        for call in facts.bundle.reference_calls
        for f, v in fixed_by.get(call.name, [])
        if (call.arguments or {}).get(f) != v
    ]
    return {
        "fixed": fixed,
        "unstated": [f"{f}={v}" for f, v in values if f not in text or v not in text],
        "in_tool_names": [v for _, v in values if any(v.lower() in n.lower() for n in names)],
        "uncarried": uncarried,
    }


def _hold_n31(contrast: Contrast) -> Outcome:
    def test(arm: Arm) -> str | None:
        value = arm.value("N31")
        want = arm.spec.level - 2
        sets = [sorted(map(tuple, fv)) for _, fv in value["fixed"]]
        if any(len(s) != want for s in sets):
            return f"stage tools fix {[len(seeded) for seeded in sets]} values, not {want} each"
        if any(s != sets[0] for s in sets):
            return "the stage tools fix different values"
        for key, what in (
            ("unstated", "not stated in the request"),
            ("in_tool_names", "carried by a tool name"),
            ("uncarried", "missing from a reference call"),
        ):
            if value[key]:
                return f"{', '.join(value[key])}: {what}"
        return None

    return each(contrast, "N31", test, "level-2 stated values on each stage call")


def _measure_n33(facts: BundleFacts) -> dict[str, Any]:
    stage_calls = 0
    for call in facts.bundle.reference_calls:
        bd = facts.binding(call.name)
        if bd is not None and bd.kind == "stage":
            stage_calls += 1
    return {
        "stage_calls": stage_calls,
        "tools": len(facts.names),
        "block_tokens": facts.block_tokens,
    }


def _hold_n33(contrast: Contrast) -> Outcome:
    out = each(
        contrast,
        "N33",
        lambda arm: (
            None
            if (arm.value("N33")["stage_calls"], arm.value("N33")["tools"])
            == (SHAPE_STAGE_CALLS, SHAPE_TOOLS)
            else f"{arm.value('N33')['stage_calls']} stage calls and {arm.value('N33')['tools']} tools, not "
            f"{SHAPE_STAGE_CALLS} and {SHAPE_TOOLS}"
        ),
        f"{SHAPE_STAGE_CALLS} stage calls, {SHAPE_TOOLS} tools; block tokens reported",
    )
    out.report = True
    return out


def _measure_n35(facts: BundleFacts) -> dict[str, Any]:
    reads = [
        n
        for n in views.required_tools(facts.bundle)
        if (bd := facts.binding(n)) is not None and bd.kind == "read"
    ]
    parts: list[tuple[int, int, str, str]] = []
    for name in reads:
        bd = facts.binding(name)
        if bd is None or bd.part is None:
            continue
        match = _PART.match(bd.part_status)
        index, of = (int(match[1]), int(match[2])) if match else (0, 0)
        parts.append((index, of, name, bd.part))
    return {
        "reads": reads,
        "parts": [[n, i, of, p] for i, of, n, p in parts],
        "joined": "".join(p for _, _, _, p in sorted(parts)),
        "entry_code": views.entry_code(facts.bundle),
    }


def _hold_n35(contrast: Contrast) -> Outcome:
    out = equal(contrast, "N35", lambda value: value["reads"], "the reads")

    def test(arm: Arm) -> str | None:
        value = arm.value("N35")
        if len(value["reads"]) != SPREAD_READS:
            return f"{len(value['reads'])} reads called, not {SPREAD_READS}"
        if len(value["parts"]) != arm.spec.level:
            return f"{len(value['parts'])} reads answer a part, not {arm.spec.level}"
        indices = sorted(i for _, i, _, _ in value["parts"])
        if indices != list(range(1, arm.spec.level + 1)) or any(
            of != arm.spec.level for _, _, of, _ in value["parts"]
        ):
            return f"parts numbered {indices} of {sorted({of for _, _, of, _ in value['parts']})}"
        if value["joined"] != value["entry_code"]:
            return f"parts join to {value['joined']!r}, not the entry code {value['entry_code']!r}"
        return None

    out.problems += each(contrast, "N35", test, "").problems
    return out


ROWS: tuple[PinRow, ...] = (
    PinRow(
        id="N30",
        name="stage schemas",
        who=("arguments",),
        mode="refused",
        holds="the stage tools' schemas with the knob's extra fields set aside",
        measure=_measure_n30,
        figure=lambda value: short(value["stage_schemas"]),
        hold=lambda contrast: equal(
            contrast, "N30", lambda value: value["stage_schemas"], "stage schemas less extras"
        ),
    ),
    PinRow(
        id="N31",
        name="values each call carries",
        who=("arguments",),
        mode="refused",
        holds="each right stage tool fixes the level less two values, the same set on each, "
        "every one stated in the request and in no tool name",
        measure=_measure_n31,
        figure=lambda value: ",".join(str(len(fv)) for _, fv in value["fixed"]),
        hold=_hold_n31,
    ),
    PinRow(
        id="N33",
        name="calls and tools per width",
        who=("shape",),
        mode="reported-and-refused",
        holds="refuses unless four stage calls and sixteen tools at every width; reports the "
        "block's token count",
        measure=_measure_n33,
        figure=lambda value: f"{value['stage_calls']} calls/{value['tools']} tools",
        hold=_hold_n33,
        reported_figure=lambda value: value["block_tokens"],
    ),
    PinRow(
        id="N35",
        name="spread reads",
        who=("spread",),
        mode="refused",
        holds="the same four reads at every level; as many answer a part as the level, and the "
        "parts join in order to the entry code",
        measure=_measure_n35,
        figure=lambda value: f"{len(value['reads'])}r/{len(value['parts'])}p",
        hold=_hold_n35,
    ),
)
