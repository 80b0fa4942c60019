"""PinRow: one pin-ledger row as one object: its metadata, measure, figure and hold rule.

Each row is defined once, in the `pins/rows/` module for what it holds, and registered in
`pins/rows/__init__.py`; every table the ledger reads (ROWS, ROW_IDS, BY_ID) is derived from it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from poisson_tasks.arms import KNOBS
from poisson_tasks.pins.facts import BundleFacts
from poisson_tasks.pins.holding import Contrast, Figure, Outcome

Mode = Literal["refused", "reported", "reported-and-refused"]
Measure = Callable[[BundleFacts], dict[str, Any]]
"""A row's measure: the facts of one bundle -> the row's JSON-able value on it."""
FigureOf = Callable[[Any], Figure]
"""A row's value (what its measure returned) -> one short figure."""
Hold = Callable[[Contrast], Outcome]
"""A row's hold rule: the contrast -> what holding the row across it found."""

# Who a row binds besides knob names: one knob's control arms, or a stage after generation.
CONTROL_SCOPES: dict[str, str] = {
    "depth controls": "depth",
    "faults control": "faults",
    "arguments control": "arguments",
    "shape control": "shape",
}


@dataclass(frozen=True)
class PinRow:
    """One row of the ledger: an id, a short name printed beside it, what it holds across a
    contrast, who it binds, its mode, and (unless no bundle can carry it) how it is measured,
    shown and held.

    `reported_figure` is what a reported row records when it is not the row's figure;
    `reports_without_controls` makes the row's verdict "reported", not "held", on a contrast
    with no control arm (a row that holds only controls and otherwise just reports a number).
    """

    id: str
    name: str
    holds: str
    who: tuple[str, ...]
    mode: Mode
    measure: Measure | None = None
    figure: FigureOf | None = None
    hold: Hold | None = None
    report_only_for: tuple[str, ...] = ()
    unmeasured_reason: str | None = None
    note: str = ""
    reported_figure: FigureOf | None = None
    reports_without_controls: bool = False

    def __post_init__(self) -> None:
        parts = (self.measure, self.figure, self.hold)
        if self.unmeasured_reason is None and any(p is None for p in parts):
            raise ValueError(f"pin row {self.id}: a measured row needs a measure, figure and hold")
        if self.unmeasured_reason is not None and any(p is not None for p in parts):
            raise ValueError(f"pin row {self.id}: an unmeasured row has no measure, figure or hold")

    @property
    def label(self) -> str:
        """The row's code with its name, as every report prints it: `N5 block tokens`."""
        return f"{self.id} {self.name}"

    @property
    def measurable(self) -> bool:
        """False for the two rows no bundle can carry (no server, no trace at generation time)."""
        return self.unmeasured_reason is None

    def knobs(self) -> tuple[str, ...]:
        """The knobs whose contrasts check_pins holds this row across, in KNOBS order."""
        named = {CONTROL_SCOPES.get(w, w) for w in self.who}
        return tuple(k for k in KNOBS if k in named)

    def controls_only(self, knob: str) -> bool:
        """True when the row binds only `knob`'s control arms (N9, N26, N32, N34)."""
        return any(CONTROL_SCOPES.get(w) == knob for w in self.who) and knob not in self.who

    def who_text(self) -> str:
        """The who column as the doc prints it."""
        knobs = [w for w in self.who if w in KNOBS]
        rest = [w for w in self.who if w not in KNOBS]
        head = ["every knob"] if len(knobs) == len(KNOBS) else knobs
        return ", ".join([*head, *rest])

    def mode_text(self) -> str:
        """The mode column as the doc prints it."""
        if self.report_only_for:
            return f"{self.mode}; reported for {', '.join(self.report_only_for)}"
        return self.mode
