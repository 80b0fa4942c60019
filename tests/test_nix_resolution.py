"""The flake's Python resolution check (scripts/ci/nix_resolution.py): it passes on this tree, and
fails naming the cause on a uv.lock that declares a conflict the flake does not select, on a
flake.lock narHash that is not the tree's, and on sets that differ. Needs nix-bin and the unpacked
inputs in ../shared/nix-inputs (CI has both); skips in one line without them."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
INPUTS = ROOT.parent / "shared" / "nix-inputs"


def _checker() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "nix_resolution", ROOT / "scripts" / "ci" / "nix_resolution.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


needs_nix = pytest.mark.skipif(
    not INPUTS.is_dir() or not all(shutil.which(t) for t in ("nix-instantiate", "nix", "uv")),
    reason="nix-bin, uv or ../shared/nix-inputs absent (CI has them)",
)


def _workspace(tmp_path: Path) -> Path:
    """What the flake reads of this tree (pyproject.toml, uv.lock, flake.lock, nix/), copied."""
    for name in ("pyproject.toml", "uv.lock", "flake.lock", "README.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "nix", tmp_path / "nix")
    return tmp_path


@needs_nix
def test_every_environment_the_flake_builds_resolves_equal_to_uv_export(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _checker().check(ROOT, INPUTS) == []
    out = capsys.readouterr().out
    assert len(re.findall(r"^narHash .* == nix hash path", out, re.M)) == 2
    for venv in ("runtime", "dev", "dev-shell"):
        assert re.search(rf"^venv {venv}: name==version set equal to uv export", out, re.M)


@needs_nix
def test_fails_on_a_lock_declaring_a_conflict_the_flake_does_not_select(tmp_path: Path) -> None:
    root = _workspace(tmp_path)
    lock = (root / "uv.lock").read_text(encoding="utf-8")
    declared = re.search(r"^conflicts = \[\[\n(.*?)\n\]\]\n", lock, re.M | re.S)
    assert declared, "uv.lock's conflicts block moved"
    second = (
        '], [\n    { package = "poisson-tasks", extra = "local" },\n'
        '    { package = "poisson-tasks", extra = "plot" },\n'
    )
    lock = lock.replace(declared.group(0), f"conflicts = [[\n{declared.group(1)}\n{second}]]\n")
    (root / "uv.lock").write_text(lock, encoding="utf-8")
    problems = _checker().check(root, INPUTS)
    assert problems and "uv2nix could not resolve uv.lock" in problems[0], problems
    assert "conflict specifier" in problems[0]


@needs_nix
def test_fails_on_a_narhash_that_is_not_the_trees(tmp_path: Path) -> None:
    root = _workspace(tmp_path)
    lock = json.loads((root / "flake.lock").read_text(encoding="utf-8"))
    lock["nodes"]["uv2nix"]["locked"]["narHash"] = "sha256-" + "A" * 43 + "="
    (root / "flake.lock").write_text(json.dumps(lock), encoding="utf-8")
    problems = _checker().check(root, INPUTS)
    assert len(problems) == 1 and problems[0].startswith("narHash uv2nix"), problems


def test_a_difference_is_named_both_ways() -> None:
    diff = _checker().compare("dev", ["dev"], {"a==1", "b==2"}, {"a==1", "b==3", "c==1"})
    assert diff == (
        "venv dev: uv2nix's packages differ from uv export --locked --extra dev: "
        "only in uv2nix: b==2; only in uv export: b==3, c==1"
    )
    assert _checker().compare("runtime", [], {"a==1"}, {"a==1"}) is None


def test_the_flake_builds_every_venv_from_the_one_spec_file() -> None:
    """flake.nix passes nix/environments.nix's specs, and no spec of its own, so the check
    evaluates what the flake builds."""
    nix = (ROOT / "flake.nix").read_text(encoding="utf-8")
    assert "environments = import ./nix/environments.nix;" in nix
    assert re.search(r"mkPyprojectOverlay \{[^}]*dependencies = environments\.overlay;", nix)
    calls = re.findall(r'mkVirtualEnv "[\w-]+" (\S+?);?\n', nix)
    assert sorted(calls) == [
        "environments.venvs.dev-shell.spec",
        "environments.venvs.dev.spec",
        "environments.venvs.runtime.spec",
    ], calls
    spec = (ROOT / "nix" / "environments.nix").read_text(encoding="utf-8")
    assert set(re.findall(r"^    ([\w-]+) = \{$", spec, re.M)) == {"runtime", "dev", "dev-shell"}
