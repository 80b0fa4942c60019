"""Rows that hold the seeded history and the planned faults: a depth control's band (N9), the
history's tokens (N23), the seeded calls (N24), the faults (N25) and the faults control (N26)."""

from __future__ import annotations

from typing import Any

from poisson_tasks.domain.engine import apply, initial_state
from poisson_tasks.domain.ledger import EngineConfig
from poisson_tasks.pins import views
from poisson_tasks.pins.facts import BundleFacts
from poisson_tasks.pins.holding import Arm, Contrast, Outcome, each, within
from poisson_tasks.pins.row import PinRow
from poisson_tasks.transcript import BAND, history_tokens


def _measure_n9(facts: BundleFacts) -> dict[str, Any]:
    return {
        "seeded_tokens": facts.seeded_tokens,
        "transcript_tokens": history_tokens(views.transcript(facts.bundle)),
    }


def depth_band(contrast: Contrast, control: Arm) -> tuple[int, int]:
    """N9's band for a depth control dL+hH: the seeded tokens S must satisfy lo <= S <= hi.

    With T(d) the token count of depth d's reference transcript (the control's own for L), the
    control ends its episode as long as the depth-H episode ends, within two tokens:
    lo = T(H) - T(L) - BAND and hi = T(H) - T(L) + BAND.
    """
    high = control.spec.control or control.spec.level
    t_low = control.value("N9")["transcript_tokens"]
    t_high = contrast.level_arm(control.spec, high).measured["N9"]["transcript_tokens"]
    return t_high - t_low - BAND, t_high - t_low + BAND


def _hold_n9(contrast: Contrast) -> Outcome:
    out = Outcome(detail="")
    bands = []
    for arm in contrast.controls:
        lo, hi = depth_band(contrast, arm)
        seeded = arm.value("N9")["seeded_tokens"]
        bands.append(f"{arm.id} {lo}<={seeded}<={hi}")
        if not lo <= seeded <= hi:
            out.problems.append(
                (
                    [arm.id],
                    f"seeded {seeded} tokens; the higher arm's episode ends {hi - BAND - seeded:+d} "
                    f"longer, outside the band [{lo}, {hi}]",
                )
            )
    out.detail = "; ".join(bands)
    return out


def _hold_n23(contrast: Contrast) -> Outcome:
    return each(
        contrast,
        "N23",
        lambda arm: (
            None
            if within(arm.value("N23")["seeded_tokens"], arm.spec.level)
            else f"seeded {arm.value('N23')['seeded_tokens']} tokens, not {arm.spec.level} within {BAND}"
        ),
        f"seeded tokens = level within {BAND}",
    )


def _measure_n24(facts: BundleFacts) -> dict[str, Any]:
    calls = views.seeded_calls(facts.bundle)
    offenders: list[str] = []
    if not calls:
        return {"seeded_calls": 0, "offenders": offenders}
    engine = (
        facts.bundle.engine
    )  # rebuilt, so the engine's lookup reads these bindings (see views.bindings)
    config = EngineConfig(
        key=engine.key,
        rows=engine.rows,
        bindings=engine.bindings,
        faults=engine.faults,
        start_seq=engine.start_seq,
    )
    start = initial_state(config)
    for _cid, name, args, answer in calls:
        bd = facts.binding(name)
        if bd is None or bd.kind != "read":
            offenders.append(f"{name}: not a read tool of the block")
            continue
        if answer is None or views.status(answer) != "ok":
            offenders.append(f"{name}: answered {answer and views.status(answer)!r}, not ok")
            continue
        seq = int(answer[:6]) if answer[:6].isdigit() else 1
        _, line = apply(config, start._replace(seq=seq - 1), name, args)
        if line != answer:
            offenders.append(f"{name}: the answer is not the engine's ({answer!r})")
    return {"seeded_calls": len(calls), "offenders": offenders}


def _measure_n25(facts: BundleFacts) -> dict[str, Any]:
    return {
        "faults": [[f.tool, f.count] for f in facts.bundle.engine.faults],
        "right_tools": facts.right[:2],
    }


