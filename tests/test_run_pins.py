"""The pin ledger is held over the plan before the first request: `run` and `run_arm` refuse a
plan whose contrast violates a row, and the reference endpoint sees no request at all."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

import poisson_tasks.generator as generator_module
import poisson_tasks.pins.plan as pin_plan
from poisson_tasks.bundle import TaskBundle
from poisson_tasks.cli import app
from poisson_tasks.errors import PinRefusal
from poisson_tasks.reference import start_reference_server
from poisson_tasks.reference.app import ReferenceApp
from poisson_tasks.study import run_arm

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "preregistrations" / "smoke.yaml"
cli = CliRunner()


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every request the reference endpoint answers, by path (the endpoint counts its requests)."""
    seen: list[str] = []
    real = ReferenceApp.handle

    def counting(
        self: ReferenceApp, method: str, path: str, headers: Mapping[str, str], body: bytes
    ) -> Any:
        seen.append(path)
        return real(self, method, path, headers, body)

    monkeypatch.setattr(ReferenceApp, "handle", counting)
    return seen


@pytest.fixture
def broken_depth(monkeypatch: pytest.MonkeyPatch) -> None:
    """depth:d8's system prompt gains a sentence the other levels lack: pin row N3 breaks."""
    real = generator_module.generate

    def generate(arm: Any, seed: int, *args: Any, **kwargs: Any) -> TaskBundle:
        bundle = real(arm, seed, *args, **kwargs)
        if bundle.arm_id == "depth:d8":
            prompt = bundle.system_prompt + " Be quick."
            return bundle.model_copy(update={"system_prompt": prompt})
        return bundle

    monkeypatch.setattr(generator_module, "generate", generate)
    monkeypatch.setattr(pin_plan, "generate", generate)  # what check_plan generates with


def test_the_counter_counts(served: list[str]) -> None:
    """The counting endpoint is live: one request, one count (so 0 below means none was made)."""
    with start_reference_server("127.0.0.1", 0) as srv:
        assert httpx.get(f"{srv.url}/health").status_code == 200
    assert served == ["/health"]


def test_run_refuses_a_plan_violating_a_pin_row_before_any_request(
    tmp_path: Path, served: list[str], broken_depth: None
) -> None:
    out = tmp_path / "run"
    result = cli.invoke(app, ["run", str(SMOKE), "--out", str(out)])
    assert result.exit_code == 2, result.output
    lines = [x for x in result.stderr.splitlines() if x.strip()]
    assert len(lines) == 1
    assert "N3" in lines[0] and "depth:d2" in lines[0] and "depth:d8" in lines[0]
    assert "[" in lines[0]  # the values of the arms
    assert served == []
    assert not out.exists()


def test_run_arm_refuses_the_plan_before_its_cell_runs(
    tmp_path: Path, served: list[str], broken_depth: None
) -> None:
    with pytest.raises(PinRefusal, match="N3"):
        run_arm(SMOKE, "depth:d2", tmp_path / "cell")  # the refused contrast is the plan's
    assert served == []


def test_there_is_no_switch_to_skip_the_pin_check(tmp_path: Path) -> None:
    result = cli.invoke(app, ["run", str(SMOKE), "--skip-pin-check", "--out", str(tmp_path / "r")])
    assert result.exit_code == 2 and "No such option" in result.output + result.stderr
