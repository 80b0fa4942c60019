"""The verifiers taskset id `poisson-tasks-verifiers`: vf-eval imports a taskset id as one module
name, so this top-level module re-exports poisson_tasks.export.verifiers (the `verifiers` extra)."""

from poisson_tasks.export.verifiers import (
    PoissonEnv,
    PoissonEnvConfig,
    PoissonTask,
    PoissonTaskData,
    PoissonTaskset,
    PoissonTasksetConfig,
)

__all__ = [
    "PoissonEnv",
    "PoissonEnvConfig",
    "PoissonTask",
    "PoissonTaskData",
    "PoissonTaskset",
    "PoissonTasksetConfig",
]
