"""The coverage benchmark on a smaller grid, running the card's own interval code (slow)."""

from __future__ import annotations

import coverage_sim  # benchmarks/ is on pytest's pythonpath (pyproject.toml)
import pytest


@pytest.mark.slow
def test_small_grid_keeps_coverage_where_events_suffice() -> None:
    rows = list(coverage_sim.run_grid(runs=1500, seed=7, small=True))
    rates = [r for r in rows if r.delta is None]
    pairs = [r for r in rows if r.delta is not None]
    assert len(rates) == 2 * 2 * 3 * 2 and pairs
    # MC standard error at 1,500 runs is 0.0056: allow two of them beyond the 93-98% band
    slack = 0.012
    for r in rows:
        if r.enough_events:
            assert 0.93 - slack <= r.coverage <= 0.98 + slack, r
        assert r.coverage > 0.85, r  # few events: wide and marked, never badly wrong here
        assert r.width > 0.0, r  # no zero-width interval, ever
        if r.false_distinguishable is not None:
            assert r.false_distinguishable <= 0.05, r  # the sign test bounds it: no slack
