"""The verifiers taskset id `poisson-tasks-verifiers`: vf-eval imports a taskset id as one module
name, so this top-level module re-exports poisson_tasks.export.verifiers (the `verifiers` extra).
It is also the harness id the env pins: verifiers imports a harness id the same way, and takes the
one Harness this module exports (export.harness.LockedNullHarness)."""

from poisson_tasks.export.harness import LockedNullHarness
from poisson_tasks.export.verifiers import (
    PoissonEnv,
    PoissonEnvConfig,
    PoissonTask,
    PoissonTaskData,
    PoissonTaskset,
    PoissonTasksetConfig,
)

__all__ = [
    "LockedNullHarness",
    "PoissonEnv",
    "PoissonEnvConfig",
    "PoissonTask",
    "PoissonTaskData",
    "PoissonTaskset",
    "PoissonTasksetConfig",
]
