"""Arms: one setting of one knob. ArmSpec, arm ids (render and parse), levels, turn budgets.

An arm id is the canonical text of an ArmSpec; `parse_arm_id(arm_id(spec)) == spec` and
`arm_id(parse_arm_id(text)) == text` for every valid id.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from poisson_tasks.errors import ArmError

Knob = Literal[
    "depth", "distractor", "similarity", "faults", "history", "block", "arguments", "shape", "spread"
]
Strictness = Literal["strict", "leaky"]
Split = Literal["eval", "train"]

KNOBS: tuple[Knob, ...] = (
    "depth", "distractor", "similarity", "faults", "history", "block", "arguments", "shape", "spread"
)
GENERATOR_VERSION = "2"

# One letter per knob, used in arm ids: depth:d3, distractor:r8@k16, faults:f2 ...
PREFIX: dict[Knob, str] = {
    "depth": "d", "distractor": "r", "similarity": "s", "faults": "f", "history": "t",
    "block": "k", "arguments": "a", "shape": "w", "spread": "p",
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


def _valid_range(knob: Knob) -> str:
    return {
        "depth": "1 to 8",
        "distractor": "0 to 14",
        "similarity": "0 to 3",
        "faults": "0 or more",
        "history": "0 or more tokens",
        "block": "8 to 258",
        "arguments": "2 to 8",
        "shape": "1, 2 or 4",
        "spread": "1 to 4",
    }[knob]


def _level_ok(knob: Knob, level: int) -> bool:
    if knob == "depth":
        return 1 <= level <= 8
    if knob == "distractor":
        return 0 <= level <= 14
    if knob == "similarity":
        return 0 <= level <= 3
    if knob in ("faults", "history"):
        return level >= 0
    if knob == "block":
        return 8 <= level <= 258
    if knob == "arguments":
        return 2 <= level <= 8
    if knob == "shape":
        return level in (1, 2, 4)
    return 1 <= level <= 4  # spread


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
                f"level {self.level} is outside the {self.knob} design; valid levels: "
                f"{_valid_range(self.knob)} (candidates {', '.join(map(str, levels(self.knob)))})"
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
                    f"valid levels: {_valid_range(self.knob)}"
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
    return _CANDIDATES[knob]  # type: ignore[index]


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
    m = _ID.match(text.strip()) if isinstance(text, str) else None
    if m is None:
        raise ArmError(
            f"arm id {text!r} is not of the form knob:<letter><level>[+control][@k16][/train][/leaky];"
            " examples: depth:d3, distractor:r8@k16, depth:d1+h8, faults:f0+len(f4)"
        )
    knob = m["knob"]
    if knob not in KNOBS:
        raise ArmError(f"knob {knob!r} in arm id {text!r} is unknown; valid knobs: {', '.join(KNOBS)}")
    k: Knob = knob  # type: ignore[assignment]
    prefix = PREFIX[k]
    if m["p"] != prefix:
        raise ArmError(f"arm id {text!r}: {k} levels are written {k}:{prefix}<level>, e.g. {k}:{prefix}{levels(k)[1]}")
    control: int | None = None
    if m["h"] is not None:
        if k != "depth":
            raise ArmError(f"arm id {text!r}: +h<level> is depth's control; {k} uses +len({prefix}<level>)")
        control = int(m["h"])
    if m["lp"] is not None:
        if k == "depth":
            raise ArmError(f"arm id {text!r}: depth's control is written +h<level>, e.g. depth:d1+h8")
        if m["lp"] != prefix:
            raise ArmError(f"arm id {text!r}: the control must name a {k} level, +len({prefix}<level>)")
        control = int(m["lc"])
    if k == "distractor":
        if m["k"] is None or int(m["k"]) != DISTRACTOR_BLOCK:
            raise ArmError(f"arm id {text!r}: distractor arms end with @k{DISTRACTOR_BLOCK}, e.g. distractor:r8@k16")
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
