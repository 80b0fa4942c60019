"""Arms: one setting of one knob. ArmSpec, arm ids (render and parse), levels, turn budgets.

An arm id is the canonical text of an ArmSpec; `parse_arm_id(arm_id(spec)) == spec` and
`arm_id(parse_arm_id(text)) == text` for every valid id.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict

from poisson_tasks.errors import ArmError

Knob = Literal[
    "depth",
    "distractor",
    "similarity",
    "faults",
    "history",
    "block",
    "arguments",
    "shape",
    "spread",
]
Strictness = Literal["strict", "leaky"]
Split = Literal["eval", "train"]

KNOBS: tuple[Knob, ...] = (
    "depth",
    "distractor",
    "similarity",
    "faults",
    "history",
    "block",
    "arguments",
    "shape",
    "spread",
)
GENERATOR_VERSION = "2"

# One letter per knob, used in arm ids: depth:d3, distractor:r8@k16, faults:f2 ...
PREFIX: dict[Knob, str] = {
    "depth": "d",
    "distractor": "r",
    "similarity": "s",
    "faults": "f",
    "history": "t",
    "block": "k",
    "arguments": "a",
    "shape": "w",
    "spread": "p",
}
_CANDIDATES: dict[Knob, tuple[int, ...]] = {
    "depth": (1, 2, 3, 5, 8),
    "distractor": (0, 2, 4, 8, 14),
    "similarity": (0, 1, 2, 3),
    "faults": (0, 1, 2, 4),
    "history": (0, 300, 600, 1200, 2400),
    "block": (8, 16, 32, 64),
    "arguments": (2, 4, 6, 8),
    "shape": (1, 2, 4),
    "spread": (1, 2, 4),
}
# The control arms a study of each knob must carry (see knobs-and-arms.md).
CONTROL_ARMS: dict[Knob, tuple[str, ...]] = {
    "depth": ("depth:d1+h8", "depth:d2+h5"),
    "distractor": ("distractor:r0+len(r8)@k16", "distractor:r2+len(r14)@k16"),
    "faults": ("faults:f0+len(f4)",),
    "block": ("block:k8+len(k64)",),
    "arguments": ("arguments:a2+len(a8)",),
    "shape": ("shape:w1+len(w4)",),
    "similarity": (),
    "history": (),
    "spread": (),
}
SHIPPED_KNOBS: tuple[Knob, ...] = ("faults", "history", "shape")
DISTRACTOR_BLOCK = 16
_NO_CONTROL: frozenset[Knob] = frozenset({"similarity", "spread", "history"})
_BASE_TURNS = 3  # two chained stage calls plus the reply turn


# Bounds no spec range gives. History below HISTORY_MIN (but above 0) has no task: no seeded
# read call and answer is shorter than about 84 tokens at some seed, so the floor keeps a margin and
# every accepted level builds at every seed. The upper bounds keep a task inside a model's context
# and the generator's work small (history:t65536 and faults:f64 build in milliseconds).
HISTORY_MIN = 100
HISTORY_MAX = 65536
FAULTS_MAX = 64
MAX_ARM_ID = 64  # the longest valid id is about 40 characters
LEVEL_DIGITS = 12  # a level or control written with more digits is refused before it is read
# Each knob's valid levels as inclusive ranges.
_VALID: dict[Knob, tuple[tuple[int, int], ...]] = {
    "depth": ((1, 8),),
    "distractor": ((0, 14),),
    "similarity": ((0, 3),),
    "faults": ((0, FAULTS_MAX),),
    "history": ((0, 0), (HISTORY_MIN, HISTORY_MAX)),
    "block": ((8, 258),),
    "arguments": ((2, 8),),
    "shape": ((1, 2), (4, 4)),
    "spread": ((1, 4),),
}


def _valid_range(knob: Knob) -> str:
    return {
        "depth": "1 to 8",
        "distractor": "0 to 14",
        "similarity": "0 to 3",
        "faults": f"0 to {FAULTS_MAX}",
        "history": f"0, or {HISTORY_MIN} to {HISTORY_MAX} tokens",
        "block": "8 to 258",
        "arguments": "2 to 8",
        "shape": "1, 2 or 4",
        "spread": "1 to 4",
    }[knob]


def _level_ok(knob: Knob, level: int) -> bool:
    return any(lo <= level <= hi for lo, hi in _VALID[knob])


def nearest_levels(knob: Knob, level: int) -> tuple[int, ...]:
    """The valid levels closest to `level` on either side (one where it lies beyond the ends)."""
    below = [min(hi, level) for lo, hi in _VALID[knob] if lo <= level]
    above = [max(lo, level) for lo, hi in _VALID[knob] if hi >= level]
    out = sorted({*([max(below)] if below else []), *([min(above)] if above else [])})
    return tuple(out)


def _why(knob: Knob, level: int) -> str:
    if knob == "history" and 0 < level < HISTORY_MIN:
        return (
            f" (a seeded history of {level} tokens cannot be built: the shortest read call and "
            "answer is about 84 tokens at some seeds)"
        )
    return ""


def _nearest_text(knob: Knob, level: int) -> str:
    return " or ".join(f"{PREFIX[knob]}{v}" for v in nearest_levels(knob, level))


@dataclass(frozen=True, slots=True)
class ArmSpec:
    """One arm: a knob at a level, optionally a control standing in for a higher level's length."""

    knob: Knob
    level: int
    control: int | None = None
    strictness: Strictness = "strict"
    split: Split = "eval"
    generator_version: str = GENERATOR_VERSION

    def __post_init__(self) -> None:
        if self.knob not in KNOBS:
            raise ArmError(f"knob {self.knob!r} is unknown; valid knobs: {', '.join(KNOBS)}")
        if isinstance(self.level, bool) or not isinstance(self.level, int):
            raise ArmError(f"level must be an integer, got {self.level!r}")
        if not _level_ok(self.knob, self.level):
            raise ArmError(
                f"level {self.level} is outside the {self.knob} design{_why(self.knob, self.level)}; "
                f"valid levels: {_valid_range(self.knob)}, nearest "
                f"{_nearest_text(self.knob, self.level)} "
                f"(candidates {', '.join(map(str, levels(self.knob)))})"
            )
        if self.control is not None:
            if self.knob in _NO_CONTROL:
                raise ArmError(
                    f"control on {self.knob} is refused: {self.knob} has no control arm "
                    "(only depth, distractor, faults, block, arguments and shape have one)"
                )
            if isinstance(self.control, bool) or not isinstance(self.control, int):
                raise ArmError(f"control must be an integer level, got {self.control!r}")
            if not _level_ok(self.knob, self.control):
                raise ArmError(
                    f"control level {self.control} is outside the {self.knob} design; "
                    f"valid levels: {_valid_range(self.knob)}, nearest "
                    f"{_nearest_text(self.knob, self.control)}"
                )
            if self.control <= self.level:
                raise ArmError(
                    f"control level {self.control} must be higher than level {self.level}: "
                    "a control stands in for a higher level's length"
                )
        if self.strictness not in ("strict", "leaky"):
            raise ArmError(f"strictness {self.strictness!r} is unknown; valid: strict, leaky")
        if self.split not in ("eval", "train"):
            raise ArmError(f"split {self.split!r} is unknown; valid: eval, train")
        if self.generator_version != GENERATOR_VERSION:
            raise ArmError(
                f"generator_version {self.generator_version!r} is not this build's "
                f"({GENERATOR_VERSION!r}); install the matching poisson-tasks release"
            )

    @property
    def reference_turns(self) -> int:
        """The minimum turns: the calls the arm needs plus the reply turn."""
        if self.knob == "depth":
            return self.level + 1
        if self.knob == "faults":
            return _BASE_TURNS + self.level
        if self.knob == "shape":
            return 5
        if self.knob == "spread":
            return 7
        return _BASE_TURNS

    @property
    def min_calls(self) -> int:
        """The fewest tool calls a task of this arm can be solved in."""
        return self.reference_turns - 1

    def max_turns(self, slack: int) -> int:
        """The turn budget a study gives this arm: reference turns plus the study's slack."""
        if slack < 0:
            raise ArmError(f"slack must be 0 or more, got {slack}")
        return self.reference_turns + slack

    @property
    def is_control(self) -> bool:
        return self.control is not None

    @property
    def id(self) -> str:
        return arm_id(self)


