"""What a design can resolve, and how `validate` says it: the worst-case MDD, the difference the
card's call rule makes at 80% power, and the under-powered warning, from power.py's arithmetic.

It sits beside power.py (below the pre-registration, whose Plan holds a Resolution) so the words
are written once: `validate` prints them and docs/commands.md explains them.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from poisson_tasks.nouns import counted
from poisson_tasks.power import (
    called_difference,
    mdd_binomial_worst_case,
    minimum_detectable_difference,
    tasks_needed,
)

__all__ = ["Resolution", "power_warning", "reads_line", "resolution_line", "resolution_of"]


class Resolution(BaseModel):
    """What the design can call: the smallest paired difference at 80% power, worst case.

    mdd_*: the difference whose interval clears zero at 80% power (the MDD); called_*: the
    difference the card's whole call rule makes at 80% power (power.called_difference: the MDD,
    or the declared resolution plus what the measured difference must clear, whichever is
    larger). under_powered: the MDD of arms of any dependence is above the declared resolution,
    so in the worst case the interval, not the resolution, decides; tasks_needed_*: the tasks
    that bring the MDD down to the declared resolution.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    mdd_any: float = Field(description="worst case for arms of any dependence, Var(d) = 1")
    mdd_independent: float = Field(description="worst case for independent arms, Var(d) = 0.5")
    called_any: float = Field(description="called at 80% power, arms of any dependence")
    called_independent: float = Field(description="called at 80% power, independent arms")
    declared: float
    under_powered: bool
    tasks: int
    tasks_needed_any: int
    tasks_needed_independent: int


def resolution_of(tasks: int, attempts: int, declared: float) -> Resolution:
    """The design's resolution: MDD at alpha 0.05 and 80% power under worst-case variance, and
    the difference the card's call rule makes at 80% power."""
    mdd_any = minimum_detectable_difference(tasks, attempts)
    return Resolution(
        mdd_any=mdd_any,
        mdd_independent=mdd_binomial_worst_case(tasks),
        called_any=called_difference(tasks, declared),
        called_independent=called_difference(tasks, declared, var_d=0.5),
        declared=declared,
        under_powered=mdd_any > declared + 1e-12,
        tasks=tasks,
        tasks_needed_any=tasks_needed(declared, 1.0),
        tasks_needed_independent=tasks_needed(declared, 0.5),
    )


def _mdd_text(mdd: float) -> str:
    """An MDD as validate prints it: a rate difference cannot exceed 1, so a larger MDD is
    `above 1` (its explanation is printed once, in the warning)."""
    return "above 1" if mdd > 1.0 else f"{mdd:.3f}"


def resolution_line(resolution: Resolution) -> str:
    """validate's `resolution` line: the worst-case MDDs and where the declared one is reached."""
    return (
        f"MDD {_mdd_text(resolution.mdd_any)} for arms of any dependence, "
        f"{_mdd_text(resolution.mdd_independent)} for independent arms (alpha 0.05, 80% power, "
        f"worst-case variance); declared {resolution.declared:.3f}, which the MDD reaches at "
        f"{resolution.tasks_needed_any} tasks per arm "
        f"({resolution.tasks_needed_independent} for independent arms)"
    )


def power_warning(resolution: Resolution) -> str | None:
    """validate's one under-powered line, in words, or None when the design is not."""
    if not resolution.under_powered:
        return None
    tasks = f"{counted(resolution.tasks, 'task')} per arm"
    need = (
        f"{resolution.tasks_needed_any} tasks per arm bring the worst case down to the declared "
        f"{resolution.declared:.3f} ({resolution.tasks_needed_independent} for independent arms)"
    )
    if resolution.mdd_any > 1.0:
        return (
            f"under-powered: with {tasks} no level-to-level difference is sure to be called, "
            "however large (the worst-case MDD is above 1, the largest a difference of two rates "
            f"can be); {need}"
        )
    return (
        f"under-powered for the worst case: {tasks} leave the worst-case MDD at "
        f"{resolution.mdd_any:.3f}, above the declared {resolution.declared:.3f}, so whether a "
        "difference between the two is called depends on how closely the levels' tasks agree "
        f"(the card's paired interval shows it); {need}"
    )


def reads_line(resolution: Resolution) -> str:
    """What a design with two levels of a knob can and cannot read, in words."""
    if resolution.mdd_any > 1.0:
        return (
            "no level-to-level difference is guaranteed at this size (the worst-case MDD is above "
            "1); a pair whose seeds agree closely can still be called, and any other reads too "
            "small to call, which says the design was too small, not that the levels are alike"
        )
    return (
        f"a level-to-level difference of {resolution.called_any:.3f} or more is called at "
        f"80% power however the arms are paired ({resolution.called_independent:.3f} or more "
        f"between independent arms); the declared {resolution.declared:.3f} itself is called "
        "about half the time at any size (the measured difference must reach it too), and too "
        "small to call says the design could not tell, not that the levels are alike"
    )
