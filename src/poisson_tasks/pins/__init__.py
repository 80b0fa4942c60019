"""The pin ledger: thirty rows that prove two arms of a knob differ in the knob and nothing else.

measure_pins(bundle) reads every row off one bundle (pinned_bundle(arm, seed) generates one
with its `pins` filled in); check_pins({arm_id: bundle}) holds the rows
the "who" column names across one contrast (one knob's arms at one seed) and returns a PinReport;
check_plan(arms, seeds) does it for a whole study, one contrast per knob and seed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names as mypy sees them; at run time each loads on first use (below)
    from poisson_tasks.pins.check import (
        PinReport,
        Reported,
        RowVerdict,
        Violation,
        check_pins,
        depth_band,
        figure,
    )
    from poisson_tasks.pins.measure import PinMeasurement, measure_pins, pinned_bundle
    from poisson_tasks.pins.plan import (
        ContrastSummary,
        PlanReport,
        check_plan,
        contrast_groups,
        parse_seeds,
        pin_targets,
    )
    from poisson_tasks.pins.row import PinRow
    from poisson_tasks.pins.rows import BY_ID, ROW_IDS, ROWS

# public name -> the module that defines it. Loaded on first use, so measuring one bundle
# (`generate --json`: pins.measure) does not load the contrast checks and the process pool that
# check_plan needs.
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(
        ("PinReport", "Reported", "RowVerdict", "Violation", "check_pins", "depth_band", "figure"),
        "poisson_tasks.pins.check",
    ),
    **dict.fromkeys(
        ("PinMeasurement", "measure_pins", "pinned_bundle"), "poisson_tasks.pins.measure"
    ),
    **dict.fromkeys(
        (
            "ContrastSummary",
            "PlanReport",
            "check_plan",
            "contrast_groups",
            "parse_seeds",
            "pin_targets",
        ),
        "poisson_tasks.pins.plan",
    ),
    "PinRow": "poisson_tasks.pins.row",
    **dict.fromkeys(("BY_ID", "ROW_IDS", "ROWS"), "poisson_tasks.pins.rows"),
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'poisson_tasks.pins' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


__all__ = [
    "BY_ID",
    "ROWS",
    "ROW_IDS",
    "ContrastSummary",
    "PinMeasurement",
    "PinReport",
    "PinRow",
    "PlanReport",
    "Reported",
    "RowVerdict",
    "Violation",
    "check_pins",
    "check_plan",
    "contrast_groups",
    "depth_band",
    "figure",
    "measure_pins",
    "parse_seeds",
    "pin_targets",
    "pinned_bundle",
]
