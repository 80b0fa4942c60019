"""The published cards are package data: one copy, inside the package, listed for the wheel."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

import poisson_tasks
from poisson_tasks.calibration.published import PUBLISHED_DIR, read_manifest

ROOT = Path(__file__).resolve().parents[1]


def test_published_cards_live_inside_the_package_and_nowhere_else() -> None:
    package = Path(poisson_tasks.__file__).resolve().parent
    assert PUBLISHED_DIR.is_relative_to(package), PUBLISHED_DIR
    assert read_manifest(), "the shipped manifest lists no card"
    assert not (ROOT / "calibration").exists(), "a second copy of the published cards at the root"


def test_package_data_globs_cover_every_published_file() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    globs = project["tool"]["setuptools"]["package-data"]["poisson_tasks"]
    package = Path(poisson_tasks.__file__).resolve().parent
    files = [p.relative_to(package).as_posix() for p in PUBLISHED_DIR.rglob("*") if p.is_file()]
    assert files
    missed = [f for f in files if not any(fnmatch.fnmatch(f, g) for g in globs)]
    assert not missed, f"not shipped in the wheel: {missed}"
