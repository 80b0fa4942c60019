"""The wheel's one build step: the top-level calibration/ folder ships as package data.

The published cards and their records live once in git, at the repository's top-level
calibration/ (the design card's layout). A wheel (or an sdist's wheel) carries a copy at
poisson_tasks/data/published/, where an installed package finds them
(calibration/manifest.py). An editable install copies nothing: it reads calibration/ in place.
Everything else about the build is in pyproject.toml.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SOURCE = "calibration"  # in the repository
TARGET = "poisson_tasks/data/published"  # inside the wheel


class BuildPy(build_py):
    """build_py, then calibration/ copied whole into the package's data."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        source = Path(__file__).resolve().parent / SOURCE
        target = Path(self.build_lib, *TARGET.split("/"))
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(source, target)


setup(cmdclass={"build_py": BuildPy})
