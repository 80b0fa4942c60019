"""Rows that hold the scenario and the build fixed across every knob: N1, N2, N8, N11, N12."""

from __future__ import annotations

from typing import Any

from poisson_tasks.arms import KNOBS
from poisson_tasks.domain.engine import LINE_BYTES
from poisson_tasks.pins import views
from poisson_tasks.pins.facts import BundleFacts
from poisson_tasks.pins.holding import Contrast, Outcome, each, equal, short
from poisson_tasks.pins.row import PinRow


def _measure_n1(x: BundleFacts) -> dict[str, Any]:
    b = x.b
    return {
        "split": b.split,
        "seed": b.seed,
        "key": b.engine.key,
        "class": views.goal_class(b),
        "record_id": b.goal[0].record_id if b.goal else "",
        "entry_code": views.entry_code(b),
    }


def _measure_n2(x: BundleFacts) -> dict[str, Any]:
    required = [[n, x.names.index(n)] for n in views.required_tools(x.b) if n in x.names]
    return {"slots": required, "block": list(x.names)}


def _hold_n2(c: Contrast) -> Outcome:
    """Each tool some arm's reference calls sits in one slot in every block that holds it."""
    required: list[str] = []
    for a in c.arms:
        required += [n for n, _ in a.v("N2")["slots"] if n not in required]
    out = Outcome(detail=f"{len(required)} required tools, one slot each")
    for name in required:
        where = {a.id: a.v("N2")["block"].index(name) for a in c.arms if name in a.v("N2")["block"]}
        if len(set(where.values())) > 1:
            slots = sorted(set(where.values()))
            out.problems.append((list(where), f"{name} sits in slots {slots}"))
    return out


def _measure_n8(x: BundleFacts) -> dict[str, Any]:
    lines = list(x.b.reference_observations)
    lines += [m.get("content") or "" for m in views.seeded_history(x.b) if m.get("role") == "tool"]
    return {"sizes": sorted({len(str(line).encode()) for line in lines}), "lines": len(lines)}


def _hold_n8(c: Contrast) -> Outcome:
    return each(
        c,
        "N8",
        lambda a: (
            None
            if a.v("N8")["sizes"] == [LINE_BYTES]
            else f"observation sizes {a.v('N8')['sizes']}, not {LINE_BYTES} bytes"
        ),
        f"every answer {LINE_BYTES} bytes",
    )


def _measure_n12(x: BundleFacts) -> dict[str, Any]:
    b = x.b
    return {
        "engine_hash": b.engine_hash,
        "vocabulary_hash": b.vocabulary_hash,
        "generator_hash": b.generator_hash,
    }


ROWS: tuple[PinRow, ...] = (
    PinRow(
        id="N1",
        who=KNOBS,
        mode="refused",
        holds="the scenario: split, seed, hidden key, task class, goal record and its entry code",
        note="every seed-drawn value comes from draw_scenario(split, seed) alone",
        measure=_measure_n1,
        figure=lambda v: f"{v['record_id']}/{short(v['key'])}",
        hold=lambda c: equal(c, "N1", lambda v: v, "scenario"),
    ),
    PinRow(
        id="N2",
        who=KNOBS,
        mode="refused",
        holds="the slot of every tool a reference solution calls, in every block that holds it",
        measure=_measure_n2,
        figure=lambda v: ",".join(str(s) for _, s in v["slots"]),
        hold=_hold_n2,
    ),
    PinRow(
        id="N8",
        who=KNOBS,
        mode="refused",
        holds="the observation size: every reference and seeded answer is 52 bytes",
        note="the engine's own tests hold the 52-byte line too",
        measure=_measure_n8,
        figure=lambda v: ",".join(str(s) for s in v["sizes"]) or "none",
        hold=_hold_n8,
    ),
    PinRow(
        id="N11",
        who=(*KNOBS, "at run time"),
        mode="refused",
        holds="the verifier's strictness",
        note="a run inherits it from the bundles, so check_pins already holds it across them",
        measure=lambda x: {"verifier": x.b.verifier},
        figure=lambda v: v["verifier"],
        hold=lambda c: equal(c, "N11", lambda v: v, "strictness"),
    ),
    PinRow(
        id="N12",
        who=(*KNOBS, "at run time"),
        mode="refused",
        holds="the engine, vocabulary and generator hashes",
        note="a run inherits them from the bundles, so check_pins already holds them across them",
        measure=_measure_n12,
        figure=lambda v: short(v["generator_hash"]),
        hold=lambda c: equal(c, "N12", lambda v: v, "hashes"),
    ),
)
