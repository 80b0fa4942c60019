"""A study end to end: `poisson-tasks card PREREG` runs then cards; the embedded default is the smoke file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from poisson_tasks import study
from poisson_tasks.calibration.intervals import distinguishable_arrays, paired_interval_arrays
from poisson_tasks.cli import app
from poisson_tasks.policycatalogue import POLICY_NAMES
from poisson_tasks.prereg import load_preregistration
from poisson_tasks.reference import graded_expected
from poisson_tasks.study import default_preregistration

ROOT = Path(__file__).resolve().parent.parent


def test_embedded_default_is_the_shipped_smoke_file() -> None:
    assert (
        default_preregistration().read_bytes()
        == (ROOT / "preregistrations" / "smoke.yaml").read_bytes()
    )


@pytest.fixture(scope="module")
def default_card(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """`poisson-tasks card` with no target, run once in an empty folder: (stdout, run folder)."""
    folder = tmp_path_factory.mktemp("default")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(folder)
        res = CliRunner().invoke(app, ["card", "--quiet"])
    assert res.exit_code == 0, res.output
    (run,) = (folder / "runs").iterdir()
    return res.stdout, run


def test_card_with_no_target_runs_the_embedded_default(default_card: tuple[str, Path]) -> None:
    stdout, run = default_card
    assert stdout.startswith("# Reference-policy card: `graded")
    card = json.loads((run / "card" / "card.json").read_text())
    assert card["kind"] == "reference-policy"
    # the stored card and the printed one are the same document
    assert (run / "card" / "card.md").read_text() == stdout


def test_the_embedded_default_calls_its_designed_difference(
    default_card: tuple[str, Path],
) -> None:
    """The embedded default is a positive control (its comments give the arithmetic): the card
    must call d2 above d8 on both rates, and every arm's interval must hold the rate the policy's
    parameters give it (reference.graded_expected), the control arms included. A fault in the
    runner, the verifier, the intervals or the call rule fails this; the truth is not measured."""
    stdout, run = default_card
    card = json.loads((run / "card" / "card.json").read_text())
    plan = load_preregistration(default_preregistration())
    model = plan.preregistration.model.model
    (depth,) = card["knobs"]
    called = {(c["lower"], c["upper"], c["rate"]): c for c in depth["comparisons"]}
    for rate in ("strict", "leaky"):
        pair = called[("depth:d2", "depth:d8", rate)]
        assert pair["verdict"] == "distinguishable", pair
        expected = graded_expected("depth:d2", model) - graded_expected("depth:d8", model)
        assert pair["low"] <= expected <= pair["high"] and pair["diff"] > 0, (pair, expected)
    assert depth["ordering_strict"]["verdict"] == depth["ordering_leaky"]["verdict"] == "yes"
    cells = card["cells"]  # every arm's, the control arms' (named in card["controls"]) too
    assert sorted(c["arm_id"] for c in cells) == sorted(plan.arms)
    assert sorted(card["controls"]) == ["depth:d1+h8", "depth:d2+h5"]
    for cell in cells:
        truth = graded_expected(cell["arm_id"], model)
        for rate in ("strict", "leaky"):
            figure = cell[rate]
            assert figure["low"] - 1e-9 <= truth <= figure["high"] + 1e-9, (cell["arm_id"], figure)
        assert cell["no_tool_call"] == 0.0, cell["arm_id"]
    assert "the one the fixture was built to have" in stdout
    assert "0.200 at depth:d2 and 0.800 at depth:d8, so more often at higher depth" in stdout


def test_the_embedded_default_is_sized_to_call_its_designed_difference() -> None:
    """The design, not one run: 20,000 simulated runs at the analytic rates, each read by the card's
    own vectorised rule (paired interval clear of 0, difference at least the resolution, sign test)
    and its saturation rule, call d2 above d8 in more than 99% of them (the comments say 99.97%);
    and validate finds the design not under-powered for its declared resolution."""
    plan = load_preregistration(default_preregistration())
    model = plan.preregistration.model.model
    tasks, attempts = len(plan.seeds), plan.attempts
    thresholds = plan.preregistration.thresholds
    assert not plan.resolution.under_powered
    rng = np.random.default_rng(20261204)
    runs = 20_000
    shape = (runs, tasks)
    upper_rate, lower_rate = (graded_expected(a, model) for a in ("depth:d2", "depth:d8"))
    upper = rng.binomial(attempts, upper_rate, shape)
    lower = rng.binomial(attempts, lower_rate, shape)
    tried = np.full(shape, attempts)
    pairs = paired_interval_arrays(upper, tried, lower, tried, thresholds.confidence)
    called = distinguishable_arrays(pairs, thresholds.resolution, thresholds.confidence)
    rates = np.stack([upper.mean(axis=1), lower.mean(axis=1)]) / attempts
    saturated = ((rates <= thresholds.saturation_low) | (rates >= thresholds.saturation_high)).any(
        0
    )
    share = float((called & ~saturated).mean())
    assert share > 0.99, share


def test_card_on_a_prereg_file_with_run_dir(tmp_path: Path) -> None:
    run_dir = tmp_path / "r"
    res = CliRunner().invoke(
        app,
        [
            "card",
            str(ROOT / "preregistrations" / "smoke.yaml"),
            "--run-dir",
            str(run_dir),
            "--json",
            "--quiet",
        ],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert (run_dir / "run.json").is_file() and doc["provenance"]
    # building the card again from the folder gives the same bytes
    again = CliRunner().invoke(app, ["card", str(run_dir), "--json"])
    assert again.exit_code == 0 and again.stdout == res.stdout


def test_bad_targets_are_one_line(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["card", str(tmp_path / "nope")])
    assert res.exit_code == 2 and "does not exist" in res.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("format: poisson-tasks/preregistration@1\nname: x\nsurprise: 1\n")
    res = CliRunner().invoke(app, ["card", str(bad)])
    assert res.exit_code == 2
    assert all(line.startswith("error: ") for line in res.stderr.splitlines() if line)
    assert not (tmp_path / "runs").exists()


def test_run_arm_runs_one_cell(tmp_path: Path) -> None:
    result = study.run_arm(ROOT / "preregistrations" / "smoke.yaml", "depth:d8", tmp_path / "cell")
    assert result.summary.complete
    cells = result.artifact.cells
    assert [c.arm_id for c in cells] == ["depth:d8"]


def test_run_and_card_print_the_session_summary_to_the_same_stream(tmp_path: Path) -> None:
    """One rule (commands.md): stdout is what a command makes, the session summary goes to stderr,
    for `run` and for `card PREREG` alike; `card TARGET --published` is refused in one line."""
    doc = yaml.safe_load((ROOT / "preregistrations" / "smoke.yaml").read_text())
    doc["design"].update(tasks=2, attempts=1)
    small = tmp_path / "small.yaml"
    small.write_text(yaml.safe_dump(doc))
    ran = CliRunner().invoke(app, ["run", str(small), "--out", str(tmp_path / "a"), "--quiet"])
    carded = CliRunner().invoke(
        app, ["card", str(small), "--run-dir", str(tmp_path / "b"), "--quiet"]
    )
    assert ran.exit_code == 0 and carded.exit_code == 0, ran.output + carded.output
    assert ran.stdout == "" and carded.stdout.startswith("# Reference-policy card")
    for res, folder in ((ran, "a"), (carded, "b")):
        summary = [ln for ln in res.stderr.splitlines() if ln.startswith(("run ", "  "))]
        assert summary[0] == f"run {tmp_path / folder} session 0: complete", res.stderr
        assert [ln.split()[0] for ln in summary[1:4]] == ["episodes", "strict", "spend"]
    refused = CliRunner().invoke(app, ["card", str(tmp_path / "a"), "--published"])
    assert refused.exit_code == 2 and refused.stdout == ""
    (line,) = refused.stderr.splitlines()
    assert line.startswith("error: --published rebuilds the published cards and takes no target")


def test_commands_md_names_every_reference_policy_the_server_serves() -> None:
    text = (ROOT / "docs" / "commands.md").read_text()
    serves = text.split("## `serve-reference`", 1)[1].split("```", 1)[0]
    assert [name for name in POLICY_NAMES if f"`{name}`" not in serves] == []
    count = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
    assert f"the {count[len(POLICY_NAMES) - 1]} scripted reference policies" in serves


def test_a_refused_card_still_reports_its_run(tmp_path: Path) -> None:
    # issue 34 item 7: `card PREREG` printed the run's session summary only when the card was
    # made; a refused card left the user with one error line and no word of the run it made
    doc = yaml.safe_load((ROOT / "preregistrations" / "smoke.yaml").read_text(encoding="utf-8"))
    doc["model"]["model"] = "no-call"
    doc["design"]["tasks"] = 3
    path = tmp_path / "no-call.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    run_dir = tmp_path / "run"
    res = CliRunner().invoke(app, ["card", str(path), "--run-dir", str(run_dir), "--quiet"])
    assert res.exit_code == 1 and res.stdout == ""
    err = res.stderr.splitlines()
    assert err[0] == f"run {run_dir} session 0: complete"
    assert any(x.startswith("  episodes   24 written this session") for x in err)
    assert err[-1].startswith("error: card refused: more than 0.1 of the scored episodes")