def levels(knob: str) -> tuple[int, ...]:
    """The candidate levels of a knob (which of them a study sweeps is the study's decision)."""
    if knob not in _CANDIDATES:
        raise ArmError(f"knob {knob!r} is unknown; valid knobs: {', '.join(KNOBS)}")
    return _CANDIDATES[knob]


def arm_id(spec: ArmSpec) -> str:
    """Render an ArmSpec as its canonical id, e.g. depth:d3, distractor:r0+len(r8)@k16."""
    p = PREFIX[spec.knob]
    text = f"{spec.knob}:{p}{spec.level}"
    if spec.control is not None:
        text += f"+h{spec.control}" if spec.knob == "depth" else f"+len({p}{spec.control})"
    if spec.knob == "distractor":
        text += f"@k{DISTRACTOR_BLOCK}"
    if spec.split != "eval":
        text += f"/{spec.split}"
    if spec.strictness != "strict":
        text += f"/{spec.strictness}"
    return text


_ID = re.compile(
    r"^(?P<knob>[a-z]+):(?P<p>[a-z])(?P<level>0|[1-9][0-9]*)"
    r"(?:\+h(?P<h>0|[1-9][0-9]*)|\+len\((?P<lp>[a-z])(?P<lc>0|[1-9][0-9]*)\))?"
    r"(?:@k(?P<k>[0-9]+))?"
    r"(?:/(?P<split>train|eval))?(?:/(?P<strict>leaky|strict))?$"
)


