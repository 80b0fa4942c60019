"""Exports of the tasks to other evaluation stacks.

`poisson_tasks.export.verifiers` is the verifiers (PrimeIntellect) v1 taskset run by the null
harness; it needs the `verifiers` extra (`pip install "poisson-tasks[verifiers]"`). Nothing here is
imported by the package itself, so the core install never needs verifiers.
"""
