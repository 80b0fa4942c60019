"""Rows that hold the seeded history and the planned faults: a depth control's band (N9), the
history's tokens (N23), the seeded calls (N24), the faults (N25) and the faults control (N26)."""

from __future__ import annotations

from typing import Any

from poisson_tasks.arms import levels
from poisson_tasks.domain.engine import apply, initial_state
from poisson_tasks.domain.ledger import EngineConfig
from poisson_tasks.pins import views
from poisson_tasks.pins.facts import BundleFacts
from poisson_tasks.pins.holding import Arm, Contrast, Outcome, each, within
from poisson_tasks.pins.row import PinRow
from poisson_tasks.transcript import BAND, history_tokens


def _measure_n9(x: BundleFacts) -> dict[str, Any]:
    return {
        "seeded_tokens": x.seeded_tokens,
        "transcript_tokens": history_tokens(views.transcript(x.b)),
    }


def depth_band(c: Contrast, control: Arm) -> tuple[int, int]:
    """N9's band for a depth control dL+hH: the seeded tokens S must satisfy lo < S <= hi.

    With T(d) the token count of depth d's reference transcript: hi = T(H) - T(L), so the
    control ends no longer than the depth-H episode; lo = T(P) - T(L), where P is the highest
    candidate depth below H (L if none is higher), so it ends longer than the depth-P episode.
    """
    low, high = control.spec.level, control.spec.control or control.spec.level
    below = [lv for lv in levels("depth") if control.spec.level < lv < high]
    prev = max(below) if below else low
    t_low = control.v("N9")["transcript_tokens"]
    t_prev = c.level_arm(control.spec, prev).measured["N9"]["transcript_tokens"] if below else t_low
    t_high = c.level_arm(control.spec, high).measured["N9"]["transcript_tokens"]
    return t_prev - t_low, t_high - t_low


def _hold_n9(c: Contrast) -> Outcome:
    out = Outcome(detail="")
    bands = []
    for a in c.controls:
        lo, hi = depth_band(c, a)
        s = a.v("N9")["seeded_tokens"]
        bands.append(f"{a.id} {lo}<{s}<={hi}")
        if not lo < s <= hi:
            out.problems.append(([a.id], f"seeded {s} tokens, outside the band ({lo}, {hi}]"))
    out.detail = "; ".join(bands)
    return out


def _hold_n23(c: Contrast) -> Outcome:
    return each(
        c,
        "N23",
        lambda a: (
            None
            if within(a.v("N23")["seeded_tokens"], a.spec.level)
            else f"seeded {a.v('N23')['seeded_tokens']} tokens, not {a.spec.level} within {BAND}"
        ),
        f"seeded tokens = level within {BAND}",
    )


def _measure_n24(x: BundleFacts) -> dict[str, Any]:
    calls = views.seeded_calls(x.b)
    offenders: list[str] = []
    if not calls:
        return {"seeded_calls": 0, "offenders": offenders}
    e = x.b.engine  # rebuilt, so the engine's lookup reads these bindings (see views.bindings)
    config = EngineConfig(
        key=e.key, rows=e.rows, bindings=e.bindings, faults=e.faults, start_seq=e.start_seq
    )
    start = initial_state(config)
    for _cid, name, args, answer in calls:
        bd = x.binding(name)
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


def _measure_n25(x: BundleFacts) -> dict[str, Any]:
    return {
        "faults": [[f.tool, f.count] for f in x.b.engine.faults],
        "right_tools": x.right[:2],
    }


def _hold_n25(c: Contrast) -> Outcome:
    def test(a: Arm) -> str | None:
        v = a.v("N25")
        level, right = a.spec.level, v["right_tools"]
        planned: dict[str, int] = {}
        for tool, count in v["faults"]:
            planned[tool] = planned.get(tool, 0) + count
        planned = {t: n for t, n in planned.items() if n > 0}
        want = dict(zip(right, ((level + 1) // 2, level // 2), strict=False))
        want = {t: n for t, n in want.items() if n > 0}
        if planned != want:
            return f"planned {planned or 'none'}, the level wants {want or 'none'}"
        return None

    return each(c, "N25", test, "faults split over the right tools, first takes the odd one")


def _measure_n26(x: BundleFacts) -> dict[str, Any]:
    return {
        "seeded_tokens": x.seeded_tokens,
        "failed_call_tokens": history_tokens(views.failed_transcript(x.b)),
    }


def _hold_n26(c: Contrast) -> Outcome:
    """fL+len(fH) seeds what fH's failed calls add over fL's, within two tokens."""
    out = Outcome()
    notes = []
    for a in c.controls:
        s = a.v("N26")["seeded_tokens"]
        higher = c.level_arm(a.spec, a.spec.control or 0).measured["N26"]["failed_call_tokens"]
        own = (
            c.level_arm(a.spec, a.spec.level).measured["N26"]["failed_call_tokens"]
            if a.spec.level
            else 0
        )
        want = higher - own
        notes.append(f"{a.id} {s} vs {want}")
        if not within(s, want):
            out.problems.append(
                (
                    [a.id],
                    f"seeded {s} tokens; the higher arm's failed calls "
                    f"add {want}, more than {BAND} apart",
                )
            )
    out.detail = "; ".join(notes)
    return out


ROWS: tuple[PinRow, ...] = (
    PinRow(
        id="N9",
        who=("depth controls",),
        mode="refused",
        holds="a depth control's seeded history sits in its token band over the contrast",
        measure=_measure_n9,
        figure=lambda v: v["seeded_tokens"],
        hold=_hold_n9,
    ),
    PinRow(
        id="N23",
        who=("history",),
        mode="refused",
        holds="the seeded history's tokens are the level, within two",
        measure=lambda x: {"seeded_tokens": x.seeded_tokens},
        figure=lambda v: v["seeded_tokens"],
        hold=_hold_n23,
    ),
    PinRow(
        id="N24",
        who=("faults", "history"),
        mode="refused",
        holds="every seeded call is a read tool of the block and carries the engine's ok answer",
        measure=_measure_n24,
        figure=lambda v: v["seeded_calls"],
        hold=lambda c: each(
            c,
            "N24",
            lambda a: "; ".join(a.v("N24")["offenders"]) or None,
            "seeded calls are reads answered ok",
        ),
    ),
    PinRow(
        id="N25",
        who=("faults",),
        mode="refused",
        holds="the planned unavailable answers number the level, on the right tools only, "
        "the first taking the odd one",
        measure=_measure_n25,
        figure=lambda v: "+".join(str(c) for _, c in v["faults"]) or "0",
        hold=_hold_n25,
    ),
    PinRow(
        id="N26",
        who=("faults control",),
        mode="refused",
        holds="the control's seeded tokens are what the higher arm's failed calls add over its "
        "own level's, within two",
        measure=_measure_n26,
        figure=lambda v: v["seeded_tokens"],
        hold=_hold_n26,
    ),
)