def parse_arm_id(text: str) -> ArmSpec:
    """Parse an arm id back into its ArmSpec; raises ArmError naming what is wrong."""
    m = _ID.match(text.strip()) if isinstance(text, str) and len(text) <= MAX_ARM_ID else None
    if m is None:
        shown = repr(text) if len(repr(text)) <= 80 else repr(text)[:77] + "..."
        raise ArmError(
            f"arm id {shown} is not of the form knob:<letter><level>[+control][@k16][/train][/leaky];"
            " examples: depth:d3, distractor:r8@k16, depth:d1+h8, faults:f0+len(f4)"
        )
    for group in ("level", "h", "lc", "k"):
        if m[group] is not None and len(m[group]) > LEVEL_DIGITS:
            raise ArmError(
                f"arm id {text[:40]!r}: a level of {len(m[group])} digits is far outside every "
                f"knob's design (levels have at most {LEVEL_DIGITS} digits); see `poisson-tasks knobs`"
            )
    knob = m["knob"]
    if knob not in KNOBS:
        raise ArmError(
            f"knob {knob!r} in arm id {text!r} is unknown; valid knobs: {', '.join(KNOBS)}"
        )
    k: Knob = knob
    prefix = PREFIX[k]
    if m["p"] != prefix:
        raise ArmError(
            f"arm id {text!r}: {k} levels are written {k}:{prefix}<level>, e.g. {k}:{prefix}{levels(k)[1]}"
        )
    control: int | None = None
    if m["h"] is not None:
        if k != "depth":
            raise ArmError(
                f"arm id {text!r}: +h<level> is depth's control; {k} uses +len({prefix}<level>)"
            )
        control = int(m["h"])
    if m["lp"] is not None:
        if k == "depth":
            raise ArmError(
                f"arm id {text!r}: depth's control is written +h<level>, e.g. depth:d1+h8"
            )
        if m["lp"] != prefix:
            raise ArmError(
                f"arm id {text!r}: the control must name a {k} level, +len({prefix}<level>)"
            )
        control = int(m["lc"])
    if k == "distractor":
        if m["k"] is None or int(m["k"]) != DISTRACTOR_BLOCK:
            raise ArmError(
                f"arm id {text!r}: distractor arms end with @k{DISTRACTOR_BLOCK}, e.g. distractor:r8@k16"
            )
    elif m["k"] is not None:
        raise ArmError(f"arm id {text!r}: only distractor arms carry @k16")
    spec = ArmSpec(
        knob=k,
        level=int(m["level"]),
        control=control,
        split="train" if m["split"] == "train" else "eval",
        strictness="leaky" if m["strict"] == "leaky" else "strict",
    )
    if arm_id(spec) != text.strip():
        raise ArmError(f"arm id {text!r} is not canonical; write it as {arm_id(spec)!r}")
    return spec


def all_arms(knob: str) -> tuple[ArmSpec, ...]:
    """Every candidate level of a knob plus its control arms, in sweep order."""
    out = [ArmSpec(knob=knob, level=lv) for lv in levels(knob)]  # type: ignore[arg-type]
    out += [parse_arm_id(a) for a in CONTROL_ARMS[knob]]  # type: ignore[index]
    return tuple(out)


# --- the knob probe: what the design's authors measured once, on another build -------------------

Verdict = Literal["bites", "does not bite", "top easier", "cannot tell"]
PROBE_MODELS: tuple[str, ...] = ("gpt-5-nano", "Qwen3-8B")


def _signed(x: float) -> str:
    return f"{x:.3f}".replace("-", "\u2212")


