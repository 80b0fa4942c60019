"""The table from a failed POST's exception to its retry kind (runner/failures.py) is read in
order, so no entry may sit behind an entry for one of its base classes, where it would never be
reached."""

from __future__ import annotations

from poisson_tasks.runner.failures import CAUGHT, RETRY_KINDS


def test_no_entry_of_the_retry_table_is_shadowed_by_an_earlier_base_class() -> None:
    for index, (types, _) in enumerate(RETRY_KINDS):
        for earlier, _ in RETRY_KINDS[:index]:
            shadowed = [t.__name__ for t in types if issubclass(t, earlier)]
            assert shadowed == [], f"entry {index} is caught earlier: {shadowed}"
    assert len(CAUGHT) == len(set(CAUGHT))
