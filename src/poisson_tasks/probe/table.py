"""The probe's table: every run folder under a probe folder read into its outcome (ProbeResult).

The analysis reads the folder's files and nothing else, so `poisson-tasks probe --from DIR` gives
the same bytes as the run that made it, in any process. Per knob and model it takes each arm's
counts and the differences between arms from probe.rules, then reads the verdict and whether the
knob ships; void, incomplete and unrun arms are listed, never dropped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from poisson_tasks.arms import knob_def, parse_arm_id
from poisson_tasks.calibration.cardjson import round_figure
from poisson_tasks.calibration.records import EpisodeRecord, records_from_run, records_sha256
from poisson_tasks.calibration.stats import Interval
from poisson_tasks.prereg import Thresholds
from poisson_tasks.probe.design import (
    ProbeRegistration,
    arms_folder,
    knob_arms,
    phase1_folder,
    phase1_plan,
    probe_arms,
    read_registration,
    registration_hash,
    rerun_folders,
)
from poisson_tasks.probe.figures import (
    ArmRun,
    KnobStatusRow,
    PassDifference,
    Phase1Check,
    ProbeCell,
    ProbeResult,
    RunProvenance,
    Unmeasured,
)
from poisson_tasks.probe.rules import (
    ArmCounts,
    arm_counts,
    pass_difference,
    read_verdict,
    rule_text,
)
from poisson_tasks.runfolder import is_run_folder, open_run


def phase1_check(reg: ProbeRegistration, root: Path, label: str) -> Phase1Check | None:
    """Phase 1 of one model read under the registered rule; None when it has not run."""
    folder = phase1_folder(root, label)
    if not is_run_folder(folder):
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
    if not is_run_folder(folder):
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
    header = open_run(folder).header
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
    cells: Mapping[str, ArmCounts],
    differences: list[PassDifference],
) -> ProbeCell:
    base, top, control = knob_arms(knob)
    delta, d_iv = pass_difference(reg, label, knob, "delta", (base, cells[base]), (top, cells[top]))
    differences.append(delta)
    ctrl: PassDifference | None = None
    ctrl_pair: tuple[float, Interval] | None = None
    length: PassDifference | None = None
    reading = knob_def(knob).probe_control
    if control is not None and reading != "length":
        ctrl, c_iv = pass_difference(
            reg, label, knob, "control", (control, cells[control]), (top, cells[top])
        )
        differences.append(ctrl)
        ctrl_pair = (ctrl.value, c_iv)
    if control is not None and reading == "length":
        length, _ = pass_difference(
            reg, label, knob, "length control", (base, cells[base]), (control, cells[control])
        )
        differences.append(length)
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


@dataclass
class _Reading:
    """What `analyse` gathers model by model, each list in the order the outcome prints it."""

    cells: dict[str, list[ProbeCell]]  # per knob, one cell per model that measured it
    unmeasured: list[Unmeasured] = field(default_factory=list)
    differences: list[PassDifference] = field(default_factory=list)
    checks: list[Phase1Check] = field(default_factory=list)
    arm_runs: list[ArmRun] = field(default_factory=list)
    disclosures: list[str] = field(default_factory=list)
    provenance: list[RunProvenance] = field(default_factory=list)

    def unmeasured_all(self, label: str, reason: str) -> None:
        """Every knob of one model unmeasured, for one reason."""
        self.unmeasured += [Unmeasured(model=label, knob=k, reason=reason) for k in self.cells]


def analyse(root: Path | str) -> ProbeResult:
    """The probe's outcome, from the records under `root` and nothing else."""
    root = Path(root)
    reg = read_registration(root)
    reading = _Reading(cells={k: [] for k in reg.design.knobs})
    for pm in reg.models:
        _read_model(reg, root, pm.label, reading)
    return ProbeResult(
        name=reg.name,
        registration_hash=registration_hash(reg),
        reference_policies=any(m.model.provider == "reference" for m in reg.models),
        models=[m.label for m in reg.models],
        tasks=reg.design.tasks,
        attempts=reg.design.attempts,
        rule=rule_text(reg),
        rows=[_knob_row(knob, tuple(reading.cells[knob])) for knob in reg.design.knobs],
        unmeasured=reading.unmeasured,
        contrasts=reading.differences,
        phase1=reading.checks,
        arm_runs=reading.arm_runs,
        disclosures=reading.disclosures,
        provenance=reading.provenance,
    )


