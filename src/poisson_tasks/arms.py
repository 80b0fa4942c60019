"""Arms: one setting of one knob. KnobDef, ArmSpec, arm ids (render and parse), levels and turn
budgets; nothing of the probe's figures or any report (those sit above: knobtable.knob_status).

An arm id is the canonical text of an ArmSpec; `parse_arm_id(arm_id(spec)) == spec` and
`arm_id(parse_arm_id(text)) == text` for every valid id.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

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

GENERATOR_VERSION = "2"
DISTRACTOR_BLOCK = 16
DEPTH_TOP = 8  # the deepest level: its goal is the ladder's top stage, so nothing lies above it
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


def _base_turns(level: int) -> int:
    return _BASE_TURNS


def _never(level: int) -> bool:
    return False


@dataclass(frozen=True, slots=True)
class KnobDef:
    """Everything the design says about one knob; every knob table of this package derives from it.

    prefix: the letter of its arm ids (depth:d3). levels: the candidate levels a sweep chooses
    from. valid: the accepted levels as inclusive ranges, and valid_text the same in words.
    controls: the control arms a study of the knob must carry; control_form how a control is
    written (`h`: depth:d1+h8, `len`: faults:f0+len(f4), None: the knob has none, for the reason
    no_control). turns: the reference turns of a level (calls plus the reply turn). suffix: text
    every arm id of the knob ends with. shipped: the knob probe shipped it; published: a knob of
    the published cards; experimental: it did not make tasks harder on either calibrated model.
    gap_reason: why a level between two valid ranges has no task ({level} is filled in).
    also_called: the knob's other name, which a card's "experimental" line prints beside it.
    read_on: the rate a card reads the knob on (depth: leaky, reaching the goal; its strict rate is
    compared as well). overshoots: whether a level's block offers the stage above the goal, so a
    model can carry the record past it. probe_control: how the knob probe reads the control arm
    (`drop`: the drop must also show from the control to the top; `length`: the base less the
    length control must stay small; None: a control's difference is reported and decides nothing). schema_changes: the knob changes the stage tools' schemas, so
    pin N4 holds the block's names, order and read tools rather than every byte. filler_control:
    its control arm matches the longer arm's length with filler at the end of the system prompt
    (pin N3 allows a filler there and nowhere else).
    """

    name: Knob
    prefix: str
    varies: str
    levels: tuple[int, ...]
    valid: tuple[tuple[int, int], ...]
    valid_text: str
    controls: tuple[str, ...] = ()
    control_form: Literal["h", "len"] | None = "len"
    no_control: str = ""
    turns: Callable[[int], int] = _base_turns
    suffix: str = ""
    shipped: bool = False
    published: bool = False
    experimental: bool = False
    gap_reason: str = ""
    also_called: str = ""
    read_on: Strictness = "strict"
    overshoots: Callable[[int], bool] = _never
    probe_control: Literal["drop", "length"] | None = None
    schema_changes: bool = False
    filler_control: bool = False

    def level_ok(self, level: int) -> bool:
        return any(lo <= level <= hi for lo, hi in self.valid)


_DEFS: tuple[KnobDef, ...] = (
    KnobDef(
        name="depth",
        prefix="d",
        varies="how many chained stage calls the goal is away",
        levels=(1, 2, 3, 5, DEPTH_TOP),
        valid=((1, DEPTH_TOP),),
        valid_text=f"1 to {DEPTH_TOP}",
        controls=("depth:d1+h8", "depth:d2+h5"),
        control_form="h",
        turns=lambda level: level + 1,
        published=True,
        read_on="leaky",
        overshoots=lambda level: level < DEPTH_TOP,
    ),
    KnobDef(
        name="distractor",
        prefix="r",
        varies="how many of the sixteen tools in the block are irrelevant",
        levels=(0, 2, 4, 8, 14),
        valid=((0, 14),),
        valid_text="0 to 14",
        controls=("distractor:r0+len(r8)@k16", "distractor:r2+len(r14)@k16"),
        suffix=f"@k{DISTRACTOR_BLOCK}",
        published=True,
        experimental=True,
        also_called="the decoy-tools dial",
        filler_control=True,
    ),
    KnobDef(
        name="similarity",
        prefix="s",
        varies="how many digits each lookalike ledger's four-digit number shares, in place, "
        "with the target's",
        levels=(0, 1, 2, 3),
        valid=((0, 3),),
        valid_text="0 to 3",
        control_form=None,
        no_control="similarity holds length equal across its levels",
    ),
    KnobDef(
        name="faults",
        prefix="f",
        varies="how many calls on the way answer unavailable and must be made again",
        levels=(0, 1, 2, 4),
        valid=((0, FAULTS_MAX),),
        valid_text=f"0 to {FAULTS_MAX}",
        controls=("faults:f0+len(f4)",),
        turns=lambda level: _BASE_TURNS + level,
        shipped=True,
        probe_control="drop",
    ),
    KnobDef(
        name="history",
        prefix="t",
        varies="how many tokens of earlier tool work sit in the conversation",
        levels=(0, 300, 600, 1200, 2400),
        valid=((0, 0), (HISTORY_MIN, HISTORY_MAX)),
        valid_text=f"0, or {HISTORY_MIN} to {HISTORY_MAX} tokens",
        control_form=None,
        no_control="length is history's own factor",
        shipped=True,
        gap_reason="a seeded history of {level} tokens cannot be built: the shortest read call "
        "and answer is about 84 tokens at some seeds",
    ),
    KnobDef(
        name="block",
        prefix="k",
        varies="how many tools are offered",
        levels=(8, 16, 32, 64),
        valid=((8, 258),),
        valid_text="8 to 258",
        controls=("block:k8+len(k64)",),
        probe_control="drop",
        filler_control=True,
    ),
    KnobDef(
        name="arguments",
        prefix="a",
        varies="how many values each stage call must carry",
        levels=(2, 4, 6, 8),
        valid=((2, 8),),
        valid_text="2 to 8",
        controls=("arguments:a2+len(a8)",),
        probe_control="drop",
        schema_changes=True,
    ),
    KnobDef(
        name="shape",
        prefix="w",
        varies="how many records four stage calls advance side by side",
        levels=(1, 2, 4),
        valid=((1, 2), (4, 4)),
        valid_text="1, 2 or 4",
        controls=("shape:w1+len(w4)",),
        turns=lambda level: 5,
        shipped=True,
        overshoots=lambda level: level > 1,
        probe_control="length",
    ),
    KnobDef(
        name="spread",
        prefix="p",
        varies="how many tool answers the entry code is split across",
        levels=(1, 2, 4),
        valid=((1, 4),),
        valid_text="1 to 4",
        control_form=None,
        no_control="spread holds length equal across its levels",
        turns=lambda level: 7,
    ),
)

# Every table below is derived from the definitions above.
KNOB_DEFS: dict[Knob, KnobDef] = {d.name: d for d in _DEFS}
KNOBS: tuple[Knob, ...] = tuple(KNOB_DEFS)
PREFIX: dict[Knob, str] = {d.name: d.prefix for d in _DEFS}
CONTROL_ARMS: dict[Knob, tuple[str, ...]] = {d.name: d.controls for d in _DEFS}
SHIPPED_KNOBS: tuple[Knob, ...] = tuple(d.name for d in _DEFS if d.shipped)


def knob_def(name: str) -> KnobDef:
    """The definition of the knob called `name` (a knob name read as text: a card's, a contrast's)."""
    for definition in _DEFS:
        if definition.name == name:
            return definition
    raise ArmError(f"knob {name!r} is unknown; valid knobs: {', '.join(KNOBS)}")


def _in_words(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


_WITH_CONTROL = _in_words([d.name for d in _DEFS if d.control_form is not None])
_H_KNOBS = _in_words([d.name for d in _DEFS if d.control_form == "h"])
_SUFFIX_KNOBS = _in_words([d.name for d in _DEFS if d.suffix])
_SUFFIXES = " or ".join(sorted({d.suffix for d in _DEFS if d.suffix}))


def nearest_levels(knob: Knob, level: int) -> tuple[int, ...]:
    """The valid levels closest to `level` on either side (one where it lies beyond the ends)."""
    valid = KNOB_DEFS[knob].valid
    below = [min(hi, level) for lo, hi in valid if lo <= level]
    above = [max(lo, level) for lo, hi in valid if hi >= level]
    out = sorted({*([max(below)] if below else []), *([min(above)] if above else [])})
    return tuple(out)


def _why(knob: Knob, level: int) -> str:
    """The knob's reason for a level that falls in a gap between its valid ranges."""
    definition = KNOB_DEFS[knob]
    lowest, highest = definition.valid[0][0], definition.valid[-1][1]
    if definition.gap_reason and lowest < level < highest:
        return f" ({definition.gap_reason.format(level=level)})"
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
        definition = KNOB_DEFS[self.knob]
        if not definition.level_ok(self.level):
            raise ArmError(
                f"level {self.level} is outside the {self.knob} design{_why(self.knob, self.level)}; "
                f"valid levels: {definition.valid_text}, nearest "
                f"{_nearest_text(self.knob, self.level)} "
                f"(candidates {', '.join(map(str, levels(self.knob)))})"
            )
        if self.control is not None:
            if definition.control_form is None:
                raise ArmError(
                    f"control on {self.knob} is refused: {self.knob} has no control arm "
                    f"(only {_WITH_CONTROL} have one)"
                )
            if isinstance(self.control, bool) or not isinstance(self.control, int):
                raise ArmError(f"control must be an integer level, got {self.control!r}")
            if not definition.level_ok(self.control):
                raise ArmError(
                    f"control level {self.control} is outside the {self.knob} design; "
                    f"valid levels: {definition.valid_text}, nearest "
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
        return KNOB_DEFS[self.knob].turns(self.level)

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
    if knob not in KNOB_DEFS:
        raise ArmError(f"knob {knob!r} is unknown; valid knobs: {', '.join(KNOBS)}")
    return KNOB_DEFS[knob].levels


def arm_id(spec: ArmSpec) -> str:
    """Render an ArmSpec as its canonical id, e.g. depth:d3, distractor:r0+len(r8)@k16."""
    definition = KNOB_DEFS[spec.knob]
    p = definition.prefix
    text = f"{spec.knob}:{p}{spec.level}"
    if spec.control is not None:
        text += (
            f"+h{spec.control}" if definition.control_form == "h" else f"+len({p}{spec.control})"
        )
    text += definition.suffix
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
    definition = KNOB_DEFS[k]
    prefix = definition.prefix
    if m["p"] != prefix:
        raise ArmError(
            f"arm id {text!r}: {k} levels are written {k}:{prefix}<level>, e.g. {k}:{prefix}{levels(k)[1]}"
        )
    control: int | None = None
    if m["h"] is not None:
        if definition.control_form != "h":
            raise ArmError(
                f"arm id {text!r}: +h<level> is {_H_KNOBS}'s control; {k} uses +len({prefix}<level>)"
            )
        control = int(m["h"])
    if m["lp"] is not None:
        if definition.control_form == "h":
            raise ArmError(
                f"arm id {text!r}: {k}'s control is written +h<level>, e.g. {definition.controls[0]}"
            )
        if m["lp"] != prefix:
            raise ArmError(
                f"arm id {text!r}: the control must name a {k} level, +len({prefix}<level>)"
            )
        control = int(m["lc"])
    if definition.suffix:
        if m["k"] is None or f"@k{int(m['k'])}" != definition.suffix:
            example = f"{k}:{prefix}{definition.levels[-2]}{definition.suffix}"
            raise ArmError(
                f"arm id {text!r}: {k} arms end with {definition.suffix}, e.g. {example}"
            )
    elif m["k"] is not None:
        raise ArmError(f"arm id {text!r}: only {_SUFFIX_KNOBS} arms carry {_SUFFIXES}")
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
