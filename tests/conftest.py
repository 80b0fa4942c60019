"""Fixtures shared by several test modules.

pytest puts this folder on sys.path (rootdir-relative, no __init__.py), so the helper modules here
(synthetic_runs, endpoint_double) import by name without any sys.path edit.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from poisson_tasks.reference import ReferenceServer, start_reference_server


@pytest.fixture(scope="module")
def server() -> Iterator[ReferenceServer]:
    """The reference endpoint in a thread of this process, on loopback and a free port."""
    with start_reference_server("127.0.0.1", 0) as srv:
        yield srv
