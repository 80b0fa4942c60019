"""check_pins: hold every row the "who" column names across the arms of one contrast.

A contrast is the arms of one knob (levels and controls) at one seed, split and strictness.
A violated row refuses the contrast, naming the row, the arms and their measured values; a
reported row records a number that is meant to move (N5, N7 on shape, N29, N33) and never refuses.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from poisson_tasks.arms import ArmSpec, levels, parse_arm_id
from poisson_tasks.bundle import TaskBundle
from poisson_tasks.domain.engine import LINE_BYTES
from poisson_tasks.errors import PinError
from poisson_tasks.generator import generate
from poisson_tasks.pins.measure import PinMeasurement, measure_pins
from poisson_tasks.pins.table import ROWS, PinRow
from poisson_tasks.transcript import BAND

PinVerdict = Literal["held", "violated", "reported", "not applicable", "unmeasured"]
Figure = int | str
_FILLER_KNOBS = ("distractor", "block")
SHAPE_STAGE_CALLS = 4
SHAPE_TOOLS = 16
LOOKALIKE_TOOLS = 12
LOOKALIKE_LEDGERS = 6
SPREAD_READS = 4


class Violation(BaseModel):
    """One refusing row: which arms disagree or fail, their measured figures, and why."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    row: str
    arms: list[str]
    values: dict[str, Figure]
    detail: str

    def line(self) -> str:
        vals = ", ".join(f"{a}={v}" for a, v in self.values.items())
        return f"{self.row} refused ({', '.join(self.arms)}): {self.detail} [{vals}]"


class Reported(BaseModel):
    """A row's figure per arm, recorded because it is meant to move with the level."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    row: str
    values: dict[str, Figure]
    detail: str


class RowVerdict(BaseModel):
    """One row in one contrast: its verdict, each arm's figure and a one-line account."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    row: str
    verdict: PinVerdict
    values: dict[str, Figure]
    detail: str


class PinReport(BaseModel):
    """Every row's verdict on one contrast, with violations and reported figures kept apart."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    knob: str
    split: str
    strictness: str
    seed: int
    arms: list[str]
    rows: list[RowVerdict]
    violations: list[Violation]
    reported: list[Reported]

    @property
    def refused(self) -> bool:
        return bool(self.violations)

    @property
    def violated_rows(self) -> set[str]:
        return {v.row for v in self.violations}

    def verdict(self, row: str) -> PinVerdict:
        return next(r.verdict for r in self.rows if r.row == row)

    def message(self) -> str:
        """One line: refused or held, naming every violated row, its arms and values."""
        head = f"{self.knob} contrast at seed {self.seed} ({len(self.arms)} arms)"
        if not self.refused:
            return f"{head}: every row held"
        return f"{head} refused: " + "; ".join(v.line() for v in self.violations)

    def lines(self) -> list[str]:
        """The report as text: a header, one line per row, then what was refused."""
        out = [
            f"contrast {self.knob} ({self.split}, {self.strictness}) seed {self.seed}: "
            + ", ".join(self.arms)
        ]
        for r in self.rows:
            head = f"{r.row:<4} {r.verdict:<15}"
            out.append("  " + "  ".join(x for x in (head, _compact(r.values), r.detail) if x))
        out += [f"  {v.line()}" for v in self.violations]
        out.append(f"  {'refused' if self.refused else 'not refused'}")
        return out


def _compact(values: Mapping[str, Figure]) -> str:
    """Figures by arm, or one figure when every arm has it."""
    if not values:
        return ""
    distinct = set(values.values())
    if len(distinct) == 1 and len(values) > 1:
        return f"all {next(iter(distinct))}"
    return " ".join(f"{a}={v}" for a, v in values.items())


@dataclass
class _Arm:
    """One arm of a contrast: its id, spec and measurement."""

    id: str
    spec: ArmSpec
    m: PinMeasurement

    def v(self, row: str) -> Any:
        return self.m.measured[row]


@dataclass
class _Outcome:
    """What holding one row found: (arms, why) per problem, a one-line account, a report flag."""

    problems: list[tuple[list[str], str]] = field(default_factory=list)
    detail: str = ""
    report: bool = False


Companion = Callable[[ArmSpec], PinMeasurement]


@dataclass
class _Contrast:
    """The arms of one contrast and a way to reach an arm it names but does not hold."""

    knob: str
    seed: int
    arms: list[_Arm]
    companion: Companion
    _cache: dict[str, PinMeasurement] = field(default_factory=dict)

    @property
    def controls(self) -> list[_Arm]:
        return [a for a in self.arms if a.spec.control is not None]

    def level_arm(self, like: ArmSpec, level: int) -> PinMeasurement:
        """The plain arm of `like`'s knob at `level`: from the contrast, else generated."""
        spec = ArmSpec(knob=like.knob, level=level, split=like.split, strictness=like.strictness)
        for a in self.arms:
            if a.spec == spec:
                return a.m
        key = spec.id
        if key not in self._cache:
            self._cache[key] = self.companion(spec)
        return self._cache[key]


