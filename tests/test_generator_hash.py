"""The generator hash covers what a card's figures depend on: the tasks and how they are judged."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import poisson_tasks

_PRINT_HASH = "from poisson_tasks.hashes import generator_hash; print(generator_hash())"


def _hash_of(package: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(package.parent)}
    done = subprocess.run(
        [sys.executable, "-c", _PRINT_HASH], capture_output=True, text=True, env=env, check=True
    )
    return done.stdout.strip()


@pytest.mark.parametrize(
    ("changed", "moves"),
    [("verifier.py", True), ("generator/assemble.py", True), ("cli.py", False)],
)
def test_a_change_to_how_episodes_are_judged_moves_the_generator_hash(
    tmp_path: Path, changed: str, moves: bool
) -> None:
    package = tmp_path / "poisson_tasks"
    shutil.copytree(
        Path(poisson_tasks.__file__).parent, package, ignore=shutil.ignore_patterns("__pycache__")
    )
    before = _hash_of(package)
    with (package / changed).open("a", encoding="utf-8") as fh:
        fh.write("\n# an edit\n")
    assert (_hash_of(package) != before) is moves
