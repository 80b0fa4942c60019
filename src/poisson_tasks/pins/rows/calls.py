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


def _measure_n30(x: BundleFacts) -> dict[str, Any]:
    """Stage schemas with EXTRA_FIELDS taken out of properties and required."""
    out = []
    for n in x.names:
        bd = x.binding(n)
        if bd is None or bd.kind != "stage":
            continue
        fn = dict(x.schema(n)["function"])
        params = dict(fn["parameters"])
        params["properties"] = {
            k: v for k, v in params["properties"].items() if k not in EXTRA_FIELDS
        }
        params["required"] = [k for k in params["required"] if k not in EXTRA_FIELDS]
        fn["parameters"] = params
        out.append(fn)
    return {"stage_schemas": digest(out), "stage_tools": len(out)}


def _measure_n31(x: BundleFacts) -> dict[str, Any]:
    fixed = []
    for n in x.right:
        bd = x.binding(n)
        fixed.append([n, [list(fv) for fv in (bd.fixed if bd else ())]])
    values = sorted({(f, v) for _, fv in fixed for f, v in fv})
    text, names = x.instruction, x.names
    fixed_by = {n: fv for n, fv in fixed}
    uncarried = [
        f"{c.name} lacks {f}={v}"
        for c in x.b.reference_calls
        for f, v in fixed_by.get(c.name, [])
        if (c.arguments or {}).get(f) != v
    ]
    return {
        "fixed": fixed,
        "unstated": [f"{f}={v}" for f, v in values if f not in text or v not in text],
        "in_tool_names": [v for _, v in values if any(v.lower() in n.lower() for n in names)],
        "uncarried": uncarried,
    }


def _hold_n31(c: Contrast) -> Outcome:
    def test(a: Arm) -> str | None:
        v = a.v("N31")
        want = a.spec.level - 2
        sets = [sorted(map(tuple, fv)) for _, fv in v["fixed"]]
        if any(len(s) != want for s in sets):
            return f"stage tools fix {[len(s) for s in sets]} values, not {want} each"
        if any(s != sets[0] for s in sets):
            return "the stage tools fix different values"
        for key, what in (
            ("unstated", "not stated in the request"),
            ("in_tool_names", "carried by a tool name"),
            ("uncarried", "missing from a reference call"),
        ):
            if v[key]:
                return f"{', '.join(v[key])}: {what}"
        return None

    return each(c, "N31", test, "level-2 stated values on each stage call")


def _measure_n33(x: BundleFacts) -> dict[str, Any]:
    stage_calls = 0
    for c in x.b.reference_calls:
        bd = x.binding(c.name)
        if bd is not None and bd.kind == "stage":
            stage_calls += 1
    return {"stage_calls": stage_calls, "tools": len(x.names), "block_tokens": x.block_tokens}


def _hold_n33(c: Contrast) -> Outcome:
    out = each(
        c,
        "N33",
        lambda a: (
            None
            if (a.v("N33")["stage_calls"], a.v("N33")["tools"]) == (SHAPE_STAGE_CALLS, SHAPE_TOOLS)
            else f"{a.v('N33')['stage_calls']} stage calls and {a.v('N33')['tools']} tools, not "
            f"{SHAPE_STAGE_CALLS} and {SHAPE_TOOLS}"
        ),
        f"{SHAPE_STAGE_CALLS} stage calls, {SHAPE_TOOLS} tools; block tokens reported",
    )
    out.report = True
    return out


def _measure_n35(x: BundleFacts) -> dict[str, Any]:
    reads = [
        n
        for n in views.required_tools(x.b)
        if (bd := x.binding(n)) is not None and bd.kind == "read"
    ]
    parts: list[tuple[int, int, str, str]] = []
    for n in reads:
        bd = x.binding(n)
        if bd is None or bd.part is None:
            continue
        m = _PART.match(bd.part_status)
        i, of = (int(m[1]), int(m[2])) if m else (0, 0)
        parts.append((i, of, n, bd.part))
    return {
        "reads": reads,
        "parts": [[n, i, of, p] for i, of, n, p in parts],
        "joined": "".join(p for _, _, _, p in sorted(parts)),
        "entry_code": views.entry_code(x.b),
    }


def _hold_n35(c: Contrast) -> Outcome:
    out = equal(c, "N35", lambda v: v["reads"], "the reads")

    def test(a: Arm) -> str | None:
        v = a.v("N35")
        if len(v["reads"]) != SPREAD_READS:
            return f"{len(v['reads'])} reads called, not {SPREAD_READS}"
        if len(v["parts"]) != a.spec.level:
            return f"{len(v['parts'])} reads answer a part, not {a.spec.level}"
        indices = sorted(i for _, i, _, _ in v["parts"])
        if indices != list(range(1, a.spec.level + 1)) or any(
            of != a.spec.level for _, _, of, _ in v["parts"]
        ):
            return f"parts numbered {indices} of {sorted({of for _, _, of, _ in v['parts']})}"
        if v["joined"] != v["entry_code"]:
            return f"parts join to {v['joined']!r}, not the entry code {v['entry_code']!r}"
        return None

    out.problems += each(c, "N35", test, "").problems
    return out


ROWS: tuple[PinRow, ...] = (
    PinRow(
        id="N30",
        who=("arguments",),
        mode="refused",
        holds="the stage tools' schemas with the knob's extra fields set aside",
        measure=_measure_n30,
        figure=lambda v: short(v["stage_schemas"]),
        hold=lambda c: equal(c, "N30", lambda v: v["stage_schemas"], "stage schemas less extras"),
    ),
    PinRow(
        id="N31",
        who=("arguments",),
        mode="refused",
        holds="each right stage tool fixes the level less two values, the same set on each, "
        "every one stated in the request and in no tool name",
        measure=_measure_n31,
        figure=lambda v: ",".join(str(len(fv)) for _, fv in v["fixed"]),
        hold=_hold_n31,
    ),
    PinRow(
        id="N33",
        who=("shape",),
        mode="reported-and-refused",
        holds="refuses unless four stage calls and sixteen tools at every width; reports the "
        "block's token count",
        measure=_measure_n33,
        figure=lambda v: f"{v['stage_calls']} calls/{v['tools']} tools",
        hold=_hold_n33,
        reported_figure=lambda v: v["block_tokens"],
    ),
    PinRow(
        id="N35",
        who=("spread",),
        mode="refused",
        holds="the same four reads at every level; as many answer a part as the level, and the "
        "parts join in order to the entry code",
        measure=_measure_n35,
        figure=lambda v: f"{len(v['reads'])}r/{len(v['parts'])}p",
        hold=_hold_n35,
    ),
)
