"""check_pins: hold every row the "who" column names across the arms of one contrast.

A contrast is the arms of one knob (levels and controls) at one seed, split and strictness.
A violated row refuses the contrast, naming the row, the arms and their measured values; a
reported row records a number that is meant to move (N5, N7 on shape, N29, N33) and never refuses.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict

from poisson_tasks.arms import ArmSpec, parse_arm_id
from poisson_tasks.bundle import TaskBundle
from poisson_tasks.errors import PinError
from poisson_tasks.generator import generate
from poisson_tasks.pins.holding import (
    Arm,
    Companion,
    Contrast,
    Figure,
    PinMeasurement,
)
from poisson_tasks.pins.measure import measure_pins
from poisson_tasks.pins.row import PinRow
from poisson_tasks.pins.rows import BY_ID, ROWS
from poisson_tasks.pins.rows.history import depth_band

__all__ = [
    "NAME_WIDTH",
    "Companion",
    "Figure",
    "PinReport",
    "PinVerdict",
    "Reported",
    "RowVerdict",
    "Violation",
    "check_pins",
    "depth_band",
    "figure",
]

PinVerdict = Literal["held", "violated", "reported", "not applicable", "unmeasured"]
NAME_WIDTH = max(len(row.name) for row in ROWS)  # the name column of a printed report


class Violation(BaseModel):
    """One refusing row: which arms disagree or fail, their measured figures, and why."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    row: str
    arms: list[str]
    values: dict[str, Figure]
    detail: str

    def line(self) -> str:
        vals = ", ".join(f"{a}={v}" for a, v in self.values.items())
        return f"{BY_ID[self.row].label} refused ({', '.join(self.arms)}): {self.detail} [{vals}]"


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
        for line in self.rows:
            head = f"{line.row:<4} {BY_ID[line.row].name:<{NAME_WIDTH}}  {line.verdict:<15}"
            out.append("  " + "  ".join(x for x in (head, _compact(line.values), line.detail) if x))
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


def _generated(seed: int) -> Companion:
    def make(spec: ArmSpec) -> PinMeasurement:
        return measure_pins(generate(spec, seed))

    return make


def figure(row: str, value: object) -> Figure:
    """A row's measured value in one short figure (an int where the row is a count)."""
    shown = BY_ID[row].figure
    if shown is None:
        raise PinError(f"pin row {row} is not measured on a bundle, so it has no figure")
    return shown(value)


# ------------------------------------------------------------------ the contrast


def _row_verdict(
    row: PinRow, contrast: Contrast
) -> tuple[RowVerdict, list[Violation], Reported | None]:
    values = (
        {a.id: figure(row.id, a.value(row.id)) for a in contrast.arms} if row.measurable else {}
    )
    if not row.measurable:
        return (
            RowVerdict(
                row=row.id, verdict="unmeasured", values={}, detail=row.unmeasured_reason or ""
            ),
            [],
            None,
        )
    if contrast.knob not in row.knobs():
        return (
            RowVerdict(
                row=row.id,
                verdict="not applicable",
                values=values,
                detail=f"binds {row.who_text()}",
            ),
            [],
            None,
        )
    if row.controls_only(contrast.knob) and not contrast.controls:
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
    if row.hold is None:  # a measurable row always has one (PinRow checks it)
        raise PinError(f"pin row {row.id} has no hold rule")
    outcome = row.hold(contrast)
    reports_only = row.mode == "reported" or contrast.knob in row.report_only_for
    reported = None
    if reports_only or outcome.report:
        fig = row.reported_figure
        shown = {a.id: fig(a.value(row.id)) for a in contrast.arms} if fig else values
        reported = Reported(row=row.id, values=shown, detail=outcome.detail or row.holds)
    violations = []
    if not reports_only:
        for arms, detail in outcome.problems:
            shown = {a: values[a] for a in arms if a in values}
            violations.append(Violation(row=row.id, arms=arms, values=shown, detail=detail))
    verdict: PinVerdict
    if violations:
        verdict = "violated"
    elif reports_only or (row.reports_without_controls and not contrast.controls):
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
    arms: list[Arm] = []
    for key, bundle in bundles.items():
        if key != bundle.arm_id:
            raise PinError(
                f"bundle under {key!r} is of arm {bundle.arm_id!r}; key each by its arm id"
            )
        measurement = (
            measurements[key] if measurements and key in measurements else measure_pins(bundle)
        )
        arms.append(Arm(id=key, spec=parse_arm_id(key), measurement=measurement))
    knobs = sorted({a.spec.knob for a in arms})
    seeds = sorted({a.measurement.seed for a in arms})
    if len(knobs) > 1:
        raise PinError(f"a contrast is one knob's arms; got {', '.join(knobs)}: check each apart")
    if len(seeds) > 1:
        raise PinError(f"a contrast is one seed; got seeds {seeds}: use check_plan for many")
    arms.sort(key=lambda arm: _order(arm.spec))
    first = arms[0]
    contrast = Contrast(
        knob=knobs[0], seed=seeds[0], arms=arms, companion=companion or _generated(seeds[0])
    )
    rows, violations, reported = [], [], []
    for row in ROWS:
        verdict, vs, rep = _row_verdict(row, contrast)
        rows.append(verdict)
        violations += vs
        if rep is not None:
            reported.append(rep)
    return PinReport(
        knob=contrast.knob,
        split=first.spec.split,
        strictness=first.spec.strictness,
        seed=contrast.seed,
        arms=[a.id for a in arms],
        rows=rows,
        violations=violations,
        reported=reported,
    )
