"""Task generation: one pure function from (arm, seed) to a TaskBundle."""

from __future__ import annotations

from poisson_tasks.generator.assemble import generate

__all__ = ["generate"]