def _generated(seed: int) -> Companion:
    def make(spec: ArmSpec) -> PinMeasurement:
        return measure_pins(generate(spec, seed))

    return make


# ------------------------------------------------------------------ figures, one per row


def _short(h: str) -> str:
    return h[:8]


FIGURES: dict[str, Callable[[Any], Figure]] = {
    "N1": lambda v: f"{v['record_id']}/{_short(v['key'])}",
    "N2": lambda v: ",".join(str(s) for _, s in v["slots"]),
    "N3": lambda v: _short(v["base"]) + (f"+{v['filler_tokens']}" if v["filler"] else ""),
    "N4": lambda v: _short(v["block"]),
    "N5": lambda v: v["block_tokens"],
    "N6": lambda v: f"{_short(v['template'])}/{sum(v['slot_tokens'].values())}",
    "N7": lambda v: v["count"],
    "N8": lambda v: ",".join(str(s) for s in v["sizes"]) or "none",
    "N9": lambda v: v["seeded_tokens"],
    "N11": lambda v: v["verifier"],
    "N12": lambda v: _short(v["generator_hash"]),
    "N19": lambda v: v["lookalike_tools"],
    "N20": lambda v: v["block_tokens"],
    "N21": lambda v: ",".join(str(s) for _, s in v["lookalikes"]) or "none",
    "N22": lambda v: _short(v["schemas"]),
    "N23": lambda v: v["seeded_tokens"],
    "N24": lambda v: v["seeded_calls"],
    "N25": lambda v: "+".join(str(c) for _, c in v["faults"]) or "0",
    "N26": lambda v: v["seeded_tokens"],
    "N27": lambda v: v["tools"],
    "N28": lambda v: ",".join(str(s) for s in v["right_slots"]),
    "N29": lambda v: v["block_tokens"],
    "N30": lambda v: _short(v["stage_schemas"]),
    "N31": lambda v: ",".join(str(len(fv)) for _, fv in v["fixed"]),
    "N32": lambda v: v["request_tokens"],
    "N33": lambda v: f"{v['stage_calls']} calls/{v['tools']} tools",
    "N34": lambda v: v["request_tokens"],
    "N35": lambda v: f"{len(v['reads'])}r/{len(v['parts'])}p",
}


# What a reported row records, where it is not the row's figure: the block's token count.
REPORTED_FIGURES: dict[str, Callable[[Any], Figure]] = {
    "N33": lambda v: v["block_tokens"],
}


def figure(row: str, value: Any) -> Figure:
    """A row's measured value in one short figure (an int where the row is a count)."""
    return FIGURES[row](value)


# ------------------------------------------------------------------ holding helpers


def _equal(c: _Contrast, row: str, key: Callable[[Any], Any], what: str) -> _Outcome:
    """The row's keyed value must be one value across the contrast."""
    first = c.arms[0]
    base = key(first.v(row))
    odd = [a.id for a in c.arms[1:] if key(a.v(row)) != base]
    if not odd:
        return _Outcome(detail=f"{what} equal across {len(c.arms)} arms")
    return _Outcome(problems=[([first.id, *odd], f"{what} differs from {first.id}'s")])


def _each(
    c: _Contrast,
    row: str,
    test: Callable[[_Arm], str | None],
    what: str,
    arms: list[_Arm] | None = None,
) -> _Outcome:
    """Every arm (or the given ones) must pass `test`; a failing arm is named with its reason."""
    out = _Outcome(detail=what)
    for a in c.arms if arms is None else arms:
        problem = test(a)
        if problem:
            out.problems.append(([a.id], problem))
    return out


