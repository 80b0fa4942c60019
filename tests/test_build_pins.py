"""Build-hash pinning (a pre-registration may pin the generator and engine it was validated on),
the bootstrap thresholds' leftovers (ignored with one note), and a staleness line that names the
hash that moved."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from synthetic_runs import FAKE_ENGINE_HASH, FAKE_HASH, header, line, write_run
from typer.testing import CliRunner

from poisson_tasks.bundle import digest
from poisson_tasks.calibration import card_from_run, render_document
from poisson_tasks.calibration.cardjson import card_json
from poisson_tasks.cli import app
from poisson_tasks.hashes import engine_hash, generator_hash
from poisson_tasks.prereg import (
    IGNORED_THRESHOLDS,
    build_hashes,
    describe_plan,
    load_preregistration,
    measurement_of,
    validate_preregistration,
)
from poisson_tasks.runfolder import HEADER
from poisson_tasks.runner.folder import RunFolder

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "preregistrations" / "smoke.yaml"
cli = CliRunner()


def _doc(**extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(SMOKE.read_text(encoding="utf-8"))
    doc.update(extra)
    return doc


def _write(tmp_path: Path, doc: dict[str, Any]) -> Path:
    path = tmp_path / "pinned.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def test_validate_prints_the_hashes_a_preregistration_can_pin() -> None:
    res = cli.invoke(app, ["validate", str(SMOKE)])
    assert res.exit_code == 0
    (build,) = [ln for ln in res.stdout.splitlines() if ln.startswith("  build ")]
    assert f"generator_hash {generator_hash()}" in build
    assert f"engine_hash {engine_hash()}" in build
    assert "pin them under `build:`" in build


def test_a_preregistration_pinning_this_build_validates_and_says_so() -> None:
    plan = validate_preregistration(_doc(build=build_hashes()))
    assert plan.preregistration.build is not None
    assert "(pinned by this pre-registration)" in describe_plan(plan)
    unpinned = validate_preregistration(_doc())
    assert unpinned.preregistration_hash != plan.preregistration_hash  # the pin is measured


@pytest.mark.parametrize("name", ["generator_hash", "engine_hash"])
def test_a_pinned_hash_of_another_build_is_refused_in_one_line(tmp_path: Path, name: str) -> None:
    res = cli.invoke(app, ["validate", str(_write(tmp_path, _doc(build={name: "0" * 64})))])
    assert res.exit_code == 2
    (err,) = res.stderr.strip().splitlines()
    assert err.startswith(f"error: build.{name}: the pre-registration pins 000000000000")
    assert "a different instrument" in err and "Traceback" not in res.output
    run = cli.invoke(
        app,
        ["run", str(_write(tmp_path, _doc(build={name: "0" * 64}))), "--out", str(tmp_path / "x")],
    )
    assert run.exit_code == 2 and not (tmp_path / "x").exists()


@pytest.mark.parametrize(
    ("build", "says"),
    [
        ({"generator_hash": "abc"}, "is not a 64-digit lowercase hex hash"),
        ({}, "build: pins nothing"),
        ({"vocabulary_hash": "0" * 64}, "build.vocabulary_hash"),
    ],
)
def test_a_bad_build_section_is_refused(build: dict[str, str], says: str) -> None:
    with pytest.raises(Exception, match="build") as caught:
        validate_preregistration(_doc(build=build))
    assert says in str(caught.value)


def _old_doc() -> dict[str, Any]:
    doc = _doc()
    doc["thresholds"] = {
        **doc.get("thresholds", {}),
        "bootstrap_resamples": 2000,
        "bootstrap_seed": 20260925,
    }
    return doc


def test_an_older_preregistration_with_bootstrap_keys_validates_with_one_note(
    tmp_path: Path,
) -> None:
    res = cli.invoke(app, ["validate", str(_write(tmp_path, _old_doc()))])
    assert res.exit_code == 0
    notes = [ln for ln in res.stdout.splitlines() if ln.startswith("  note ")]
    assert len(notes) == 1
    assert "thresholds.bootstrap_resamples, thresholds.bootstrap_seed: ignored" in notes[0]
    old, new = validate_preregistration(_old_doc()), validate_preregistration(_doc())
    assert old.preregistration_hash == new.preregistration_hash
    assert "note" not in describe_plan(new)


def test_nothing_shipped_carries_the_bootstrap_keys() -> None:
    for path in sorted((ROOT / "preregistrations").rglob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        assert not any(key in text for key in IGNORED_THRESHOLDS), path
    for card in sorted((ROOT / "calibration").glob("*/card.json")):
        assert not any(key in card.read_text(encoding="utf-8") for key in IGNORED_THRESHOLDS)
    listed = (ROOT / "docs" / "commands.md").read_text(encoding="utf-8")  # its thresholds list
    assert not any(f"  {key}: " in listed for key in IGNORED_THRESHOLDS)


def test_a_folder_whose_document_has_them_still_resumes(tmp_path: Path) -> None:
    plan = load_preregistration(SMOKE)
    folder = tmp_path / "run"
    RunFolder.create(folder, plan, {}).close("interrupted", "made by the test")
    stored = json.loads((folder / HEADER).read_text())
    stored["preregistration"]["thresholds"].update(bootstrap_resamples=2000, bootstrap_seed=7)
    stored["thresholds"].update(bootstrap_resamples=2000, bootstrap_seed=7)
    stored["preregistration_hash"] = digest(
        stored["preregistration"]
    )  # as the old runner hashed it
    (folder / HEADER).write_text(json.dumps(stored))
    header_read, _ = RunFolder.check_resumable(folder, plan)  # no "another pre-registration"
    assert measurement_of(header_read.preregistration) == plan.preregistration.measurement()


def _card(tmp_path: Path, engine: str) -> Any:
    arms = ["depth:d1", "depth:d2"]
    lines = [line(a, s, k, "passed") for a in arms for s in range(4) for k in range(2)]
    folder = write_run(tmp_path / engine[:4], header(arms, range(4), 2), lines)
    return card_from_run(
        folder, installed_generator_hash=FAKE_HASH, installed_engine_hash=engine, published=[]
    )


def test_the_staleness_line_names_the_hash_that_moved(tmp_path: Path) -> None:
    fresh = _card(tmp_path, FAKE_ENGINE_HASH)
    assert not fresh.stale and fresh.stale_hashes == []
    moved = _card(tmp_path, "1" * 64)
    assert moved.stale and moved.stale_hashes == ["engine"]
    doc = render_document(moved)
    (banner,) = [ln for ln in doc.splitlines() if ln.startswith("> **Stale.**")]
    assert "engine build eeeeeeeeeeee (this install's is 111111111111)" in banner
    assert "generator build" not in banner
    assert f"- engine hash: `{FAKE_ENGINE_HASH}` (stale: this install's is `{'1' * 64}`)" in doc
    assert f"- generator hash: `{FAKE_HASH}` (this install's)" in doc
    claim = next(c for c in moved.statements.does_not_claim if c.key == "stale")
    assert "engine build" in claim.text and "generator build" not in claim.text
    assert json.loads(card_json(moved))["stale_hashes"] == ["engine"]
