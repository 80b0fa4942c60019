"""`poisson-tasks probe`: run a knob-probe registration model by model, then read its records.

For each model: phase 1 (the base arms, a few tasks) runs first into `<label>/phase1/`; when more
than the registered share of its scored episodes make no tool call the probe of that model stops
there. Otherwise the arms run into `<label>/arms/`. Each model's spend cap covers phase 1, the
arms and any rerun together: each folder is given what the earlier ones left. A folder left
incomplete (a cap, a kill) is resumed by running the same command again; nothing is run twice.

An arm whose instrument rate is above the threshold is void. `rerun_void` runs it once more into
`<label>/rerun-N/` for a cause on the runner's side, which the user states; the note is written
before the rerun starts, the void attempt stays where it is, and the analysis discloses both.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from poisson_tasks.calibration.records import EpisodeRecord, records_from_run
from poisson_tasks.errors import PoissonError, RunFolderError
from poisson_tasks.prereg import Plan, Rates, validate_preregistration
from poisson_tasks.probe.design import (
    ProbeRegistration,
    RerunNote,
    arms_folder,
    arms_plan,
    load_probe,
    measurement_hash,
    phase1_folder,
    phase1_plan,
    read_registration,
    registration_bytes,
    rerun_folders,
)
from poisson_tasks.probe.figures import ProbeResult
from poisson_tasks.probe.render import write_result
from poisson_tasks.probe.table import analyse, effective_arm_runs, phase1_check
from poisson_tasks.runfolder import is_run_folder
from poisson_tasks.runner import run_preregistration
from poisson_tasks.runner.progress import Heartbeat

__all__ = ["ProbeRun", "probe_command", "rerun_void", "run_probe"]


@dataclass(frozen=True)
class ProbeRun:
    """The probe's analysis after a run, and whether every folder it ran is complete."""

    folder: Path
    result: ProbeResult
    complete: bool


def _open_root(root: Path, reg: ProbeRegistration) -> None:
    """Create the probe folder, or check an existing one holds this same probe."""
    stored = root / "registration.json"
    if stored.is_file():
        old = read_registration(root)
        if measurement_hash(old) != measurement_hash(reg):
            raise RunFolderError(
                f"{root} holds another probe ({old.name}, measurement hash "
                f"{measurement_hash(old)[:12]}); only budget, execution and description may "
                "change on a resume: give a new --out folder"
            )
    root.mkdir(parents=True, exist_ok=True)
    stored.write_bytes(registration_bytes(reg))


def _dollars(recs: list[EpisodeRecord], rates: Rates | None) -> float:
    if rates is None:
        return 0.0
    return (
        sum(
            ((r.uncached_input_tokens or 0) * rates.input)
            + ((r.cached_input_tokens or 0) * rates.cached_input)
            + ((r.completion_tokens or 0) * rates.output)
            for r in recs
        )
        / 1e6
    )


def _spent(folders: list[Path], rates: Rates | None) -> tuple[int, float]:
    tokens, dollars = 0, 0.0
    for folder in folders:
        if is_run_folder(folder):
            recs = records_from_run(folder)
            tokens += sum(r.tokens or 0 for r in recs)
            dollars += _dollars(recs, rates)
    return tokens, dollars


def _capped(plan: Plan, reg: ProbeRegistration, spent: tuple[int, float]) -> Plan:
    """The plan with the model's cap less what its other folders spent (a resumable section)."""
    doc: dict[str, Any] = plan.preregistration.model_dump(mode="json")
    budget = reg.budget
    doc["budget"]["tokens"] = max(1, budget.tokens - spent[0])
    if budget.dollars is not None:
        doc["budget"]["dollars"] = max(1e-9, budget.dollars - spent[1])
    return validate_preregistration(doc, source=plan.source)


def _complete(folder: Path, plan: Plan) -> bool:
    if not is_run_folder(folder):
        return False
    scored = {(r.arm_id, r.seed, r.attempt) for r in records_from_run(folder) if not r.instrument}
    return len(scored) >= plan.episodes


def _run(plan: Plan, folder: Path, show_progress: bool | None) -> bool:
    """Run (or resume) one folder to completion; True when every slot is scored."""
    if _complete(folder, plan):
        return True
    summary = run_preregistration(
        plan, folder, resume=is_run_folder(folder), show_progress=show_progress
    )
    return summary.complete


