"""Fixtures shared by several test modules.

pytest puts this folder on sys.path (rootdir-relative, no __init__.py), so the helper modules here
(synthetic_runs, endpoint_double) import by name without any sys.path edit.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest
from test_runner import prereg

from poisson_tasks.reference import ReferenceServer, start_reference_server
from poisson_tasks.runner import run_preregistration


@pytest.fixture(scope="module")
def server() -> Iterator[ReferenceServer]:
    """The reference endpoint in a thread of this process, on loopback and a free port."""
    with start_reference_server("127.0.0.1", 0) as srv:
        yield srv


class PlannedRun(NamedTuple):
    """A two-task pre-registration against the loopback reference server, and its run folder."""

    prereg: Path
    folder: Path


@pytest.fixture
def planned_run(tmp_path: Path, server: ReferenceServer) -> PlannedRun:
    """The pre-registration written, its folder (`tmp_path/run`) not made yet."""
    return PlannedRun(prereg(tmp_path, base_url=server.base_url, tasks=2), tmp_path / "run")


@pytest.fixture
def finished_run(planned_run: PlannedRun) -> PlannedRun:
    """The same, run to completion."""
    run_preregistration(planned_run.prereg, planned_run.folder, show_progress=False)
    return planned_run