class ProbeFigure(BaseModel):
    """One contrast of the probe: a difference of strict pass@1, with its clustered 95% interval."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    value: float
    low: float
    high: float

    @property
    def text(self) -> str:
        return f"{_signed(self.value)} [{_signed(self.low)}, {_signed(self.high)}]"


class ProbeCell(BaseModel):
    """One knob on one model: the verdict and the figures behind it, as the probe recorded them.

    delta is the base arm's strict pass@1 minus the top arm's; control is the control arm's minus
    the top arm's; length_control (shape) is the base's minus the length control's; base_pass is
    given where the verdict rests on it (cannot tell).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str
    verdict: Verdict
    delta: ProbeFigure
    control: ProbeFigure | None = None
    length_control: ProbeFigure | None = None
    base_pass: float | None = None
    note: str = ""

    @property
    def text(self) -> str:
        """The cell as knobs-and-arms.md prints it."""
        out = f"{self.verdict}: "
        if self.base_pass is not None:
            out += f"base passed {self.base_pass:.3f}; "
        out += f"Δ {self.delta.text}"
        if self.control is not None:
            out += f", control {self.control.text}"
        if self.length_control is not None:
            out += f", length control {self.length_control.text}"
        if self.note:
            out += f"; {self.note}"
        return out


class KnobStatusRow(BaseModel):
    """One probed knob: whether it shipped, the arms the probe ran, and one cell per model."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    knob: Knob
    shipped: bool
    base_arm: str
    top_arm: str
    control_arm: str | None
    cells: tuple[ProbeCell, ...]

    def cell(self, model: str) -> ProbeCell:
        for c in self.cells:
            if c.model == model:
                return c
        raise KeyError(f"the probe has no {model!r} cell; models: {', '.join(PROBE_MODELS)}")


class KnobStatus(BaseModel):
    """The knob-probe table of knobs-and-arms.md, with its provenance and its three disclosures.

    These figures were measured once, by the design's authors, on another (earlier) build of the
    generator; they are reported as such, never as measurements of this build.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    rows: tuple[KnobStatusRow, ...]
    models: tuple[str, ...] = PROBE_MODELS
    tasks: int = 60
    attempts: int = 2
    metric: str = "strict pass@1"
    measured_on_this_build: bool = False
    provenance: str
    rule: str
    disclosure_phase1_check: str
    disclosure_crash_and_rerun: str
    disclosure_more_time: str

    @property
    def disclosures(self) -> tuple[str, str, str]:
        """The three things about how the probe ran, in the published order."""
        return (
            self.disclosure_phase1_check,
            self.disclosure_crash_and_rerun,
            self.disclosure_more_time,
        )

    @property
    def shipped(self) -> tuple[Knob, ...]:
        return tuple(r.knob for r in self.rows if r.shipped)

    def row(self, knob: str) -> KnobStatusRow | None:
        """The knob's row, or None for a knob the probe did not measure (depth, distractor)."""
        for r in self.rows:
            if r.knob == knob:
                return r
        return None


_PROVENANCE = (
    "Measured once by the design's authors, on gpt-5-nano and Qwen3-8B, on another (earlier) "
    "build of the generator, not on this one: 60 tasks x 2 attempts per arm, strict pass@1, "
    "each knob's lowest and highest level and its control arm where it has one, with "
    "task-clustered 95% intervals. These figures describe that build and those two models once; "
    "they are not a measurement of this build."
)
_RULE = (
    "A knob bites on a model when the interval excludes zero and the drop is at least 0.15; "
    "faults, block and arguments need the same drop from their control arm to the top, and "
    "shape counts either direction, as long as its length control differs from the base by "
    "less than 0.15. Cannot tell replaces \u201cdoes not bite\u201d where the base arm passed "
    "below 0.15 on that model; it also replaces \u201ctop easier\u201d where the top arm passed "
    "above 0.85. A knob ships when it bites on at least one model and is easier at the top on "
    "neither."
)
_DISCLOSURES = (
    "Phase 1's check changed after its first result (gpt-5-nano). As registered, phase 1 "
    "stopped the probe if any base-arm episode made no tool call, and gpt-5-nano's first "
    "phase 1 stopped on 1 of 21 (the model asked for the record id in plain text; nothing on "
    "our side failed). After seeing that, on 2026-10-13, the check was changed to the published "
    "cards' own rule: stop when more than 10% of the 21 base episodes make no tool call (3 or "
    "more). The recorded phase 1 was read again once under it, with no episode run again: 1 of "
    "21, so it passed, and the probe went on in the same folder within the same $4.00 cap. "
    "Qwen3-8B's phase 1 passed under the first rule.",
    "A crash at the start, and one arm run again (gpt-5-nano). The run crashed at its start on "
    "macOS's limit on open files, with its first arm, similarity:s0, in flight. The limit was "
    "raised and the run resumed. Episodes in flight at the crash failed on our side, so that "
    "arm was void (instrument rate 0.104; every other arm 0.000) and was run once more, as the "
    "pre-registration allows once for a cause on our side. The void attempt is kept. In all, "
    "gpt-5-nano cost $1.5981 of the $4.00 cap.",
    "More time for Qwen3-8B. The Qwen3-8B run on Colab reached its two-hour allowance with 14 "
    "of its 18 arms done and stopped cleanly. It was given more time and resumed, the 14 "
    "finished arms kept and the last four run with the same settings; it used 2.56 hours in all.",
)


