"""What a pin row's hold rule works on: a contrast's arms, their measurements, and the outcome.

PinMeasurement is one bundle's values by row id; a Contrast is one knob's arms at one seed, and
can reach a plain arm it names but does not hold; an Outcome is what holding one row found.
`equal`, `each` and `within` are the shapes most hold rules take.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from poisson_tasks.arms import ArmSpec
from poisson_tasks.transcript import BAND

Figure = int | str


class PinMeasurement(BaseModel):
    """One bundle's pin-ledger values: `measured` by row id, `unmeasured` row id -> reason."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    arm_id: str
    seed: int
    split: str
    task_id: str
    measured: dict[str, Any]
    unmeasured: dict[str, str]

    def value(self, row: str) -> Any:
        return self.measured[row]


@dataclass
class Arm:
    """One arm of a contrast: its id, spec and measurement."""

    id: str
    spec: ArmSpec
    measurement: PinMeasurement

    def value(self, row: str) -> Any:
        return self.measurement.measured[row]


@dataclass
class Outcome:
    """What holding one row found: (arms, why) per problem, a one-line account, a report flag."""

    problems: list[tuple[list[str], str]] = field(default_factory=list)
    detail: str = ""
    report: bool = False


Companion = Callable[[ArmSpec], PinMeasurement]


@dataclass
class Contrast:
    """The arms of one contrast and a way to reach an arm it names but does not hold."""

    knob: str
    seed: int
    arms: list[Arm]
    companion: Companion
    _cache: dict[str, PinMeasurement] = field(default_factory=dict)

    @property
    def controls(self) -> list[Arm]:
        return [a for a in self.arms if a.spec.control is not None]

    def level_arm(self, like: ArmSpec, level: int) -> PinMeasurement:
        """The plain arm of `like`'s knob at `level`: from the contrast, else generated."""
        spec = ArmSpec(knob=like.knob, level=level, split=like.split, strictness=like.strictness)
        for arm in self.arms:
            if arm.spec == spec:
                return arm.measurement
        key = spec.id
        if key not in self._cache:
            self._cache[key] = self.companion(spec)
        return self._cache[key]


def equal(contrast: Contrast, row: str, key: Callable[[Any], Any], what: str) -> Outcome:
    """The row's keyed value must be one value across the contrast."""
    first = contrast.arms[0]
    base = key(first.value(row))
    odd = [a.id for a in contrast.arms[1:] if key(a.value(row)) != base]
    if not odd:
        return Outcome(detail=f"{what} equal across {len(contrast.arms)} arms")
    return Outcome(problems=[([first.id, *odd], f"{what} differs from {first.id}'s")])


def each(
    contrast: Contrast,
    row: str,
    test: Callable[[Arm], str | None],
    what: str,
    arms: list[Arm] | None = None,
) -> Outcome:
    """Every arm (or the given ones) must pass `test`; a failing arm is named with its reason."""
    out = Outcome(detail=what)
    for arm in contrast.arms if arms is None else arms:
        problem = test(arm)
        if problem:
            out.problems.append(([arm.id], problem))
    return out


def within(tokens: int, want: int) -> bool:
    """Two token counts at most BAND apart."""
    return abs(tokens - want) <= BAND


def short(hexdigest: str) -> str:
    """A hash's first eight characters, as a figure shows it."""
    return hexdigest[:8]
