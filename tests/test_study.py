"""A study end to end: `poisson-tasks card PREREG` runs then cards; the embedded default is the smoke file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from poisson_tasks import study
from poisson_tasks.cli import app
from poisson_tasks.policycatalogue import POLICY_NAMES
from poisson_tasks.study import default_preregistration

ROOT = Path(__file__).resolve().parent.parent


def test_embedded_default_is_the_shipped_smoke_file() -> None:
    assert (
        default_preregistration().read_bytes()
        == (ROOT / "preregistrations" / "smoke.yaml").read_bytes()
    )


def test_card_with_no_target_runs_the_embedded_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["card", "--quiet"])
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith("# Reference-policy card: `noisy")
    folders = list((tmp_path / "runs").iterdir())
    assert len(folders) == 1
    card = json.loads((folders[0] / "card" / "card.json").read_text())
    assert card["kind"] == "reference-policy"
    # the stored card and the printed one are the same document
    assert (folders[0] / "card" / "card.md").read_text() == res.stdout


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
    result = study.run_arm(ROOT / "preregistrations" / "smoke.yaml", "depth:d3", tmp_path / "cell")
    assert result.summary.complete
    cells = result.artifact.cells
    assert [c.arm_id for c in cells] == ["depth:d3"]


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