def run_probe(
    registration: str | Path | ProbeRegistration,
    out_dir: str | Path,
    *,
    show_progress: bool | None = None,
    run: bool = True,
) -> ProbeRun:
    """Run (or resume) a probe into `out_dir`, then write and return its analysis.

    run=False only records the registration (checked against the folder's) and analyses: how a
    rerun takes a registration whose execution or budget section was changed to fix its cause."""
    root = Path(out_dir)
    complete = True
    with Heartbeat(f"probe {root}", enabled=show_progress) as beat:
        beat.stage("reading the registration and checking every model's plans")
        reg = (
            registration
            if isinstance(registration, ProbeRegistration)
            else load_probe(registration)
        )
        _open_root(root, reg)
        for pm in reg.models if run else ():
            label, rates = pm.label, pm.model.rates
            beat.stage(f"{label}: phase 1 (its checks, then its run)")
            p1 = phase1_plan(reg, label)
            f1 = phase1_folder(root, label)
            p1 = _capped(p1, reg, _spent([], rates))
            if not _run(p1, f1, show_progress):
                complete = False
                continue
            beat.stage(f"{label}: phase 1 read; the arms (their checks, then their run)")
            check = phase1_check(reg, root, label)
            if check is None or check.stopped:
                continue
            arms = _capped(arms_plan(reg, label), reg, _spent([f1], rates))
            complete &= _run(arms, arms_folder(root, label), show_progress)
        beat.stage("reading every folder's records (the analysis)")
        result = analyse(root)
        write_result(root, result)
    return ProbeRun(folder=root, result=result, complete=complete)


def rerun_void(
    probe_dir: str | Path,
    label: str,
    arm: str,
    cause: str,
    *,
    show_progress: bool | None = None,
) -> ProbeRun:
    """Run a void arm of one model once more, for a cause on the runner's side that `cause`
    states; refused unless the arm's latest attempt is void and reruns remain."""
    root = Path(probe_dir)
    reg = read_registration(root)
    pm = reg.model_named(label)
    if not cause.strip():
        raise RunFolderError(
            "--cause is required: say what failed on the runner's side (it is disclosed)"
        )
    runs = [run for run, _ in effective_arm_runs(reg, root, label) if run.arm == arm]
    if not runs:
        raise RunFolderError(
            f"{label} has no attempt at {arm}; the probe's arms: run the probe first"
        )
    reruns = rerun_folders(root, label)
    pending = [(d, n) for d, n in reruns if n.arm == arm]
    last = runs[-1]
    plan = arms_plan(reg, label, only=arm)
    if pending and not _complete(pending[-1][0], plan):  # an interrupted rerun: resume it
        folder = pending[-1][0]
    else:
        if not last.void:
            raise RunFolderError(
                f"{label} {arm} is not void (instrument rate {last.instrument_rate:.3f}, "
                f"threshold {reg.thresholds.instrument_max:g}); only a void arm is run again"
            )
        if len(pending) >= reg.rules.reruns:
            raise RunFolderError(
                f"{label} {arm} was already run again {len(pending)} time(s); the registration "
                f"allows {reg.rules.reruns}"
            )
        folder = root / label / f"rerun-{len(reruns) + 1}"
        note = RerunNote(arm=arm, void_folder=last.folder, cause=cause.strip())
        folder.with_suffix(".json").write_bytes(note.model_dump_json().encode() + b"\n")
    others = [phase1_folder(root, label), arms_folder(root, label)] + [
        d for d, _ in reruns if d != folder
    ]
    with Heartbeat(f"probe {root}", enabled=show_progress) as beat:
        beat.stage(f"{label}: {arm} again (its checks, then its run)")
        capped = _capped(plan, reg, _spent(others, pm.model.rates))
        complete = _run(capped, folder, show_progress)
        beat.stage("reading every folder's records (the analysis)")
        result = analyse(root)
        write_result(root, result)
    return ProbeRun(folder=root, result=result, complete=complete)


def probe_command(
    prereg: Path | None,
    out: Path | None,
    from_dir: Path | None,
    rerun: str | None,
    cause: str | None,
    *,
    show_progress: bool | None = None,
) -> ProbeRun:
    """`poisson-tasks probe`: read --from DIR, rerun one void arm (--rerun LABEL:ARM --cause), or
    run PREREG into --out; a combination that names two of these is refused in one line."""
    if from_dir is not None:
        if prereg is not None or out is not None or rerun is not None:
            raise PoissonError("--from reads a probe folder: give no PREREG, --out or --rerun")
        return ProbeRun(folder=from_dir, result=analyse(from_dir), complete=True)
    if prereg is None or out is None:
        raise PoissonError("give PREREG and --out DIR to run a probe, or --from DIR")
    if rerun is None:
        if cause is not None:
            raise PoissonError("--cause goes with --rerun LABEL:ARM")
        return run_probe(prereg, out, show_progress=show_progress)
    label, sep, arm = rerun.partition(":")
    if not sep or not arm:
        raise PoissonError(f"--rerun {rerun!r} is not LABEL:ARM, e.g. nano:faults:f4")
    run_probe(load_probe(prereg), out, show_progress=show_progress, run=False)
    return rerun_void(out, label, arm, cause or "", show_progress=show_progress)
