"""poisson-tasks: generated tool-use tasks, a pure verifier, a pin ledger, pre-registered studies, cards.

The public API of docs/python.md is re-exported here lazily: `from poisson_tasks import generate`
imports the generator on first use, so `import poisson_tasks` (and `poisson-tasks --help`) stays
cheap. Each name still lives in its own module (the layers of docs/architecture.md).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    # arms and tasks
    "ArmSpec": "poisson_tasks.arms",
    "all_arms": "poisson_tasks.arms",
    "levels": "poisson_tasks.arms",
    "parse_arm_id": "poisson_tasks.arms",
    "TaskBundle": "poisson_tasks.bundle",
    "generate": "poisson_tasks.generator",
    "verify": "poisson_tasks.verifier",
    # the pin ledger
    "check_pins": "poisson_tasks.pins",
    "check_plan": "poisson_tasks.pins",
    "measure_pins": "poisson_tasks.pins",
    "pinned_bundle": "poisson_tasks.pins",
    # pre-registrations, runs and studies
    "load_preregistration": "poisson_tasks.prereg",
    "validate_preregistration": "poisson_tasks.prereg",
    "run_preregistration": "poisson_tasks.runner",
    "default_preregistration": "poisson_tasks.study",
    "run_arm": "poisson_tasks.calibration.runcard",
    "run_study": "poisson_tasks.calibration.runcard",
    # cards
    "build_artifact": "poisson_tasks.calibration",
    "card_from_run": "poisson_tasks.calibration",
    "card_json": "poisson_tasks.calibration",
    "provenance_from_run": "poisson_tasks.calibration",
    "read_card_json": "poisson_tasks.calibration",
    "records_from_run": "poisson_tasks.calibration",
    "render_document": "poisson_tasks.calibration",
    "write_card": "poisson_tasks.calibration.output",
    # errors
    "CardRefusal": "poisson_tasks.errors",
    "PoissonError": "poisson_tasks.errors",
}

__all__ = ["__version__", *sorted(_EXPORTS)]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'poisson_tasks' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
