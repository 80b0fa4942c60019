"""measure_pins(bundle): every pin-ledger row's value read off one bundle, whatever its knob.

A row that binds another knob is still measured (N27's block size is a number on any bundle);
the two rows no bundle can carry (N10, N13) go into `unmeasured` with the reason. Every row is
in exactly one of the two. Each row's measure is its PinRow's `measure` (pins/rows/).
"""

from __future__ import annotations

from typing import Any

from poisson_tasks.arms import ArmSpec
from poisson_tasks.bundle import TaskBundle
from poisson_tasks.generator import generate
from poisson_tasks.pins.facts import BundleFacts
from poisson_tasks.pins.holding import PinMeasurement
from poisson_tasks.pins.rows import ROWS

__all__ = ["PinMeasurement", "measure_pins", "pinned_bundle"]


def measure_pins(bundle: TaskBundle) -> PinMeasurement:
    """Every row's value on `bundle`; rows no bundle can carry are listed with the reason."""
    facts = BundleFacts(bundle)
    measured: dict[str, Any] = {}
    unmeasured: dict[str, str] = {}
    for row in ROWS:
        if row.unmeasured_reason is not None:
            unmeasured[row.id] = row.unmeasured_reason
        elif row.measure is not None:
            measured[row.id] = row.measure(facts)
    return PinMeasurement(
        arm_id=bundle.arm_id,
        seed=bundle.seed,
        split=bundle.split,
        task_id=bundle.task_id,
        measured=measured,
        unmeasured=unmeasured,
    )


def pinned_bundle(arm: ArmSpec | str, seed: int) -> TaskBundle:
    """generate(arm, seed) with `bundle.pins` filled by the pin ledger's measurements.

    What `poisson-tasks generate --json` prints; task_id is the same as the plain bundle's.
    """
    bundle = generate(arm, seed)
    return bundle.model_copy(update={"pins": measure_pins(bundle).measured})
