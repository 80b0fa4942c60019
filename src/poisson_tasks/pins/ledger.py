"""`generate --arms/--plan`: the pin ledger over every contrast of the targets, as it is printed.

The ledger sits below the pre-registration, so a plan comes in as a loader the caller passes
(the CLI passes prereg.load_preregistration); it is called once, after the options are known to
fit together (pin_targets).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from poisson_tasks.owntools import ToolSet
from poisson_tasks.pins.owntools import own_tools_ledger
from poisson_tasks.pins.plan import check_plan, pin_targets

__all__ = ["LedgerRun", "PlanTargets", "pin_ledger"]


class PlanTargets(Protocol):
    """What the ledger reads of a loaded pre-registration: its arms, its seeds, its own tools."""

    @property
    def arms(self) -> Sequence[str]: ...
    @property
    def seeds(self) -> Sequence[int]: ...
    @property
    def own_tools(self) -> ToolSet | None: ...


@dataclass(frozen=True)
class LedgerRun:
    """What is printed, block by block (the contrasts' rows, then what the plan's own tools change
    and cannot hold), and the one refusal line when a row refuses (exit 2)."""

    blocks: list[str]
    refusal: str | None


def pin_ledger(
    arm: str | None,
    plan: Callable[[], PlanTargets] | None,
    arms: str | None,
    seeds: str | None,
    workers: int,
) -> LedgerRun:
    """The pin ledger over --arms/--seeds or a plan's arms at its seeds, with `workers` processes."""
    loaded: list[PlanTargets] = []

    def targets() -> tuple[Sequence[str], Sequence[int]]:
        assert plan is not None
        loaded.append(plan())
        return loaded[0].arms, loaded[0].seeds

    arm_list, seed_list = pin_targets(
        arm=arm, plan=None if plan is None else targets, arms=arms, seeds=seeds
    )
    report = check_plan(arm_list, seed_list, workers=workers)
    blocks = ["\n".join(report.lines())]
    tools = loaded[0].own_tools if loaded else None
    if tools is not None:  # the plan's own tools: what they change, and what cannot be held
        blocks.append("\n".join(own_tools_ledger(arm_list, seed_list, tools).lines()))
    return LedgerRun(blocks, report.message() if report.refused else None)