def _within(a: int, b: int) -> bool:
    return abs(a - b) <= BAND


# ------------------------------------------------------------------ the rows


def _n2(c: _Contrast) -> _Outcome:
    """Each tool some arm's reference calls sits in one slot in every block that holds it."""
    required: list[str] = []
    for a in c.arms:
        required += [n for n, _ in a.v("N2")["slots"] if n not in required]
    out = _Outcome(detail=f"{len(required)} required tools, one slot each")
    for name in required:
        where = {a.id: a.v("N2")["block"].index(name) for a in c.arms if name in a.v("N2")["block"]}
        if len(set(where.values())) > 1:
            slots = sorted(set(where.values()))
            out.problems.append((list(where), f"{name} sits in slots {slots}"))
    return out


def _n3(c: _Contrast) -> _Outcome:
    out = _equal(c, "N3", lambda v: v["base"], "system prompt less filler")

    def filler_ok(a: _Arm) -> str | None:
        v = a.v("N3")
        if not v["filler"]:
            return None
        if a.spec.control is None or a.spec.knob not in _FILLER_KNOBS:
            return "carries a filler; only a distractor or block control may"
        return None if v["filler_at_end"] else "its filler is not at the end of the system prompt"

    out.problems += _each(c, "N3", filler_ok, "").problems
    return out


def _n4(c: _Contrast) -> _Outcome:
    if c.knob == "arguments":
        return _equal(c, "N4", lambda v: v["names_and_reads"], "block names, order and reads")
    return _equal(c, "N4", lambda v: v["block"], "tool block")


def _n6(c: _Contrast) -> _Outcome:
    out = _equal(
        c,
        "N6",
        lambda v: (v["template"], v["knob_slots"], v["slot_tokens"]),
        "template, knob slots and slot tokens",
    )
    out.problems += _each(
        c,
        "N6",
        lambda a: None if a.v("N6")["renders"] else "the prompt is not its template filled",
        "",
    ).problems
    return out


def _n8(c: _Contrast) -> _Outcome:
    return _each(
        c,
        "N8",
        lambda a: (
            None
            if a.v("N8")["sizes"] == [LINE_BYTES]
            else f"observation sizes {a.v('N8')['sizes']}, not {LINE_BYTES} bytes"
        ),
        f"every answer {LINE_BYTES} bytes",
    )


def depth_band(c: _Contrast, control: _Arm) -> tuple[int, int]:
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


def _n9(c: _Contrast) -> _Outcome:
    out = _Outcome(detail="")
    bands = []
    for a in c.controls:
        lo, hi = depth_band(c, a)
        s = a.v("N9")["seeded_tokens"]
        bands.append(f"{a.id} {lo}<{s}<={hi}")
        if not lo < s <= hi:
            out.problems.append(([a.id], f"seeded {s} tokens, outside the band ({lo}, {hi}]"))
    out.detail = "; ".join(bands)
    return out


def _n21(c: _Contrast) -> _Outcome:
    def test(a: _Arm) -> str | None:
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

    return _each(c, "N21", test, "six lookalikes, each sharing the level's digits")


def _n23(c: _Contrast) -> _Outcome:
    return _each(
        c,
        "N23",
        lambda a: (
            None
            if _within(a.v("N23")["seeded_tokens"], a.spec.level)
            else f"seeded {a.v('N23')['seeded_tokens']} tokens, not {a.spec.level} within {BAND}"
        ),
        f"seeded tokens = level within {BAND}",
    )


def _n25(c: _Contrast) -> _Outcome:
    def test(a: _Arm) -> str | None:
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

    return _each(c, "N25", test, "faults split over the right tools, first takes the odd one")


def _n26(c: _Contrast) -> _Outcome:
    """fL+len(fH) seeds what fH's failed calls add over fL's, within two tokens."""
    out = _Outcome()
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
        if not _within(s, want):
            out.problems.append(
                (
                    [a.id],
                    f"seeded {s} tokens; the higher arm's failed calls "
                    f"add {want}, more than {BAND} apart",
                )
            )
    out.detail = "; ".join(notes)
    return out


