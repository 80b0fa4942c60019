"""The one-way layers contract (pyproject.toml [tool.importlinter]) holds, and it has teeth: a copy
of the package with one deliberately added upward import fails `lint-imports`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")


def _lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    """lint-imports over the package under `tree`/src, with the repository's contract."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    return subprocess.run(
        [LINT_IMPORTS, "--config", str(tree / "pyproject.toml"), "--no-cache"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of pyproject.toml and src/ (no caches) that a test may break."""
    if not Path(LINT_IMPORTS).exists():
        pytest.fail("lint-imports is not installed: pip install -e '.[dev]'")
    out = tmp_path_factory.mktemp("layers")
    shutil.copy(ROOT / "pyproject.toml", out / "pyproject.toml")
    shutil.copytree(
        ROOT / "src", out / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
    )
    return out


def test_contract_is_kept_and_names_every_module(tree: Path) -> None:
    result = _lint_imports(tree)
    assert result.returncode == 0, result.stdout + result.stderr
    # the layers, the probe package's steps and the pre-registration package's jobs
    assert "3 kept, 0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "upward"),
    [
        ("domain/engine.py", "from poisson_tasks import cli"),
        ("generator/draft.py", "from poisson_tasks.pins import measure_pins"),
        ("prereg/schema.py", "from poisson_tasks.calibration import stats"),
        ("prereg/schema.py", "from poisson_tasks.prereg import checks"),
        ("probe/figures.py", "from poisson_tasks.probe import table"),
        ("probe/published.py", "from poisson_tasks import arms"),
        ("probe/rules.py", "from poisson_tasks.probe import run"),
    ],
)
def test_an_upward_import_breaks_the_contract(tree: Path, module: str, upward: str) -> None:
    path = tree / "src" / "poisson_tasks" / module
    original = path.read_text(encoding="utf-8")
    try:
        path.write_text(original + f"\n{upward}  # deliberately upward\n", encoding="utf-8")
        result = _lint_imports(tree)
    finally:
        path.write_text(original, encoding="utf-8")
    assert result.returncode != 0, result.stdout
    assert "BROKEN" in result.stdout
    importer = "poisson_tasks." + module.removesuffix(".py").replace("/", ".")
    assert importer in result.stdout


@pytest.mark.parametrize("where", ["stray.py", "probe/stray.py", "prereg/stray.py"])
def test_a_module_outside_every_layer_breaks_the_exhaustive_contract(
    tree: Path, where: str
) -> None:
    extra = tree / "src" / "poisson_tasks" / where
    extra.write_text('"""A module no layer names."""\n', encoding="utf-8")
    try:
        result = _lint_imports(tree)
    finally:
        extra.unlink()
    assert result.returncode != 0
    assert "poisson_tasks." + where.removesuffix(".py").replace("/", ".") in result.stdout