def _f(value: float, low: float, high: float) -> ProbeFigure:
    return ProbeFigure(value=value, low=low, high=high)


def _row(knob: Knob, nano: ProbeCell, qwen: ProbeCell) -> KnobStatusRow:
    lv = levels(knob)
    p = PREFIX[knob]
    controls = CONTROL_ARMS[knob]
    return KnobStatusRow(
        knob=knob,
        shipped=knob in SHIPPED_KNOBS,
        base_arm=f"{knob}:{p}{lv[0]}",
        top_arm=f"{knob}:{p}{lv[-1]}",
        control_arm=controls[0] if controls else None,
        cells=(nano, qwen),
    )


def knob_status() -> KnobStatus:
    """The knob-probe table of knobs-and-arms.md: seven knobs x two models, with provenance.

    Depth and distractor are the published cards' knobs and were not part of the probe, so they
    have no row (row() returns None). Figures are as published, measured on another build.
    """
    nano, qwen = PROBE_MODELS
    rows = (
        _row(
            "similarity",
            ProbeCell(model=nano, verdict="does not bite", delta=_f(-0.050, -0.150, 0.042)),
            ProbeCell(model=qwen, verdict="does not bite", delta=_f(0.000, 0.000, 0.000)),
        ),
        _row(
            "faults",
            ProbeCell(
                model=nano,
                verdict="does not bite",
                delta=_f(0.400, 0.300, 0.500),
                control=_f(0.142, 0.033, 0.250),
            ),
            ProbeCell(
                model=qwen,
                verdict="bites",
                delta=_f(0.825, 0.742, 0.900),
                control=_f(0.308, 0.150, 0.458),
            ),
        ),
        _row(
            "history",
            ProbeCell(model=nano, verdict="bites", delta=_f(0.683, 0.608, 0.750)),
            ProbeCell(model=qwen, verdict="bites", delta=_f(0.308, 0.217, 0.417)),
        ),
        _row(
            "block",
            ProbeCell(
                model=nano,
                verdict="does not bite",
                delta=_f(-0.067, -0.142, 0.000),
                control=_f(-0.008, -0.058, 0.042),
            ),
            ProbeCell(
                model=qwen,
                verdict="does not bite",
                delta=_f(0.000, 0.000, 0.000),
                control=_f(0.000, 0.000, 0.000),
            ),
        ),
        _row(
            "arguments",
            ProbeCell(
                model=nano,
                verdict="does not bite",
                delta=_f(0.092, 0.000, 0.183),
                control=_f(0.000, -0.108, 0.100),
            ),
            ProbeCell(
                model=qwen,
                verdict="does not bite",
                delta=_f(0.150, 0.067, 0.242),
                control=_f(0.100, 0.017, 0.183),
            ),
        ),
        _row(
            "shape",
            ProbeCell(
                model=nano,
                verdict="does not bite",
                delta=_f(-0.300, -0.425, -0.175),
                length_control=_f(0.158, 0.058, 0.258),
            ),
            ProbeCell(
                model=qwen,
                verdict="bites",
                delta=_f(0.358, 0.233, 0.483),
                length_control=_f(0.000, -0.033, 0.033),
                note="shape:w4 harder",
            ),
        ),
        _row(
            "spread",
            ProbeCell(model=nano, verdict="top easier", delta=_f(-0.250, -0.358, -0.142)),
            ProbeCell(
                model=qwen, verdict="cannot tell", delta=_f(0.008, 0.000, 0.033), base_pass=0.008
            ),
        ),
    )
    return KnobStatus(
        rows=rows,
        provenance=_PROVENANCE,
        rule=_RULE,
        disclosure_phase1_check=_DISCLOSURES[0],
        disclosure_crash_and_rerun=_DISCLOSURES[1],
        disclosure_more_time=_DISCLOSURES[2],
    )