def _read_model(reg: ProbeRegistration, root: Path, label: str, reading: _Reading) -> None:
    """One model: its phase 1 under the registered rule, then its arms and the knobs they measure
    (or why they measure none: not run, stopped, incomplete)."""
    check = phase1_check(reg, root, label)
    if check is None:
        reading.unmeasured_all(label, "not run")
        reading.disclosures.append(f"{label}: not run (no phase-1 folder under {label}/).")
        return
    reading.checks.append(check)
    reading.provenance.append(_provenance(root, phase1_folder(root, label), label, "phase 1"))
    verdict = "stopped the probe" if check.stopped else "passed"
    reading.disclosures.append(
        f"{label}: phase 1 ran the base arms first ({check.scored} scored episodes); "
        f"{check.no_call} made no tool call, so it {verdict} under the registered rule: "
        f"{check.rule}."
    )
    if check.stopped or not check.complete:
        why = "phase 1 stopped the probe" if check.stopped else "phase 1 is incomplete"
        reading.unmeasured_all(label, why)
        return
    runs = effective_arm_runs(reg, root, label)
    if not runs:
        reading.unmeasured_all(label, "arms not run")
        return
    _read_arm_folders(root, label, reading)
    cells, bad, spent = _arm_cells(reg, root, label, runs, reading)
    _disclose_sessions_and_spend(reg, label, spent, reading)
    for knob in reg.design.knobs:
        needed = [a for a in knob_arms(knob) if a is not None]
        if any(a in bad or a not in cells for a in needed):
            why = "; ".join(bad.get(a, f"{a} not run") for a in needed if a not in cells)
            reading.unmeasured.append(Unmeasured(model=label, knob=knob, reason=why))
            continue
        reading.cells[knob].append(_cell_for(reg, label, knob, cells, reading.differences))


def _read_arm_folders(root: Path, label: str, reading: _Reading) -> None:
    """The provenance of a model's arms folder and of each rerun, each rerun disclosed."""
    reading.provenance.append(_provenance(root, arms_folder(root, label), label, "arms"))
    for rfolder, note in rerun_folders(root, label):
        reading.provenance.append(_provenance(root, rfolder, label, f"rerun of {note.arm}"))
        reading.disclosures.append(
            f"{label}: {note.arm} was void in {note.void_folder}/ and was run once more in "
            f"{rfolder.relative_to(root).as_posix()}/, as the registration allows for a "
            f"cause on the runner's side; the cause given: {note.cause}. The void attempt "
            "is kept and listed below."
        )


def _arm_cells(
    reg: ProbeRegistration,
    root: Path,
    label: str,
    runs: list[tuple[ArmRun, list[EpisodeRecord]]],
    reading: _Reading,
) -> tuple[dict[str, ArmCounts], dict[str, str], int]:
    """Each arm's used attempt as counts, or why it gives none (`bad`: void, a void one disclosed,
    or incomplete); and the tokens spent over phase 1 and every attempt."""
    seeds = open_run(arms_folder(root, label)).header.seeds
    cells: dict[str, ArmCounts] = {}
    bad: dict[str, str] = {}
    spent = _spend(records_from_run(phase1_folder(root, label)))
    for run, recs in runs:
        reading.arm_runs.append(run)
        spent += _spend(recs)
        if not run.used:  # an earlier attempt, replaced by a rerun: listed, not read
            continue
        if run.void:
            reading.disclosures.append(
                f"{label}: {run.arm} is void in {run.folder}/ (instrument rate "
                f"{run.instrument_rate:.3f} above {reg.thresholds.instrument_max:g}); its knob "
                "has no verdict on this model."
            )
            bad[run.arm] = f"{run.arm} void (instrument rate {run.instrument_rate:.3f})"
        elif run.scored < run.planned:
            bad[run.arm] = f"{run.arm} incomplete ({run.scored} of {run.planned} scored)"
        else:
            cells[run.arm] = ArmCounts(*arm_counts(recs, run.arm, seeds))
    return cells, bad, spent


def _disclose_sessions_and_spend(
    reg: ProbeRegistration, label: str, spent: int, reading: _Reading
) -> None:
    """A model's folders written in more than one session, and its spend against the cap."""
    for other in [r for r in reading.provenance if r.model == label and r.sessions > 1]:
        reading.disclosures.append(
            f"{label}: {other.folder}/ was written in {other.sessions} sessions (stop reasons "
            f"{', '.join(other.stop_reasons)}); a resumed session runs only slots with no "
            "scored line."
        )
    reading.disclosures.append(
        f"{label}: {spent:,} tokens spent over phase 1, the arms and any rerun, against a "
        f"cap of {reg.budget.tokens:,} tokens"
        + (f" and ${reg.budget.dollars:g}" if reg.budget.dollars is not None else "")
        + "."
    )


def _knob_row(knob: str, cells: tuple[ProbeCell, ...]) -> KnobStatusRow:
    """One knob's row: its arms and each model's cell; it ships when some model's verdict is
    `bites` and none is `top easier`."""
    base, top, control = knob_arms(knob)
    ships = any(c.verdict == "bites" for c in cells) and not any(
        c.verdict == "top easier" for c in cells
    )
    return KnobStatusRow(
        knob=parse_arm_id(base).knob,
        shipped=ships,
        base_arm=base,
        top_arm=top,
        control_arm=control,
        cells=cells,
    )
