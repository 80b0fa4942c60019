"""The published cards live once in git, at the top-level calibration/, and ship in the wheel."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import poisson_tasks
from poisson_tasks.calibration import manifest
from poisson_tasks.calibration.published import PUBLISHED_DIR, read_manifest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = Path(poisson_tasks.__file__).resolve().parent


def _setup_constants() -> dict[str, str]:
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out[target.id] = node.value.value
    return out


def test_a_checkout_reads_the_top_level_calibration_folder_and_holds_no_second_copy() -> None:
    assert ROOT / "calibration" == PUBLISHED_DIR, PUBLISHED_DIR
    assert read_manifest(), "calibration/manifest.json lists no card"
    assert not PACKAGE.joinpath(*manifest.SHIPPED).exists(), "a second copy inside the package"


def test_the_wheel_build_step_copies_calibration_to_where_an_installed_package_looks() -> None:
    constants = _setup_constants()
    assert constants["SOURCE"] == manifest.CHECKOUT
    assert constants["TARGET"] == "/".join(("poisson_tasks", *manifest.SHIPPED))
    # an sdist carries calibration/, so a wheel built from the sdist has it too
    assert "graft calibration" in (ROOT / "MANIFEST.in").read_text(encoding="utf-8").splitlines()


def test_an_installed_layout_finds_its_own_copy(tmp_path: Path) -> None:
    """A package with data/published/ (what the wheel holds) reads that copy, not a checkout's."""
    site = tmp_path / "site-packages" / "poisson_tasks"
    shutil.copytree(ROOT / "calibration", site.joinpath(*manifest.SHIPPED))
    assert manifest.locate_published(site) == site.joinpath(*manifest.SHIPPED)
    assert read_manifest(manifest.locate_published(site)) == read_manifest()
    bare = tmp_path / "checkout" / "src" / "poisson_tasks"
    bare.mkdir(parents=True)
    assert manifest.locate_published(bare) == tmp_path / "checkout" / "calibration"
