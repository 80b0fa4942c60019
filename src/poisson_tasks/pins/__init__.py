"""The pin ledger: thirty rows that prove two arms of a knob differ in the knob and nothing else.

measure_pins(bundle) reads every row off one bundle (pinned_bundle(arm, seed) generates one
with its `pins` filled in); check_pins({arm_id: bundle}) holds the rows
the "who" column names across one contrast (one knob's arms at one seed) and returns a PinReport;
check_plan(arms, seeds) does it for a whole study, one contrast per knob and seed.
"""

from __future__ import annotations

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
