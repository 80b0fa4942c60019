"""Commands that know what they were given (issue 34, item 3): a probe registration where a
pre-registration goes, a replay folder where a run goes, a complete run given to `run --resume`,
each answered in one line; and `--version`, which names the build a card records.

The runs are small studies against the in-process reference endpoint (a scripted baseline).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from poisson_tasks import __version__
from poisson_tasks.cli import run_cli
from poisson_tasks.runner import run_preregistration

ROOT = Path(__file__).resolve().parents[1]
PROBE = ROOT / "preregistrations" / "probes" / "reference.yaml"


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = run_cli(argv)
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


@pytest.fixture
def small(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The smoke study cut to 8 episodes, in the test's folder, which is the working folder."""
    monkeypatch.chdir(tmp_path)
    doc = yaml.safe_load((ROOT / "preregistrations" / "smoke.yaml").read_text())
    doc["design"].update(tasks=2, attempts=1)
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.mark.parametrize(
    "argv",
    [["validate"], ["run", "--out", "x"], ["card"], ["generate", "--plan"]],
    ids=["validate", "run", "card", "generate"],
)
def test_a_probe_registration_is_named_as_one_with_its_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    path = tmp_path / "reference.yaml"
    path.write_bytes(PROBE.read_bytes())
    rc, out, err = _cli([argv[0], *argv[1:], str(path)], capsys)
    assert rc == 2 and out == ""
    assert err.splitlines() == [
        f"error: {path}: a probe registration (format: poisson-tasks/probe@1), not a "
        f"pre-registration: run it with poisson-tasks probe {path} --out DIR"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reference.yaml"]


def test_a_pre_registration_given_to_probe_is_named_as_one(
    small: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, err = _cli(["probe", str(small), "--out", "p"], capsys)
    assert rc == 2 and out == "" and not (small.parent / "p").exists()
    assert err.splitlines() == [
        f"error: {small}: a pre-registration (format: poisson-tasks/preregistration@1), not a "
        f"probe registration: run it with poisson-tasks run {small} (or card it: poisson-tasks "
        f"card {small})"
    ]


def test_a_replay_folder_is_not_carded_as_a_run(
    small: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It used to be carded as an incomplete run of the whole plan (8 slots, 2 of them held)."""
    assert _cli(["run", str(small), "--out", "r", "--quiet"], capsys)[0] == 0
    assert _cli(["replay", "r", "--sample", "2", "--quiet"], capsys)[0] == 0
    says = (
        "error: r/replay holds a replay (2 of a run's scored slots run again), not a run: what came "
        "out the same is the Reproducibility section of the run's card: poisson-tasks card r"
    )
    for argv in (["card", "r/replay"], ["view", "r/replay", "--out", "v.html"]):
        rc, out, err = _cli(argv, capsys)
        assert rc == 2 and out == "" and err.splitlines() == [says]
    assert not (small.parent / "r" / "replay" / "card").exists()
    assert not (small.parent / "v.html").exists()


def test_resuming_a_complete_run_adds_no_session(
    small: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It used to open an empty session, and the card then said 'held across the run's 2
    sessions'."""
    assert _cli(["run", str(small), "--out", "r", "--quiet"], capsys)[0] == 0
    header = (small.parent / "r" / "run.json").read_bytes()
    episodes = (small.parent / "r" / "episodes.jsonl").read_bytes()
    for argv in (["run", "--resume", "r"], ["run", str(small), "--resume", "r"]):
        rc, out, err = _cli(argv, capsys)
        assert rc == 0 and out == ""
        assert err.splitlines() == [
            "run r is complete already: 8/8 slots scored, "
            + err.split("scored, ", 1)[1].split(" tokens", 1)[0]
            + " tokens; nothing ran and no session was added (its card: poisson-tasks card r)"
        ]
    assert (small.parent / "r" / "run.json").read_bytes() == header
    assert (small.parent / "r" / "episodes.jsonl").read_bytes() == episodes
    rc, card, _ = _cli(["card", "r"], capsys)
    assert rc == 0 and "the run's 2 sessions" not in card


def test_resuming_a_complete_run_with_its_replay_done_adds_nothing_to_either(
    small: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = yaml.safe_load(small.read_text())
    doc["design"]["replay"] = {"sample": 2, "seed": 0}
    small.write_text(yaml.safe_dump(doc, sort_keys=False))
    assert _cli(["run", str(small), "--out", "r", "--quiet"], capsys)[0] == 0
    folders = [small.parent / "r", small.parent / "r" / "replay"]
    before = [(f / "run.json").read_bytes() for f in folders]
    rc, _, err = _cli(["run", "--resume", "r"], capsys)
    assert rc == 0
    assert [line.split(" is complete already")[0] for line in err.splitlines()] == [
        "run r",
        "replay r/replay",
    ]
    assert [(f / "run.json").read_bytes() for f in folders] == before


def test_version_names_the_build_a_card_records(
    small: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, err = _cli(["--version"], capsys)
    assert rc == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == f"poisson-tasks {__version__}"
    shown = {ln[:18].strip(): ln[18:].split(" ", 1)[0] for ln in lines[1:]}
    run_preregistration(small, small.parent / "r", show_progress=False)
    assert _cli(["card", "r", "--json"], capsys)[0] == 0
    provenance = json.loads((small.parent / "r" / "card" / "card.json").read_text())["provenance"]
    assert shown == {
        "engine hash": provenance["engine_hash"],
        "generator hash": provenance["generator_hash"],
        "vocabulary hash": provenance["vocabulary_hash"],
        "environment hash": provenance["environment_hash"],
    }
    assert provenance["package_version"] == __version__
