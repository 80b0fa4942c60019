"""Rows that hold the scenario and the build fixed across every knob: N1, N2, N8, N11, N12."""

from __future__ import annotations

from typing import Any

from poisson_tasks.arms import KNOBS
from poisson_tasks.domain.engine import LINE_BYTES
from poisson_tasks.pins import views
from poisson_tasks.pins.facts import BundleFacts
from poisson_tasks.pins.holding import Contrast, Outcome, each, equal, short
from poisson_tasks.pins.row import PinRow


def _measure_n1(facts: BundleFacts) -> dict[str, Any]:
    bundle = facts.bundle
    return {
        "split": bundle.split,
        "seed": bundle.seed,
        "key": bundle.engine.key,
        "class": views.goal_class(bundle),
        "record_id": bundle.goal[0].record_id if bundle.goal else "",
        "entry_code": views.entry_code(bundle),
    }


def _measure_n2(facts: BundleFacts) -> dict[str, Any]:
    required = [
        [n, facts.names.index(n)] for n in views.required_tools(facts.bundle) if n in facts.names
    ]
    return {"slots": required, "block": list(facts.names)}


def _hold_n2(contrast: Contrast) -> Outcome:
    """Each tool some arm's reference calls sits in one slot in every block that holds it."""
    required: list[str] = []
    for arm in contrast.arms:
        required += [n for n, _ in arm.value("N2")["slots"] if n not in required]
    out = Outcome(detail=f"{len(required)} required tools, one slot each")
    for name in required:
        where = {
            a.id: a.value("N2")["block"].index(name)
            for a in contrast.arms
            if name in a.value("N2")["block"]
        }
        if len(set(where.values())) > 1:
            slots = sorted(set(where.values()))
            out.problems.append((list(where), f"{name} sits in slots {slots}"))
    return out


def _measure_n8(facts: BundleFacts) -> dict[str, Any]:
    lines = list(facts.bundle.reference_observations)
    lines += [
        m.get("content") or ""
        for m in views.seeded_history(facts.bundle)
        if m.get("role") == "tool"
    ]
    return {"sizes": sorted({len(str(line).encode()) for line in lines}), "lines": len(lines)}


def _hold_n8(contrast: Contrast) -> Outcome:
    return each(
        contrast,
        "N8",
        lambda arm: (
            None
            if arm.value("N8")["sizes"] == [LINE_BYTES]
            else f"observation sizes {arm.value('N8')['sizes']}, not {LINE_BYTES} bytes"
        ),
        f"every answer {LINE_BYTES} bytes",
    )


def _measure_n12(facts: BundleFacts) -> dict[str, Any]:
    bundle = facts.bundle
    return {
        "engine_hash": bundle.engine_hash,
        "vocabulary_hash": bundle.vocabulary_hash,
        "generator_hash": bundle.generator_hash,
    }


ROWS: tuple[PinRow, ...] = (
    PinRow(
        id="N1",
        name="scenario",
        who=KNOBS,
        mode="refused",
        holds="the scenario: split, seed, hidden key, task class, goal record and its entry code",
        note="every seed-drawn value comes from draw_scenario(split, seed) alone",
        measure=_measure_n1,
        figure=lambda value: f"{value['record_id']}/{short(value['key'])}",
        hold=lambda contrast: equal(contrast, "N1", lambda value: value, "scenario"),
    ),
    PinRow(
        id="N2",
        name="tool slots",
        who=KNOBS,
        mode="refused",
        holds="the slot of every tool a reference solution calls, in every block that holds it",
        measure=_measure_n2,
        figure=lambda value: ",".join(str(s) for _, s in value["slots"]),
        hold=_hold_n2,
    ),
    PinRow(
        id="N8",
        name="observation size",
        who=KNOBS,
        mode="refused",
        holds="the observation size: every reference and seeded answer is 52 bytes",
        note="the engine's own tests hold the 52-byte line too",
        measure=_measure_n8,
        figure=lambda value: ",".join(str(s) for s in value["sizes"]) or "none",
        hold=_hold_n8,
    ),
    PinRow(
        id="N11",
        name="verifier strictness",
        who=(*KNOBS, "at run time"),
        mode="refused",
        holds="the verifier's strictness",
        note="a run inherits it from the bundles, so check_pins already holds it across them",
        measure=lambda facts: {"verifier": facts.bundle.verifier},
        figure=lambda value: value["verifier"],
        hold=lambda contrast: equal(contrast, "N11", lambda value: value, "strictness"),
    ),
    PinRow(
        id="N12",
        name="build hashes",
        who=(*KNOBS, "at run time"),
        mode="refused",
        holds="the engine, vocabulary and generator hashes",
        note="a run inherits them from the bundles, so check_pins already holds them across them",
        measure=_measure_n12,
        figure=lambda value: short(value["generator_hash"]),
        hold=lambda contrast: equal(contrast, "N12", lambda value: value, "hashes"),
    ),
)
