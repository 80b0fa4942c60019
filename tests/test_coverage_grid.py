"""The coverage benchmark on a smaller grid, running the card's own interval code (slow)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))  # coverage_sim prints through benchmarks/common.py
_spec = importlib.util.spec_from_file_location(
    "coverage_sim", ROOT / "benchmarks" / "coverage_sim.py"
)
assert _spec and _spec.loader
coverage_sim = importlib.util.module_from_spec(_spec)
sys.modules["coverage_sim"] = coverage_sim  # its dataclasses look their module up by name
_spec.loader.exec_module(coverage_sim)


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