def _n28(c: _Contrast) -> _Outcome:
    out = _equal(c, "N28", lambda v: v["right_slots"], "right tools' slots")
    out.problems += _each(
        c,
        "N28",
        lambda a: (
            None
            if all(s < 8 for s in a.v("N28")["right_slots"])
            else f"right tools in slots {a.v('N28')['right_slots']}, not all among the first eight"
        ),
        "",
    ).problems
    return out


def _n29(c: _Contrast) -> _Outcome:
    out = _Outcome(report=True)
    notes = []
    for a in c.controls:
        own = a.v("N29")
        higher = c.level_arm(a.spec, a.spec.control or 0).measured["N29"]["block_tokens"]
        extra = higher - own["block_tokens"]
        notes.append(f"{a.id} filler {own['filler_tokens']} vs extra block {extra}")
        if not _within(own["filler_tokens"], extra):
            out.problems.append(
                (
                    [a.id],
                    f"filler {own['filler_tokens']} tokens; the higher "
                    f"arm's extra block is {extra}, more than {BAND} apart",
                )
            )
    out.detail = "; ".join(notes) or "no control arm: block tokens reported"
    return out


def _n31(c: _Contrast) -> _Outcome:
    def test(a: _Arm) -> str | None:
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

    return _each(c, "N31", test, "level-2 stated values on each stage call")


def _request_match(c: _Contrast, row: str) -> _Outcome:
    out = _Outcome()
    notes = []
    for a in c.controls:
        own = a.v(row)["request_tokens"]
        want = c.level_arm(a.spec, a.spec.control or 0).measured[row]["request_tokens"]
        notes.append(f"{a.id} {own} vs {want}")
        if not _within(own, want):
            out.problems.append(
                (
                    [a.id],
                    f"request {own} tokens; the higher arm's is {want}, more than {BAND} apart",
                )
            )
    out.detail = "; ".join(notes)
    return out


