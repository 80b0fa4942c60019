"""The knob probe end to end against reference policies built so each rule fires, its rereading
byte for byte in another process, phase 1's stop, void arms and their one rerun, and the rules."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from poisson_tasks.calibration.stats import Interval
from poisson_tasks.cli import app
from poisson_tasks.errors import PreregistrationError, RunFolderError
from poisson_tasks.probe.design import ProbeRegistration, load_probe, validate_probe
from poisson_tasks.probe.render import render_probe, result_json
from poisson_tasks.probe.rules import read_verdict
from poisson_tasks.probe.run import rerun_void, run_probe
from poisson_tasks.probe.table import analyse

ROOT = Path(__file__).resolve().parent.parent

# faults: top always fails, control as its own level -> bites; similarity: base passes 0.05 ->
# cannot tell; spread: easier at the top -> top easier; history: flat -> does not bite.
DEGRADING = (
    "graded?faults_high=1&similarity_low=0.95&similarity_high=0.95&spread_low=0.85&spread_high=0.3"
)


def _doc(
    models: list[dict[str, Any]], knobs: list[str], tasks: int, **extra: Any
) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "format": "poisson-tasks/probe@1",
        "name": "probe-test",
        "models": models,
        "decoding": {
            "temperature": 0.0,
            "top_p": 1.0,
            "reasoning_effort": None,
            "max_completion_tokens": 256,
        },
        "design": {
            "knobs": knobs,
            "tasks": tasks,
            "attempts": 1,
            "seed_string": "poisson-tasks/probe-test",
        },
        "phase1": {"tasks": 2, "attempts": 1, "no_call_max": 0.10},
        "budget": {"tokens": 50_000_000, "wall_clock_s": 600},
        "execution": {"concurrency": 8},
    }
    doc.update(extra)
    return doc


def _ref(label: str, model: str) -> dict[str, Any]:
    return {"label": label, "model": {"provider": "reference", "model": model}}


def test_each_verdict_end_to_end_and_rereads_byte_identically(tmp_path: Path) -> None:
    doc = _doc(
        [_ref("degrading", DEGRADING), _ref("silent", "no-call")],
        ["faults", "similarity", "spread", "history"],
        tasks=8,
    )
    prereg = tmp_path / "probe.yaml"
    prereg.write_text(yaml.safe_dump(doc))
    out = tmp_path / "run"
    res = CliRunner().invoke(app, ["probe", str(prereg), "--out", str(out), "--quiet"])
    assert res.exit_code == 0, res.output
    result = analyse(out)
    verdicts = {r.knob: r.cell("degrading").verdict for r in result.rows}
    assert verdicts == {
        "faults": "bites",
        "similarity": "cannot tell",
        "spread": "top easier",
        "history": "does not bite",
    }
    assert result.shipped == ("faults",)
    faults = result.row("faults")
    assert faults is not None and faults.cell("degrading").control is not None
    # the silent model stops at phase 1 and has no cell, said so in the table
    silent = next(c for c in result.phase1 if c.model == "silent")
    assert silent.stopped and silent.no_call == silent.scored == 8
    assert "| faults | yes | bites: Δ 1.000" in res.stdout
    assert "not measured: phase 1 stopped the probe" in res.stdout
    assert "Reference-policy knob probe" in res.stdout
    assert (out / "probe.md").read_text() == res.stdout
    # rereading the records in another process (another hash seed) gives the same bytes
    env = {**os.environ, "PYTHONHASHSEED": "4242"}
    again = subprocess.run(
        [sys.executable, "-m", "poisson_tasks.cli", "probe", "--from", str(out), "--json"],
        capture_output=True,
        env=env,
        check=True,
    )
    assert again.stdout == (out / "probe.json").read_bytes()
    assert render_probe(analyse(out)) == res.stdout
    # running the same command again resumes nothing (every folder is complete) and agrees
    before = (out / "probe.json").read_bytes()
    run_probe(prereg, out, show_progress=False)
    assert (out / "probe.json").read_bytes() == before


def test_a_void_arm_is_run_once_more_and_the_void_attempt_kept(tmp_path: Path) -> None:
    model = _ref("flaky-top", "graded?p_top_500=0.6")
    doc = _doc(
        [model],
        ["history"],
        tasks=6,
        execution={"concurrency": 4, "max_retries": 0, "backoff_s": 0.0},
    )
    out = tmp_path / "run"
    first = run_probe(validate_probe(doc), out, show_progress=False)
    assert not first.complete
    void = [a for a in first.result.arm_runs if a.void]
    assert [a.arm for a in void] == ["history:t2400"]
    assert "history:t2400 void" in render_probe(first.result)
    with pytest.raises(RunFolderError, match="not void"):
        rerun_void(out, "flaky-top", "history:t0", "x", show_progress=False)
    with pytest.raises(RunFolderError, match="--cause is required"):
        rerun_void(out, "flaky-top", "history:t2400", " ", show_progress=False)
    # the cause was on the runner's side (retries off): the fixed execution section is allowed
    fixed = validate_probe(
        {**doc, "execution": {"concurrency": 4, "max_retries": 12, "backoff_s": 0.0}}
    )
    run_probe(fixed, out, show_progress=False, run=False)
    done = rerun_void(out, "flaky-top", "history:t2400", "retries were off", show_progress=False)
    assert done.complete
    runs = [a for a in done.result.arm_runs if a.arm == "history:t2400"]
    assert [(a.void, a.used) for a in runs] == [(True, False), (False, True)]
    row = done.result.row("history")
    assert row is not None and row.cell("flaky-top").verdict == "does not bite"
    assert any("retries were off" in d and "void" in d for d in done.result.disclosures)
    with pytest.raises(RunFolderError):
        rerun_void(out, "flaky-top", "history:t2400", "again", show_progress=False)
    # a probe folder refuses another probe's measurement
    other = validate_probe({**doc, "design": {**doc["design"], "tasks": 7}})
    with pytest.raises(RunFolderError, match="another probe"):
        run_probe(other, out, show_progress=False)


def _reg() -> ProbeRegistration:
    return validate_probe(_doc([_ref("m", "oracle")], ["faults"], tasks=4))


def _iv(low: float, high: float, point: float) -> tuple[float, Interval]:
    return point, Interval(low=low, high=high, point=point)


@pytest.mark.parametrize(
    ("knob", "delta", "control", "length", "base", "top", "want"),
    [
        ("history", _iv(0.2, 0.5, 0.35), None, None, 0.9, 0.55, "bites"),
        ("history", _iv(0.0, 0.3, 0.15), None, None, 0.9, 0.75, "does not bite"),  # touches 0
        ("history", _iv(0.05, 0.2, 0.12), None, None, 0.9, 0.78, "does not bite"),  # too small
        ("faults", _iv(0.3, 0.5, 0.4), _iv(0.03, 0.25, 0.14), None, 1.0, 0.6, "does not bite"),
        ("faults", _iv(0.3, 0.5, 0.4), _iv(0.2, 0.5, 0.3), None, 1.0, 0.6, "bites"),
        ("shape", _iv(-0.4, -0.2, -0.3), None, 0.158, 0.5, 0.8, "does not bite"),
        ("shape", _iv(-0.4, -0.2, -0.3), None, 0.0, 0.5, 0.8, "bites"),
        ("spread", _iv(-0.4, -0.1, -0.25), None, None, 0.5, 0.75, "top easier"),
        ("spread", _iv(-0.4, -0.1, -0.25), None, None, 0.65, 0.9, "cannot tell"),
        ("spread", _iv(0.0, 0.03, 0.008), None, None, 0.008, 0.0, "cannot tell"),
    ],
)
def test_the_reading_rules(
    knob: str,
    delta: tuple[float, Interval],
    control: tuple[float, Interval] | None,
    length: float | None,
    base: float,
    top: float,
    want: str,
) -> None:
    verdict, _ = read_verdict(_reg(), knob, delta, control, length, base, top)
    assert verdict == want


def test_a_bad_registration_is_refused_one_line_per_problem() -> None:
    doc = _doc([_ref("a", "oracle"), _ref("a", "oracle")], ["faults", "colour"], tasks=4)
    doc["rules"] = {"bite": 1.5}
    with pytest.raises(PreregistrationError) as exc:
        validate_probe(doc)
    assert len(exc.value.problems) == 3
    assert any("used twice" in p for p in exc.value.problems)
    assert any("'colour' is not a knob" in p for p in exc.value.problems)
    assert any(p.startswith("rules.bite") for p in exc.value.problems)


def test_the_shipped_reference_probe_registration_validates() -> None:
    reg = load_probe(ROOT / "preregistrations" / "probes" / "reference.yaml")
    assert reg.design.tasks == 60 and reg.design.attempts == 2 and len(reg.design.knobs) == 7


@pytest.mark.slow
def test_the_full_reference_probe(tmp_path: Path) -> None:
    """The shipped registration: seven knobs, 60 tasks x 2 attempts, three reference models."""
    res = CliRunner().invoke(
        app,
        [
            "probe",
            str(ROOT / "preregistrations" / "probes" / "reference.yaml"),
            "--out",
            str(tmp_path / "run"),
            "--quiet",
        ],
    )
    assert res.exit_code == 0, res.output
    result = analyse(tmp_path / "run")
    got = {r.knob: tuple(c.verdict for c in r.cells) for r in result.rows}
    assert got["faults"] == ("bites", "does not bite", "does not bite")
    assert got["history"] == ("bites", "does not bite", "does not bite")
    assert got["similarity"][0] == "cannot tell"
    assert got["spread"][0] == "top easier"
    assert got["shape"] == ("bites", "does not bite", "does not bite")
    assert set(result.shipped) == {"faults", "history", "shape"}
    assert result_json(analyse(tmp_path / "run")) == (tmp_path / "run" / "probe.json").read_bytes()
