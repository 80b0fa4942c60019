"""The knob probe's figures and its result: a cell per knob and model, a row per knob, the
differences behind them, and the probe's whole outcome as probe.json holds it.

Only data types, importing nothing of the package, so they sit low in the layers: knobtable.knob_status()
fills them from the published figures (probe.published) and the knob definitions, and
probe.table from records. A row names its knob by its name; where a row is built, the name is
checked against arms (knobtable.knob_status, probe.table's parse_arm_id). Outside the generator hash:
changing one changes no task id and makes no card stale.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

ProbeVerdict = Literal["bites", "does not bite", "top easier", "cannot tell"]
PROBE_MODELS: tuple[str, ...] = ("gpt-5-nano", "Qwen3-8B")


def _signed(delta: float) -> str:
    return f"{delta:.3f}".replace("-", "\u2212")


class ProbeFigure(BaseModel):
    """One difference of strict pass@1 between two arms, with its task-clustered interval."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

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

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    model: str
    verdict: ProbeVerdict
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
    """One probed knob: whether it shipped, the arms the probe ran, and one cell per model.

    knob is an arms knob name, checked where the row is built (this module imports no arms).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    knob: str
    shipped: bool
    base_arm: str
    top_arm: str
    control_arm: str | None
    cells: tuple[ProbeCell, ...]

    def cell(self, model: str) -> ProbeCell:
        for cell in self.cells:
            if cell.model == model:
                return cell
        raise KeyError(f"the probe has no {model!r} cell; models: {', '.join(PROBE_MODELS)}")


class KnobStatus(BaseModel):
    """The knob-probe table of knobs-and-arms.md, with its provenance and its three disclosures.

    These figures were measured once, by the design's authors, on another (earlier) build of the
    generator; they are reported as such, never as measurements of this build.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

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
    def shipped(self) -> tuple[str, ...]:
        return tuple(r.knob for r in self.rows if r.shipped)

    def row(self, knob: str) -> KnobStatusRow | None:
        """The knob's row, or None for a knob the probe did not measure (depth, distractor)."""
        for row in self.rows:
            if row.knob == knob:
                return row
        return None


class PassDifference(BaseModel):
    """One paired difference of strict pass@1 between two arms of a knob on one model, over the
    tasks both arms scored (a cell's delta, control or length control, with its interval)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    model: str
    knob: str
    name: Literal["delta", "control", "length control"]
    minuend: str
    subtrahend: str
    minuend_pass: float
    subtrahend_pass: float
    value: float
    low: float
    high: float
    pairs: int

    @property
    def figure(self) -> ProbeFigure:
        return ProbeFigure(value=self.value, low=self.low, high=self.high)


class ArmRun(BaseModel):
    """Where one arm's scored episodes came from, and whether that attempt counts."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    model: str
    arm: str
    folder: str
    episodes: int
    scored: int
    planned: int
    instrument: int
    instrument_rate: float
    void: bool
    used: bool


class RunProvenance(BaseModel):
    """One run folder of the probe: what it ran under and the digest of its records."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    model: str
    phase: str
    folder: str
    served_model: str
    provider: str
    episodes: int
    sessions: int
    stop_reasons: list[str]
    preregistration_hash: str
    seed_list_hash: str
    generator_hash: str
    engine_hash: str
    vocabulary_hash: str
    package_version: str
    records_sha256: str


class Phase1Check(BaseModel):
    """Phase 1 of one model, read under the registered rule."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    model: str
    scored: int
    no_call: int
    limit: float
    stopped: bool
    complete: bool
    rule: str


class Unmeasured(BaseModel):
    """A knob on a model that has no verdict, and why."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    model: str
    knob: str
    reason: str


class ProbeResult(BaseModel):
    """The probe's outcome: the knob table (in knob_status()'s shape), every paired difference,
    the phase-1 checks, every arm attempt (void ones kept), the disclosures and the provenance."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    format: str = "poisson-tasks/probe-result@1"
    name: str
    registration_hash: str
    measured_on_this_build: bool = True
    reference_policies: bool
    models: list[str]
    tasks: int
    attempts: int
    metric: str = "strict pass@1"
    rule: str
    rows: list[KnobStatusRow]
    unmeasured: list[Unmeasured]
    contrasts: list[PassDifference]  # probe.json's key since the first probe: kept, so bytes hold
    phase1: list[Phase1Check]
    arm_runs: list[ArmRun]
    disclosures: list[str]
    provenance: list[RunProvenance]

    @property
    def shipped(self) -> tuple[str, ...]:
        return tuple(r.knob for r in self.rows if r.shipped)

    def row(self, knob: str) -> KnobStatusRow | None:
        return next((r for r in self.rows if r.knob == knob), None)