def _n33(c: _Contrast) -> _Outcome:
    out = _each(
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


def _n35(c: _Contrast) -> _Outcome:
    out = _equal(c, "N35", lambda v: v["reads"], "the reads")

    def test(a: _Arm) -> str | None:
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

    out.problems += _each(c, "N35", test, "").problems
    return out


HOLDERS: dict[str, Callable[[_Contrast], _Outcome]] = {
    "N1": lambda c: _equal(c, "N1", lambda v: v, "scenario"),
    "N2": _n2,
    "N3": _n3,
    "N4": _n4,
    "N5": lambda c: _Outcome(report=True, detail="block tokens by arm"),
    "N6": _n6,
    "N7": lambda c: _equal(c, "N7", lambda v: v["count"], "instruction words in tool names"),
    "N8": _n8,
    "N9": _n9,
    "N11": lambda c: _equal(c, "N11", lambda v: v, "strictness"),
    "N12": lambda c: _equal(c, "N12", lambda v: v, "hashes"),
    "N19": lambda c: _each(
        c,
        "N19",
        lambda a: (
            None
            if a.v("N19")["lookalike_tools"] == LOOKALIKE_TOOLS
            else f"{a.v('N19')['lookalike_tools']} lookalike tools, not {LOOKALIKE_TOOLS}"
        ),
        f"{LOOKALIKE_TOOLS} lookalike tools",
    ),
    "N20": lambda c: _equal(c, "N20", lambda v: v["block_tokens"], "block tokens"),
    "N21": _n21,
    "N22": lambda c: _equal(c, "N22", lambda v: v, "right tools' schemas"),
    "N23": _n23,
    "N24": lambda c: _each(
        c,
        "N24",
        lambda a: "; ".join(a.v("N24")["offenders"]) or None,
        "seeded calls are reads answered ok",
    ),
    "N25": _n25,
    "N26": _n26,
    "N27": lambda c: _each(
        c,
        "N27",
        lambda a: (
            None
            if a.v("N27")["tools"] == a.spec.level
            else f"{a.v('N27')['tools']} tools, not {a.spec.level}"
        ),
        "tools = level",
    ),
    "N28": _n28,
    "N29": _n29,
    "N30": lambda c: _equal(c, "N30", lambda v: v["stage_schemas"], "stage schemas less extras"),
    "N31": _n31,
    "N32": lambda c: _request_match(c, "N32"),
    "N33": _n33,
    "N34": lambda c: _request_match(c, "N34"),
    "N35": _n35,
}


# ------------------------------------------------------------------ the contrast


_KNOBS_OF = {r.id: r.knobs() for r in ROWS}
_BINDS = {r.id: f"binds {r.who_text()}" for r in ROWS}


def _row_verdict(row: PinRow, c: _Contrast) -> tuple[RowVerdict, list[Violation], Reported | None]:
    values = {a.id: figure(row.id, a.v(row.id)) for a in c.arms} if row.measurable else {}
    if not row.measurable:
        return (
            RowVerdict(
                row=row.id, verdict="unmeasured", values={}, detail=row.unmeasured_reason or ""
            ),
            [],
            None,
        )
    if c.knob not in _KNOBS_OF[row.id]:
        return (
            RowVerdict(row=row.id, verdict="not applicable", values=values, detail=_BINDS[row.id]),
            [],
            None,
        )
    if row.controls_only(c.knob) and not c.controls:
        return (
            RowVerdict(
                row=row.id,
                verdict="not applicable",
                values=values,
                detail="no control arm in this contrast",
            ),
            [],
            None,
        )
    outcome = HOLDERS[row.id](c)
    reports_only = row.mode == "reported" or c.knob in row.report_only_for
    reported = None
    if reports_only or outcome.report:
        fig = REPORTED_FIGURES.get(row.id)
        shown = {a.id: fig(a.v(row.id)) for a in c.arms} if fig else values
        reported = Reported(row=row.id, values=shown, detail=outcome.detail or row.holds)
    violations = []
    if not reports_only:
        for arms, detail in outcome.problems:
            shown = {a: values[a] for a in arms if a in values}
            violations.append(Violation(row=row.id, arms=arms, values=shown, detail=detail))
    verdict: PinVerdict
    if violations:
        verdict = "violated"
    elif reports_only or (row.id == "N29" and not c.controls):
        verdict = "reported"
    else:
        verdict = "held"
    detail = "; ".join(v.detail for v in violations) or outcome.detail
    line = RowVerdict(row=row.id, verdict=verdict, values=values, detail=detail)
    return line, violations, reported


def _order(spec: ArmSpec) -> tuple[int, int, int]:
    return (spec.control is not None, spec.level, spec.control or 0)


def check_pins(
    bundles: Mapping[str, TaskBundle],
    *,
    measurements: Mapping[str, PinMeasurement] | None = None,
    companion: Companion | None = None,
) -> PinReport:
    """Hold every row across one contrast: {arm_id: bundle} of one knob at one seed.

    A control row (N9, N26, N29, N32, N34) compares a control with the plain arm at its
    higher level; when the contrast lacks that arm it is generated at the same seed.
    `measurements` may pass measure_pins results already taken, keyed like `bundles`.
    """
    if not bundles:
        raise PinError("check_pins needs at least one bundle: pass {arm_id: bundle, ...}")
    arms: list[_Arm] = []
    for key, bundle in bundles.items():
        if key != bundle.arm_id:
            raise PinError(
                f"bundle under {key!r} is of arm {bundle.arm_id!r}; key each by its arm id"
            )
        m = measurements[key] if measurements and key in measurements else measure_pins(bundle)
        arms.append(_Arm(id=key, spec=parse_arm_id(key), m=m))
    knobs = sorted({a.spec.knob for a in arms})
    seeds = sorted({a.m.seed for a in arms})
    if len(knobs) > 1:
        raise PinError(f"a contrast is one knob's arms; got {', '.join(knobs)}: check each apart")
    if len(seeds) > 1:
        raise PinError(f"a contrast is one seed; got seeds {seeds}: use check_plan for many")
    arms.sort(key=lambda a: _order(a.spec))
    first = arms[0]
    c = _Contrast(
        knob=knobs[0], seed=seeds[0], arms=arms, companion=companion or _generated(seeds[0])
    )
    rows, violations, reported = [], [], []
    for row in ROWS:
        verdict, vs, rep = _row_verdict(row, c)
        rows.append(verdict)
        violations += vs
        if rep is not None:
            reported.append(rep)
    return PinReport(
        knob=c.knob,
        split=first.spec.split,
        strictness=first.spec.strictness,
        seed=c.seed,
        arms=[a.id for a in arms],
        rows=rows,
        violations=violations,
        reported=reported,
    )
