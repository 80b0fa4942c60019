"""The probe's design: its registration (`format: poisson-tasks/probe@1`), the plans it runs, and
the folders they are kept in.

A probe registration names one or more models, the knobs to probe, the design (tasks, attempts,
seed string), phase 1's stop rule, the reading rules, a spend cap per model and the thresholds.
For each model it becomes two ordinary pre-registrations: phase 1 (each knob's base arm, the
first `phase1.tasks` seeds, `phase1.attempts` attempts) and the arms (each knob's lowest and
highest candidate level and its control arm where it has one). probe.run runs them; probe.table
reads what they recorded.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from poisson_tasks.arms import (
    CONTROL_ARMS,
    KNOB_DEFS,
    KNOBS,
    PREFIX,
    ArmSpec,
    Knob,
    arm_id,
    levels,
    parse_arm_id,
)
from poisson_tasks.bundle import canonical_json, digest
from poisson_tasks.errors import PreregistrationError, RunFolderError
from poisson_tasks.files import os_problem, read_limited
from poisson_tasks.prereg import (
    FORMAT as PREREG_FORMAT,
)
from poisson_tasks.prereg import (
    PROBE_FORMAT,
    Budget,
    Decoding,
    Execution,
    Plan,
    Serving,
    Thresholds,
    read_yaml,
    read_yaml_file,
    validate_preregistration,
)
from poisson_tasks.runfolder import HEADER_MAX_BYTES

# The knobs a registration probes unless it names others: every knob not on the published cards
# (the seven newer ones), in arms.py's order.
PROBED_KNOBS: tuple[Knob, ...] = tuple(knob for knob in KNOBS if not KNOB_DEFS[knob].published)
REGISTRATION = "registration.json"
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


def validate_probe(doc: Mapping[str, Any], *, source: str | None = None) -> ProbeRegistration:
    """Validate a probe registration; PreregistrationError carries one line per problem."""
    if not isinstance(doc, Mapping):
        raise PreregistrationError(["(document): must be a mapping of sections"])
    if doc.get("format") == PREREG_FORMAT:  # the other kind of file: say so, not what it lacks
        file = shlex.quote(source) if source else "FILE"
        raise PreregistrationError(
            [
                f"{source or '(document)'}: a pre-registration (format: {PREREG_FORMAT}), not a "
                f"probe registration: run it with poisson-tasks run {file} (or card it: "
                f"poisson-tasks card {file})"
            ]
        )
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


def load_probe(path: str | Path) -> ProbeRegistration:
    """Read a probe registration (UTF-8, at most 1 MiB, the pre-registration's strict YAML
    reader) and validate it (one line per problem)."""
    file_path = Path(path)
    data = read_yaml_file(file_path, "a probe registration")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise PreregistrationError(
            [f"{file_path}: not UTF-8 text; save the file as UTF-8"]
        ) from None
    doc = read_yaml(text, str(file_path))
    if not isinstance(doc, Mapping):
        raise PreregistrationError(
            [f"{file_path}: must be a YAML mapping (format, name, models ...)"]
        )
    return validate_probe(doc, source=str(file_path))


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
