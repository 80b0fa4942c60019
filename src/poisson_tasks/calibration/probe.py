"""The knob probe as a recipe: its pre-registration, the plans it runs, and its analysis.

A probe registration (`format: poisson-tasks/probe@1`) names one or more models, the knobs to
probe, the design (tasks, attempts, seed string), phase 1's stop rule, the reading rules, a spend
cap per model and the thresholds. For each model it becomes two ordinary pre-registrations:
phase 1 (each knob's base arm, the first `phase1.tasks` seeds, `phase1.attempts` attempts) and the
arms (each knob's lowest and highest candidate level and its control arm where it has one).
Running them is `poisson_tasks.probe`; this module only reads what they recorded.

The analysis reads every run folder under a probe folder and nothing else, so `poisson-tasks
probe --from RUNDIR` gives the same bytes as the run that made it, in any process. Per knob and
model: Δ = base strict pass@1 − top strict pass@1, paired over tasks, with the card's own
task-clustered paired interval (calibration.intervals.paired_interval at the registration's
confidence); "control" is control − top; for shape, "length control" is base − control.
The verdicts follow knobs-and-arms.md, with the numbers taken from the registration's `rules`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from poisson_tasks.arms import (
    CONTROL_ARMS,
    KNOBS,
    PREFIX,
    ArmSpec,
    Knob,
    arm_id,
    levels,
    parse_arm_id,
)
from poisson_tasks.bundle import canonical_json, digest
from poisson_tasks.calibration.cardjson import round_figure
from poisson_tasks.calibration.intervals import paired_interval
from poisson_tasks.calibration.records import EpisodeRecord, records_from_run, records_sha256
from poisson_tasks.calibration.stats import Interval, call_pair
from poisson_tasks.errors import PreregistrationError, RunFolderError
from poisson_tasks.files import os_problem, read_limited
from poisson_tasks.prereg import (
    FORMAT as PREREG_FORMAT,
)
from poisson_tasks.prereg import (
    Budget,
    Decoding,
    Execution,
    Plan,
    Serving,
    Thresholds,
    validate_preregistration,
)
from poisson_tasks.probefigures import KnobStatusRow, ProbeCell, ProbeFigure, ProbeVerdict
from poisson_tasks.runfolder import HEADER_MAX_BYTES, read_header

PROBE_FORMAT = "poisson-tasks/probe@1"
PROBED_KNOBS: tuple[Knob, ...] = (
    "similarity",
    "faults",
    "history",
    "block",
    "arguments",
    "shape",
    "spread",
)
# Knobs whose drop must also show from their control arm to the top (knobs-and-arms.md).
CONTROL_DROP_KNOBS: frozenset[str] = frozenset({"faults", "block", "arguments"})
REGISTRATION = "registration.json"
RESULT_JSON = "probe.json"
RESULT_MD = "probe.md"
_STRICT = ConfigDict(extra="forbid", frozen=True, strict=True)
_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class ProbeModel(BaseModel):
    """One model the probe runs, under a short label that names its folder and its column."""

    model_config = _STRICT

    label: str
    model: Serving


class ProbeDesign(BaseModel):
    """What each model runs: the knobs, tasks x attempts per arm, the seed string, turn limits."""

    model_config = _STRICT

    knobs: list[str] = Field(default_factory=lambda: [str(k) for k in PROBED_KNOBS])
    tasks: int = 60
    attempts: int = 2
    seed_string: str
    turn_limit: int = 32
    slack: int = 4


class Phase1(BaseModel):
    """Phase 1: the base arms first; the probe of a model stops when more than `no_call_max` of
    its scored phase-1 episodes make no tool call (the published cards' own rule)."""

    model_config = _STRICT

    tasks: int = 3
    attempts: int = 1
    no_call_max: float = 0.10


class ProbeRules(BaseModel):
    """The reading rules of knobs-and-arms.md, as numbers the registration fixes in advance."""

    model_config = _STRICT

    bite: float = 0.15
    base_floor: float = 0.15
    top_ceiling: float = 0.85
    length_control_max: float = 0.15
    reruns: int = 1


class ProbeRegistration(BaseModel):
    """The whole probe document."""

    model_config = _STRICT

    format: Literal["poisson-tasks/probe@1"]
    name: str
    description: str = ""
    models: list[ProbeModel]
    decoding: Decoding
    design: ProbeDesign
    phase1: Phase1 = Field(default_factory=Phase1)
    rules: ProbeRules = Field(default_factory=ProbeRules)
    budget: Budget
    execution: Execution = Field(default_factory=Execution)
    thresholds: Thresholds = Field(default_factory=Thresholds)

    def model_named(self, label: str) -> ProbeModel:
        for model in self.models:
            if model.label == label:
                return model
        raise RunFolderError(
            f"the probe has no model labelled {label!r}; labels: "
            + ", ".join(m.label for m in self.models)
        )


# --------------------------------------------------------------------------- arms and plans


def knob_arms(knob: str) -> tuple[str, str, str | None]:
    """(base arm, top arm, control arm or None): the lowest and highest candidate levels."""
    lv = levels(knob)
    typed_knob: Knob = parse_arm_id(f"{knob}:{PREFIX[knob]}{lv[0]}").knob  # type: ignore[index]
    controls = CONTROL_ARMS[typed_knob]
    return (
        arm_id(ArmSpec(typed_knob, lv[0])),
        arm_id(ArmSpec(typed_knob, lv[-1])),
        controls[0] if controls else None,
    )


def probe_arms(knobs: Sequence[str]) -> tuple[str, ...]:
    """Every arm the probe runs, knob by knob: base, top, then control."""
    out: list[str] = []
    for knob in knobs:
        base, top, control = knob_arms(knob)
        out += [base, top] + ([control] if control else [])
    return tuple(out)


def _prereg_doc(
    reg: ProbeRegistration, pm: ProbeModel, phase: str, arms: Sequence[str], tasks: int, att: int
) -> dict[str, Any]:
    specs = [parse_arm_id(a) for a in arms]
    horizon = max(s.max_turns(reg.design.slack) for s in specs)
    return {
        "format": PREREG_FORMAT,
        "name": f"{reg.name}-{pm.label}-{phase}",
        "description": f"knob probe {reg.name}, model {pm.label}, {phase}",
        "model": pm.model.model_dump(mode="json", exclude_none=True),
        "decoding": reg.decoding.model_dump(mode="json"),
        "design": {
            "arms": list(arms),
            "tasks": tasks,
            "attempts": att,
            "seed_string": reg.design.seed_string,
            "turn_limit": reg.design.turn_limit,
            "slack": reg.design.slack,
            "horizon": horizon,
        },
        "budget": reg.budget.model_dump(mode="json", exclude_none=True),
        "execution": reg.execution.model_dump(mode="json"),
        "thresholds": reg.thresholds.model_dump(mode="json"),
    }


def phase1_plan(reg: ProbeRegistration, label: str) -> Plan:
    """Phase 1 of one model: each probed knob's base arm at the first phase1.tasks seeds."""
    pm = reg.model_named(label)
    bases = [knob_arms(k)[0] for k in reg.design.knobs]
    doc = _prereg_doc(reg, pm, "phase1", bases, reg.phase1.tasks, reg.phase1.attempts)
    return validate_preregistration(doc, source=f"{reg.name} ({label}, phase 1)")


def arms_plan(reg: ProbeRegistration, label: str, only: str | None = None) -> Plan:
    """The arms of one model (or the one arm `only`, for a rerun of a void arm)."""
    pm = reg.model_named(label)
    arms = [only] if only is not None else list(probe_arms(reg.design.knobs))
    phase = "arms" if only is None else "rerun"
    doc = _prereg_doc(reg, pm, phase, arms, reg.design.tasks, reg.design.attempts)
    return validate_preregistration(doc, source=f"{reg.name} ({label}, {phase})")


# --------------------------------------------------------------------------- validation


def _problems(exc: ValidationError) -> list[str]:
    out = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(document)"
        if err["type"] == "extra_forbidden":
            out.append(f"{where}: unknown key; remove it or check its spelling")
        elif err["type"] == "missing":
            out.append(f"{where}: required field is missing")
        else:
            out.append(f"{where}: {err['msg']} (got {err.get('input')!r})")
    return out


def validate_probe(doc: Mapping[str, Any]) -> ProbeRegistration:
    """Validate a probe registration; PreregistrationError carries one line per problem."""
    if not isinstance(doc, Mapping):
        raise PreregistrationError(["(document): must be a mapping of sections"])
    if doc.get("format") != PROBE_FORMAT:
        raise PreregistrationError(
            [f"format: must be {PROBE_FORMAT!r} for a probe, got {doc.get('format')!r}"]
        )
    try:
        reg = ProbeRegistration.model_validate(dict(doc))
    except ValidationError as exc:
        raise PreregistrationError(_problems(exc)) from None
    problems: list[str] = []
    if not reg.models:
        problems.append("models: empty; name at least one model to probe")
    seen: set[str] = set()
    for index, model in enumerate(reg.models):
        if not _LABEL.match(model.label):
            problems.append(
                f"models[{index}].label: {model.label!r} must be 1-64 letters, digits, '.', '_' "
                "or '-' (it names the model's folder)"
            )
        elif model.label in seen:
            problems.append(
                f"models[{index}].label: {model.label!r} is used twice; give each model its own"
            )
        seen.add(model.label)
    if not reg.design.knobs:
        problems.append("design.knobs: empty; list the knobs to probe, e.g. faults, history")
    for index, knob in enumerate(reg.design.knobs):
        if knob not in KNOBS:
            problems.append(
                f"design.knobs[{index}]: {knob!r} is not a knob; knobs: {', '.join(KNOBS)}"
            )
        elif reg.design.knobs.index(knob) != index:
            problems.append(f"design.knobs[{index}]: {knob} is listed twice")
    if reg.phase1.tasks < 1 or reg.phase1.attempts < 1:
        problems.append("phase1: tasks and attempts must be 1 or more")
    if reg.phase1.tasks > reg.design.tasks:
        problems.append(f"phase1.tasks: {reg.phase1.tasks} is more than design.tasks")
    if not 0.0 <= reg.phase1.no_call_max < 1.0:
        problems.append(f"phase1.no_call_max: must be in [0, 1), got {reg.phase1.no_call_max}")
    rules = reg.rules
    for field in ("bite", "base_floor", "top_ceiling", "length_control_max"):
        if not 0.0 < getattr(rules, field) < 1.0:
            problems.append(f"rules.{field}: must be in (0, 1), got {getattr(rules, field)}")
    if rules.reruns < 0:
        problems.append(f"rules.reruns: must be 0 or more, got {rules.reruns}")
    if problems:
        raise PreregistrationError(problems)
    for model in reg.models:  # each model's plans must validate as ordinary pre-registrations
        try:
            phase1_plan(reg, model.label)
            arms_plan(reg, model.label)
        except PreregistrationError as exc:
            raise PreregistrationError(
                [f"models[{model.label}]: {problem}" for problem in exc.problems]
            ) from None
    return reg


def registration_hash(reg: ProbeRegistration) -> str:
    return digest(reg.model_dump(mode="json"))


def measurement_hash(reg: ProbeRegistration) -> str:
    """The part a resumed probe must keep: everything but budget, execution and description."""
    doc = reg.model_dump(mode="json")
    return digest({k: v for k, v in doc.items() if k not in ("budget", "execution", "description")})


def read_registration(folder: Path) -> ProbeRegistration:
    path = folder / REGISTRATION
    if not path.is_file():
        raise RunFolderError(
            f"{folder} is not a probe folder: {REGISTRATION} is missing (run `poisson-tasks probe "
            "PREREG --out DIR` first)"
        )
    try:
        return ProbeRegistration.model_validate_json(
            read_limited(path, HEADER_MAX_BYTES), strict=False
        )
    except OSError as exc:
        raise RunFolderError(f"{path} cannot be read: {os_problem(exc)}") from None
    except ValidationError as exc:
        raise RunFolderError(f"{path} is damaged: {str(exc).splitlines()[0]}") from None


def registration_bytes(reg: ProbeRegistration) -> bytes:
    return canonical_json(reg.model_dump(mode="json")) + b"\n"


# --------------------------------------------------------------------------- folders


class RerunNote(BaseModel):
    """Written before a void arm is run again: which arm, the void folder kept, and the cause."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    arm: str
    void_folder: str
    cause: str


def model_folder(root: Path, label: str) -> Path:
    return root / label


def phase1_folder(root: Path, label: str) -> Path:
    return root / label / "phase1"


def arms_folder(root: Path, label: str) -> Path:
    return root / label / "arms"


def rerun_folders(root: Path, label: str) -> list[tuple[Path, RerunNote]]:
    """The reruns of a model in the order they were made: `<label>/rerun-N/` with its note
    `<label>/rerun-N.json`, written before the rerun starts."""
    out: list[tuple[int, Path, RerunNote]] = []
    base = root / label
    if not base.is_dir():
        return []
    for entry in base.iterdir():
        match = re.fullmatch(r"rerun-(\d+)\.json", entry.name)
        if match and entry.is_file():
            try:
                note = RerunNote.model_validate_json(read_limited(entry, HEADER_MAX_BYTES))
            except OSError as exc:
                raise RunFolderError(f"{entry} cannot be read: {os_problem(exc)}") from None
            out.append((int(match.group(1)), base / f"rerun-{match.group(1)}", note))
    return [(d, n) for _, d, n in sorted(out, key=lambda row: row[0])]


# --------------------------------------------------------------------------- the analysis


class Contrast(BaseModel):
    """One paired difference of strict pass@1 over the tasks both arms scored."""

    model_config = ConfigDict(frozen=True, extra="forbid")

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

    model_config = ConfigDict(frozen=True, extra="forbid")

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

    model_config = ConfigDict(frozen=True, extra="forbid")

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

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str
    scored: int
    no_call: int
    limit: float
    stopped: bool
    complete: bool
    rule: str


class Unmeasured(BaseModel):
    """A knob on a model that has no verdict, and why."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str
    knob: str
    reason: str


class ProbeResult(BaseModel):
    """The probe's outcome: the knob table (probefigures.knob_status()'s shape), every contrast, the
    phase-1 checks, every arm attempt (void ones kept), the disclosures and the provenance."""

    model_config = ConfigDict(frozen=True, extra="forbid")

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
    contrasts: list[Contrast]
    phase1: list[Phase1Check]
    arm_runs: list[ArmRun]
    disclosures: list[str]
    provenance: list[RunProvenance]

    @property
    def shipped(self) -> tuple[str, ...]:
        return tuple(r.knob for r in self.rows if r.shipped)

    def row(self, knob: str) -> KnobStatusRow | None:
        return next((r for r in self.rows if r.knob == knob), None)


def rule_text(reg: ProbeRegistration) -> str:
    rules = reg.rules
    return (
        f"A knob bites on a model when the interval of Δ (base − top) excludes zero and Δ >= "
        f"{rules.bite:g}; faults, block and arguments need the same drop from their control arm "
        f"to the top, and shape counts either direction, as long as its length control differs "
        f"from the base by less than {rules.length_control_max:g}. Top easier is the mirror (the "
        f"interval excludes zero and Δ <= −{rules.bite:g}, with the control's drop mirrored "
        f"likewise). Cannot tell replaces “does not bite” where the base arm passed below "
        f"{rules.base_floor:g}, and “top easier” where the top arm passed above "
        f"{rules.top_ceiling:g}. A knob ships when it bites on at least one model and is easier "
        "at the top on none."
    )


def _counts(
    recs: Sequence[EpisodeRecord], arm: str, seeds: Sequence[int]
) -> tuple[np.ndarray, np.ndarray]:
    index = {s: i for i, s in enumerate(seeds)}
    succ = np.zeros(len(seeds), dtype=np.int64)
    att = np.zeros(len(seeds), dtype=np.int64)
    for record in recs:
        if record.arm_id == arm and not record.instrument and record.seed in index:
            att[index[record.seed]] += 1
            succ[index[record.seed]] += int(record.strict_pass)
    return succ, att


def _rate(succ: np.ndarray, att: np.ndarray) -> float:
    keep = att > 0
    return float((succ[keep] / att[keep]).mean()) if keep.any() else 0.0


def _distinguishable(value: float, iv: Interval, bite: float) -> int:
    """+1 when the contrast is a drop of at least `bite` with an interval excluding zero, −1 for
    the mirror, 0 otherwise (the card's own call_pair)."""
    if call_pair(value, iv, bite) != "distinguishable":
        return 0
    return 1 if value > 0 else -1


class _Cell:
    """One arm's per-seed counts, and its strict pass@1."""

    def __init__(self, succ: np.ndarray, att: np.ndarray) -> None:
        self.succ, self.att = succ, att
        self.rate = _rate(succ, att)


def _contrast(
    reg: ProbeRegistration,
    model: str,
    knob: str,
    name: Literal["delta", "control", "length control"],
    minuend: tuple[str, _Cell],
    subtrahend: tuple[str, _Cell],
) -> tuple[Contrast, Interval]:
    res = paired_interval(
        minuend[1].succ,
        minuend[1].att,
        subtrahend[1].succ,
        subtrahend[1].att,
        reg.thresholds.confidence,
    )
    iv = Interval(low=res.low, high=res.high, point=res.diff)
    contrast = Contrast(
        model=model,
        knob=knob,
        name=name,
        minuend=minuend[0],
        subtrahend=subtrahend[0],
        minuend_pass=round_figure(minuend[1].rate),
        subtrahend_pass=round_figure(subtrahend[1].rate),
        value=round_figure(res.diff),
        low=round_figure(res.low),
        high=round_figure(res.high),
        pairs=res.pairs_used,
    )
    return contrast, iv


def read_verdict(
    reg: ProbeRegistration,
    knob: str,
    delta: tuple[float, Interval],
    control: tuple[float, Interval] | None,
    length_control: float | None,
    base_pass: float,
    top_pass: float,
) -> tuple[ProbeVerdict, str]:
    """The verdict of one knob on one model, and a note ("" or what decided it)."""
    rules = reg.rules
    direction = _distinguishable(delta[0], delta[1], rules.bite)
    note = ""
    if knob == "shape":
        held = length_control is not None and abs(length_control) < rules.length_control_max - 1e-12
        if direction != 0 and held:
            top = knob_arms(knob)[1]
            return "bites", f"{top} {'harder' if direction > 0 else 'easier'}"
        verdict: ProbeVerdict = "does not bite"
    else:
        if knob in CONTROL_DROP_KNOBS:
            if control is None:
                raise ValueError(f"{knob} needs its control contrast")
            if _distinguishable(control[0], control[1], rules.bite) != direction:
                direction = 0
        verdict = "bites" if direction > 0 else "top easier" if direction < 0 else "does not bite"
    if verdict == "does not bite" and base_pass < rules.base_floor - 1e-12:
        return "cannot tell", note
    if verdict == "top easier" and top_pass > rules.top_ceiling + 1e-12:
        return "cannot tell", f"top passed {top_pass:.3f}"
    return verdict, note


def phase1_check(reg: ProbeRegistration, root: Path, label: str) -> Phase1Check | None:
    """Phase 1 of one model read under the registered rule; None when it has not run."""
    folder = phase1_folder(root, label)
    if not (folder / "run.json").is_file():
        return None
    recs = [r for r in records_from_run(folder) if not r.instrument]
    plan = phase1_plan(reg, label)
    scored = {(r.arm_id, r.seed, r.attempt) for r in recs}
    no_call = sum(1 for r in recs if r.no_tool_call)
    limit = reg.phase1.no_call_max
    return Phase1Check(
        model=label,
        scored=len(recs),
        no_call=no_call,
        limit=limit,
        stopped=no_call > limit * len(recs) + 1e-12,
        complete=len(scored) >= plan.episodes,
        rule=(
            f"stop the probe of a model when more than {limit:.0%} of its scored phase-1 "
            f"episodes make no tool call (here more than {limit * len(recs):g} of {len(recs)})"
        ),
    )


def _arm_run(
    label: str, arm: str, folder: Path, root: Path, planned: int, th: Thresholds
) -> tuple[ArmRun, list[EpisodeRecord]]:
    recs = [r for r in records_from_run(folder) if r.arm_id == arm]
    instrument = sum(1 for r in recs if r.instrument)
    rate = instrument / len(recs) if recs else 0.0
    run = ArmRun(
        model=label,
        arm=arm,
        folder=folder.relative_to(root).as_posix(),
        episodes=len(recs),
        scored=len(recs) - instrument,
        planned=planned,
        instrument=instrument,
        instrument_rate=round_figure(rate),
        void=rate > th.instrument_max + 1e-12,
        used=False,
    )
    return run, recs


def effective_arm_runs(
    reg: ProbeRegistration, root: Path, label: str
) -> list[tuple[ArmRun, list[EpisodeRecord]]]:
    """Every attempt at every arm of one model, in order; the last attempt of an arm is the one
    used (a rerun follows the void attempt it replaces)."""
    folder = arms_folder(root, label)
    if not (folder / "run.json").is_file():
        return []
    per_arm = reg.design.tasks * reg.design.attempts
    out = [
        _arm_run(label, a, folder, root, per_arm, reg.thresholds)
        for a in probe_arms(reg.design.knobs)
    ]
    for rfolder, note in rerun_folders(root, label):
        out.append(_arm_run(label, note.arm, rfolder, root, per_arm, reg.thresholds))
    last = {run.arm: i for i, (run, _) in enumerate(out)}
    return [
        (run.model_copy(update={"used": last[run.arm] == i}), recs)
        for i, (run, recs) in enumerate(out)
    ]


def _provenance(root: Path, folder: Path, label: str, phase: str) -> RunProvenance:
    header = read_header(folder)
    return RunProvenance(
        model=label,
        phase=phase,
        folder=folder.relative_to(root).as_posix(),
        served_model=str(header.preregistration.get("model", {}).get("model", "")),
        provider=str(header.preregistration.get("model", {}).get("provider", "")),
        episodes=sum(s.episodes_written for s in header.sessions),
        sessions=len(header.sessions),
        stop_reasons=[s.stop_reason for s in header.sessions],
        preregistration_hash=header.preregistration_hash,
        seed_list_hash=header.seed_list_hash,
        generator_hash=header.generator_hash,
        engine_hash=header.engine_hash,
        vocabulary_hash=header.vocabulary_hash,
        package_version=header.package_version,
        records_sha256=records_sha256(folder),
    )


def _cell_for(
    reg: ProbeRegistration,
    label: str,
    knob: str,
    cells: Mapping[str, _Cell],
    contrasts: list[Contrast],
) -> ProbeCell:
    base, top, control = knob_arms(knob)
    delta, d_iv = _contrast(reg, label, knob, "delta", (base, cells[base]), (top, cells[top]))
    contrasts.append(delta)
    ctrl: Contrast | None = None
    ctrl_pair: tuple[float, Interval] | None = None
    length: Contrast | None = None
    if control is not None and knob != "shape":
        ctrl, c_iv = _contrast(
            reg, label, knob, "control", (control, cells[control]), (top, cells[top])
        )
        contrasts.append(ctrl)
        ctrl_pair = (ctrl.value, c_iv)
    if control is not None and knob == "shape":
        length, _ = _contrast(
            reg, label, knob, "length control", (base, cells[base]), (control, cells[control])
        )
        contrasts.append(length)
    verdict, note = read_verdict(
        reg,
        knob,
        (delta.value, d_iv),
        ctrl_pair,
        length.value if length is not None else None,
        cells[base].rate,
        cells[top].rate,
    )
    return ProbeCell(
        model=label,
        verdict=verdict,
        delta=delta.figure,
        control=ctrl.figure if ctrl is not None else None,
        length_control=length.figure if length is not None else None,
        base_pass=round_figure(cells[base].rate) if verdict == "cannot tell" and not note else None,
        note=note,
    )


def _spend(recs: Sequence[EpisodeRecord]) -> int:
    return sum(r.tokens or 0 for r in recs)


def analyse(root: Path | str) -> ProbeResult:
    """The probe's outcome, from the records under `root` and nothing else."""
    root = Path(root)
    reg = read_registration(root)
    th = reg.thresholds
    rows_cells: dict[str, list[ProbeCell]] = {k: [] for k in reg.design.knobs}
    unmeasured: list[Unmeasured] = []
    contrasts: list[Contrast] = []
    checks: list[Phase1Check] = []
    arm_runs: list[ArmRun] = []
    disclosures: list[str] = []
    provenance: list[RunProvenance] = []
    for pm in reg.models:
        label = pm.label
        check = phase1_check(reg, root, label)
        if check is None:
            unmeasured += [Unmeasured(model=label, knob=k, reason="not run") for k in rows_cells]
            disclosures.append(f"{label}: not run (no phase-1 folder under {label}/).")
            continue
        checks.append(check)
        provenance.append(_provenance(root, phase1_folder(root, label), label, "phase 1"))
        verdict = "stopped the probe" if check.stopped else "passed"
        disclosures.append(
            f"{label}: phase 1 ran the base arms first ({check.scored} scored episodes); "
            f"{check.no_call} made no tool call, so it {verdict} under the registered rule: "
            f"{check.rule}."
        )
        if check.stopped or not check.complete:
            why = "phase 1 stopped the probe" if check.stopped else "phase 1 is incomplete"
            unmeasured += [Unmeasured(model=label, knob=k, reason=why) for k in rows_cells]
            continue
        runs = effective_arm_runs(reg, root, label)
        if not runs:
            unmeasured += [
                Unmeasured(model=label, knob=k, reason="arms not run") for k in rows_cells
            ]
            continue
        provenance.append(_provenance(root, arms_folder(root, label), label, "arms"))
        for rfolder, note in rerun_folders(root, label):
            provenance.append(_provenance(root, rfolder, label, f"rerun of {note.arm}"))
            disclosures.append(
                f"{label}: {note.arm} was void in {note.void_folder}/ and was run once more in "
                f"{rfolder.relative_to(root).as_posix()}/, as the registration allows for a "
                f"cause on the runner's side; the cause given: {note.cause}. The void attempt "
                "is kept and listed below."
            )
        seeds = read_header(arms_folder(root, label)).seeds
        cells: dict[str, _Cell] = {}
        bad: dict[str, str] = {}
        spent = _spend(records_from_run(phase1_folder(root, label)))
        for run, recs in runs:
            arm_runs.append(run)
            spent += _spend(recs)
            if run.void:
                if not run.used:
                    continue
                disclosures.append(
                    f"{label}: {run.arm} is void in {run.folder}/ (instrument rate "
                    f"{run.instrument_rate:.3f} above {th.instrument_max:g}); its knob has no "
                    "verdict on this model."
                )
            if not run.used:
                continue
            if run.void:
                bad[run.arm] = f"{run.arm} void (instrument rate {run.instrument_rate:.3f})"
            elif run.scored < run.planned:
                bad[run.arm] = f"{run.arm} incomplete ({run.scored} of {run.planned} scored)"
            else:
                cells[run.arm] = _Cell(*_counts(recs, run.arm, seeds))
        others = [r for r in provenance if r.model == label and r.sessions > 1]
        for other in others:
            disclosures.append(
                f"{label}: {other.folder}/ was written in {other.sessions} sessions (stop reasons "
                f"{', '.join(other.stop_reasons)}); a resumed session runs only slots with no "
                "scored line."
            )
        disclosures.append(
            f"{label}: {spent:,} tokens spent over phase 1, the arms and any rerun, against a "
            f"cap of {reg.budget.tokens:,} tokens"
            + (f" and ${reg.budget.dollars:g}" if reg.budget.dollars is not None else "")
            + "."
        )
        for knob in reg.design.knobs:
            needed = [a for a in knob_arms(knob) if a is not None]
            missing = [bad[a] for a in needed if a in bad or a not in cells]
            if missing:
                why = "; ".join(bad.get(a, f"{a} not run") for a in needed if a not in cells)
                unmeasured.append(Unmeasured(model=label, knob=knob, reason=why))
                continue
            rows_cells[knob].append(_cell_for(reg, label, knob, cells, contrasts))
    rows: list[KnobStatusRow] = []
    for knob in reg.design.knobs:
        base, top, control = knob_arms(knob)
        cells_k = tuple(rows_cells[knob])
        ships = any(c.verdict == "bites" for c in cells_k) and not any(
            c.verdict == "top easier" for c in cells_k
        )
        rows.append(
            KnobStatusRow(
                knob=parse_arm_id(base).knob,
                shipped=ships,
                base_arm=base,
                top_arm=top,
                control_arm=control,
                cells=cells_k,
            )
        )
    return ProbeResult(
        name=reg.name,
        registration_hash=registration_hash(reg),
        reference_policies=any(m.model.provider == "reference" for m in reg.models),
        models=[m.label for m in reg.models],
        tasks=reg.design.tasks,
        attempts=reg.design.attempts,
        rule=rule_text(reg),
        rows=rows,
        unmeasured=unmeasured,
        contrasts=contrasts,
        phase1=checks,
        arm_runs=arm_runs,
        disclosures=disclosures,
        provenance=provenance,
    )


# --------------------------------------------------------------------------- output


def result_json(result: ProbeResult) -> bytes:
    """probe.json: canonical bytes (sorted keys, no spaces), one trailing newline."""
    return canonical_json(result.model_dump(mode="json")) + b"\n"


def _cell_text(result: ProbeResult, row: KnobStatusRow, model: str) -> str:
    for cell in row.cells:
        if cell.model == model:
            return cell.text
    for gap in result.unmeasured:
        if gap.model == model and gap.knob == row.knob:
            return f"not measured: {gap.reason}"
    return "not measured"


def render_probe(result: ProbeResult) -> str:
    """probe.md: the knob table as knobs-and-arms.md prints it, then every contrast, the
    phase-1 checks, every arm attempt, the disclosures and the provenance."""
    out: list[str] = []
    title = "Reference-policy knob probe" if result.reference_policies else "Knob probe"
    out.append(f"# {title}: {result.name}")
    out.append("")
    if result.reference_policies:
        out.append(
            "The models here are the project's reference policies (scripted baselines served "
            "over HTTP), not language models: these figures test the probe, they describe no "
            "model."
        )
        out.append("")
    out.append(
        f"Measured on this build by `poisson-tasks probe`, {result.tasks} tasks x "
        f"{result.attempts} attempts per arm, {result.metric}; every figure below is computed "
        "from the records in this folder (`poisson-tasks probe --from DIR` rebuilds this file "
        f"byte for byte). Registration hash {result.registration_hash}."
    )
    out.append("")
    out.append("| knob | shipped | " + " | ".join(result.models) + " |")
    out.append("|---|---|" + "---|" * len(result.models))
    for row in result.rows:
        cells = " | ".join(_cell_text(result, row, m) for m in result.models)
        out.append(f"| {row.knob} | {'yes' if row.shipped else 'no'} | {cells} |")
    out.append("")
    out.append(f"How a verdict is read: {result.rule}")
    out.append("")
    out.append("## Contrasts")
    out.append("")
    out.append("| model | knob | contrast | arms | pass@1 | difference [interval] | tasks |")
    out.append("|---|---|---|---|---|---|---|")
    for contrast in result.contrasts:
        out.append(
            f"| {contrast.model} | {contrast.knob} | {contrast.name} | "
            f"{contrast.minuend} − {contrast.subtrahend} | "
            f"{contrast.minuend_pass:.3f} − {contrast.subtrahend_pass:.3f} | "
            f"{contrast.figure.text} | {contrast.pairs} |"
        )
    out.append("")
    out.append("## Arm attempts")
    out.append("")
    out.append("| model | arm | folder | episodes | scored | instrument rate | void | used |")
    out.append("|---|---|---|---|---|---|---|---|")
    for attempt in result.arm_runs:
        out.append(
            f"| {attempt.model} | {attempt.arm} | {attempt.folder} | {attempt.episodes} | "
            f"{attempt.scored}/{attempt.planned} | "
            f"{attempt.instrument_rate:.3f} | {'yes' if attempt.void else 'no'} | "
            f"{'yes' if attempt.used else 'no (kept)'} |"
        )
    out.append("")
    out.append("## Disclosures")
    out.append("")
    out.extend(f"{i}. {text}" for i, text in enumerate(result.disclosures, start=1))
    out.append("")
    out.append("## Provenance")
    out.append("")
    out.append(
        "| model | phase | folder | served model | episodes | sessions | pre-registration | "
        "generator | engine | records sha256 |"
    )
    out.append("|---|---|---|---|---|---|---|---|---|---|")
    for provenance in result.provenance:
        out.append(
            f"| {provenance.model} | {provenance.phase} | {provenance.folder} | "
            f"{provenance.provider} `{provenance.served_model}` | "
            f"{provenance.episodes} | {provenance.sessions} | "
            f"{provenance.preregistration_hash[:16]} | {provenance.generator_hash[:16]} | "
            f"{provenance.engine_hash[:16]} | {provenance.records_sha256[:16]} |"
        )
    out.append("")
    return "\n".join(out)


def write_result(root: Path, result: ProbeResult) -> tuple[Path, Path]:
    """Write probe.json and probe.md into the probe folder; returns their paths."""
    json_path, md_path = root / RESULT_JSON, root / RESULT_MD
    json_path.write_bytes(result_json(result))
    md_path.write_text(render_probe(result), encoding="utf-8")
    return json_path, md_path