def _hold_n25(contrast: Contrast) -> Outcome:
    def test(arm: Arm) -> str | None:
        value = arm.value("N25")
        level, right = arm.spec.level, value["right_tools"]
        tools = [tool for tool, _ in value["faults"]]
        twice = sorted({tool for tool in tools if tools.count(tool) > 1})
        if twice:  # the engine keeps one plan a tool, so two would not add up
            return f"{', '.join(twice)} planned more than once; the engine plays one plan a tool"
        planned = {tool: count for tool, count in value["faults"] if count > 0}
        want = dict(zip(right, ((level + 1) // 2, level // 2), strict=False))
        want = {t: n for t, n in want.items() if n > 0}
        if planned != want:
            return f"planned {planned or 'none'}, the level wants {want or 'none'}"
        return None

    return each(contrast, "N25", test, "faults split over the right tools, first takes the odd one")


def _measure_n26(facts: BundleFacts) -> dict[str, Any]:
    return {
        "seeded_tokens": facts.seeded_tokens,
        "failed_call_tokens": history_tokens(views.failed_transcript(facts.bundle)),
    }


def _hold_n26(contrast: Contrast) -> Outcome:
    """fL+len(fH) seeds what fH's failed calls add over fL's, within two tokens."""
    out = Outcome()
    notes = []
    for arm in contrast.controls:
        seeded = arm.value("N26")["seeded_tokens"]
        higher = contrast.level_arm(arm.spec, arm.spec.control or 0).measured["N26"][
            "failed_call_tokens"
        ]
        own = (
            contrast.level_arm(arm.spec, arm.spec.level).measured["N26"]["failed_call_tokens"]
            if arm.spec.level
            else 0
        )
        want = higher - own
        notes.append(f"{arm.id} {seeded} vs {want}")
        if not within(seeded, want):
            out.problems.append(
                (
                    [arm.id],
                    f"seeded {seeded} tokens; the higher arm's failed calls "
                    f"add {want}, more than {BAND} apart",
                )
            )
    out.detail = "; ".join(notes)
    return out


ROWS: tuple[PinRow, ...] = (
    PinRow(
        id="N9",
        name="control history length",
        who=("depth controls",),
        mode="refused",
        holds="a depth control's seeded history is what the higher arm's episode adds over its "
        "own level's, within two tokens",
        measure=_measure_n9,
        figure=lambda value: value["seeded_tokens"],
        hold=_hold_n9,
    ),
    PinRow(
        id="N23",
        name="history tokens",
        who=("history",),
        mode="refused",
        holds="the seeded history's tokens are the level, within two",
        measure=lambda facts: {"seeded_tokens": facts.seeded_tokens},
        figure=lambda value: value["seeded_tokens"],
        hold=_hold_n23,
    ),
    PinRow(
        id="N24",
        name="seeded calls",
        who=("faults", "history"),
        mode="refused",
        holds="every seeded call is a read tool of the block and carries the engine's ok answer",
        measure=_measure_n24,
        figure=lambda value: value["seeded_calls"],
        hold=lambda contrast: each(
            contrast,
            "N24",
            lambda arm: "; ".join(arm.value("N24")["offenders"]) or None,
            "seeded calls are reads answered ok",
        ),
    ),
    PinRow(
        id="N25",
        name="planned faults",
        who=("faults",),
        mode="refused",
        holds="the planned unavailable answers number the level, on the right tools only, "
        "the first taking the odd one",
        measure=_measure_n25,
        figure=lambda value: "+".join(str(count) for _, count in value["faults"]) or "0",
        hold=_hold_n25,
    ),
    PinRow(
        id="N26",
        name="faults control's tokens",
        who=("faults control",),
        mode="refused",
        holds="the control's seeded tokens are what the higher arm's failed calls add over its "
        "own level's, within two",
        measure=_measure_n26,
        figure=lambda value: value["seeded_tokens"],
        hold=_hold_n26,
    ),
)
