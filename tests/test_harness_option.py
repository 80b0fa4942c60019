"""design.harness: native | verifiers-null in the pre-registration, its hash, provenance and card.

These need no verifiers install; the runs themselves are in test_verifiers_parity.py (the extra).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from synthetic_runs import header

from poisson_tasks.calibration.provenance import provenance_from_header
from poisson_tasks.errors import MissingExtraError, PreregistrationError
from poisson_tasks.prereg import load_preregistration, validate_preregistration
from poisson_tasks.runner import run_preregistration

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "preregistrations" / "smoke.yaml"


def _smoke(**design: Any) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(SMOKE.read_text(encoding="utf-8"))
    doc["design"].update(design)
    return doc


def test_native_is_the_default_and_leaves_the_hash_alone() -> None:
    plain = validate_preregistration(_smoke())
    native = validate_preregistration(_smoke(harness="native"))
    assert plain.preregistration.design.harness == "native"
    assert plain.preregistration_hash == native.preregistration_hash
    assert plain.preregistration_hash == load_preregistration(SMOKE).preregistration_hash
    assert "harness" not in plain.preregistration.model_dump(mode="json")["design"]


def test_verifiers_null_is_part_of_the_measurement() -> None:
    plain = validate_preregistration(_smoke())
    null = validate_preregistration(_smoke(harness="verifiers-null"))
    assert null.preregistration.model_dump(mode="json")["design"]["harness"] == "verifiers-null"
    assert null.measurement_hash != plain.measurement_hash


def test_an_unknown_harness_is_refused_naming_the_field() -> None:
    with pytest.raises(PreregistrationError) as err:
        validate_preregistration(_smoke(harness="bash"))
    assert any(p.startswith("design.harness") for p in err.value.problems)


def test_provenance_names_the_harness_and_only_then_the_verifiers_version() -> None:
    head = header(["depth:d1"], [0], 1)  # the synthetic runs are verifiers-null runs
    null = provenance_from_header(head, "r" * 64)
    assert null.harness == "verifiers 0.4.0 taskset poisson-tasks-verifiers, null harness"
    assert null.verifiers_version == "0.4.0"
    head.preregistration["design"]["harness"] = "native"
    native = provenance_from_header(head, "r" * 64)
    assert native.harness.startswith("poisson-tasks runner") and native.verifiers_version is None


@pytest.mark.skipif(shutil.which("vf-eval") is not None, reason="the verifiers extra is installed")
def test_verifiers_null_without_the_extra_stops_before_the_folder(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(_smoke(harness="verifiers-null")))
    with pytest.raises(MissingExtraError, match=r"poisson-tasks\[verifiers\]"):
        run_preregistration(path, tmp_path / "run", show_progress=False)
    assert not (tmp_path / "run").exists()
