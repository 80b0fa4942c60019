"""Rows that hold the scenario and the build fixed across every knob: N1, N2, N8, N11, N12."""

from __future__ import annotations

from typing import Any

from poisson_tasks.arms import KNOBS
from poisson_tasks.bundle import TaskBundle
from poisson_tasks.domain.engine import LINE_BYTES
from poisson_tasks.generator.scenario import READ_NAMES, Scenario, draw_scenario
from poisson_tasks.pins import views
from poisson_tasks.pins.facts import BundleFacts
from poisson_tasks.pins.holding import Contrast, Outcome, each, equal, short
from poisson_tasks.pins.row import PinRow

_BASE_ARGUMENTS = frozenset({"record_id", "token", "query"})
_READS = frozenset(READ_NAMES)


def _departures(bundle: TaskBundle, sc: Scenario) -> list[str]:
    """The seed-drawn fields whose values the bundle shows otherwise than its scenario draws them.

    Each field is read where a bundle carries it, on every knob: the key in the engine; the class,
    record and ledger number in the goal; the entry, bystander and peer codes in the initial rows;
    the reads and the decoy classes in the block (the first n of the scenario's order; a block of
    a user's own tools is not seed-drawn, and N4 holds it); the stated
    values in the stage tools and calls; the queries in the seeded and reference read calls. The
    layout is N2's: the knobs place tools by different rules, and N2 holds each required tool's
    slot across the contrast.
    """
    out: list[str] = []
    goal = bundle.goal[0] if bundle.goal else None
    if bundle.engine.key != sc.key:
        out.append("key")
    if views.goal_class(bundle) != sc.cls:
        out.append("cls")
    if goal is None or goal.record_id != sc.record_id:
        out.append("record_id")
    if views.entry_code(bundle) != sc.entry_code:
        out.append("entry_code")
    number = goal.ledger.partition("-")[2] if goal else ""
    if number and number != str(sc.ledger_number):
        out.append("ledger_number")
    codes = {
        sc.record_id: sc.entry_code,
        sc.sibling_id: sc.sibling_code,
        **dict(zip(sc.peer_ids, sc.peer_codes, strict=True)),
    }
    rows = {row[1]: row[3] for row in bundle.initial_state}
    if rows.get(sc.sibling_id) != sc.sibling_code:
        out.append("sibling_id" if sc.sibling_id not in rows else "sibling_code")
    peers = {rid: code for rid, code in rows.items() if rid not in (sc.record_id, sc.sibling_id)}
    if any(rid not in codes for rid in peers):
        out.append("peer_ids")
    elif any(codes[rid] != code for rid, code in peers.items()):
        out.append("peer_codes")
    reads = {b.name for b in bundle.engine.bindings if b.kind == "read"}
    # a block holding a user's own tools (owntools.py) is not seed-drawn: N4 holds it
    if reads <= _READS and reads != set(sc.reads[: len(reads)]):
        out.append("reads")
    stage_classes = {
        b.ledger.partition("-")[0] for b in bundle.engine.bindings if b.kind == "stage"
    }
    decoys = stage_classes - {sc.cls}
    if decoys != set(sc.other_classes[: len(decoys)]):
        out.append("other_classes")
    arguments = [c.arguments or {} for c in bundle.reference_calls]
    arguments += [args or {} for _, _, args, _ in views.seeded_calls(bundle)]
    stated = {value for b in bundle.engine.bindings for _, value in b.fixed}
    stated |= {str(v) for args in arguments for k, v in args.items() if k not in _BASE_ARGUMENTS}
    if not stated <= set(sc.extra_values):
        out.append("extra_values")
    joined = "".join(sc.queries) * 2
    if any(str(args.get("query", "")) not in joined for args in arguments):
        out.append("queries")
    return out


def _measure_n1(facts: BundleFacts) -> dict[str, Any]:
    bundle = facts.bundle
    sc = draw_scenario(bundle.split, bundle.seed)
    return {
        "split": bundle.split,
        "seed": bundle.seed,
        "key": bundle.engine.key,
        "class": views.goal_class(bundle),
        "record_id": bundle.goal[0].record_id if bundle.goal else "",
        "entry_code": views.entry_code(bundle),
        "scenario": sc.digest(),
        "departures": _departures(bundle, sc),
    }


def _hold_n1(contrast: Contrast) -> Outcome:
    """Every arm shows its scenario's values, and the contrast shares one scenario."""
    odd = each(
        contrast,
        "N1",
        lambda arm: (
            None
            if not arm.value("N1")["departures"]
            else "shows other values than its scenario draws for "
            + ", ".join(arm.value("N1")["departures"])
        ),
        "every arm shows its scenario's values",
    )
    if odd.problems:
        return odd
    return equal(contrast, "N1", lambda value: value, "scenario")


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
        holds="the scenario: every seed-drawn field, each as the bundle shows it",
        note="every seed-drawn value comes from draw_scenario(split, seed) alone",
        measure=_measure_n1,
        figure=lambda value: f"{value['record_id']}/{short(value['key'])}",
        hold=_hold_n1,
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
