"""The pin ledger on the user's own tools: which rows still hold, which figures the tools change,
and which rows could not be held.

Every contrast of a plan is checked twice at each seed: on the generated bundles and on the same
bundles with the user's tools in place of the read tools. A row whose figures differ between the
two is one the user's tools change (the block's tokens, the overlap of the prompt's words with
the tool names, the tool block itself); a row held on the generated bundles but violated on the
user's is one that could not be held.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict

from poisson_tasks.arms import ArmSpec, arm_id
from poisson_tasks.bundle import TaskBundle
from poisson_tasks.generator import generate
from poisson_tasks.owntools import ToolSet, with_own_tools
from poisson_tasks.pins.check import Companion, PinReport, check_pins
from poisson_tasks.pins.measure import PinMeasurement, measure_pins
from poisson_tasks.pins.plan import contrast_groups
from poisson_tasks.pins.rows import BY_ID


class RowChange(BaseModel):
    """One row the user's tools touch: on how many contrasts, and the first one's figures."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    row: str
    holds: str
    contrasts: int
    example: str


class OwnToolsLedger(BaseModel):
    """What the pin ledger finds on the user's tools across a plan."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    contrasts: int
    changed: list[RowChange]
    not_held: list[RowChange]

    def lines(self) -> list[str]:
        out = [f"pin ledger on the user's tools: {self.contrasts} contrasts checked"]
        for change in self.changed:
            out.append(
                f"  changed   {change.row} ({change.holds}) on {change.contrasts}: {change.example}"
            )
        for change in self.not_held:
            out.append(
                f"  not held  {change.row} ({change.holds}) on {change.contrasts}: {change.example}"
            )
        if not self.changed and not self.not_held:
            out.append("  every row reads the same as on the generated tasks")
        return out


def _own(tools: ToolSet, seed: int) -> Companion:
    def make(spec: ArmSpec) -> PinMeasurement:
        return measure_pins(with_own_tools(generate(spec, seed), tools))

    return make


def _reports(ids: tuple[str, ...], seed: int, tools: ToolSet) -> tuple[PinReport, PinReport]:
    plain: dict[str, TaskBundle] = {a: generate(a, seed) for a in ids}
    own = {a: with_own_tools(b, tools) for a, b in plain.items()}
    return check_pins(plain), check_pins(own, companion=_own(tools, seed))


def _figures(values: dict[str, object]) -> str:
    return ", ".join(f"{a}={v}" for a, v in values.items())


def own_tools_ledger(
    arms: Iterable[ArmSpec | str], seeds: Iterable[int], tools: ToolSet
) -> OwnToolsLedger:
    """Every contrast of the plan at every seed, on the generated and on the user's tools."""
    changed: dict[str, list[str]] = {}
    broken: dict[str, list[str]] = {}
    checked = 0
    seed_list = list(seeds)
    for group in contrast_groups(arms):
        ids = tuple(arm_id(s) for s in group)
        for seed in seed_list:
            checked += 1
            before, after = _reports(ids, seed, tools)
            for earlier, later in zip(before.rows, after.rows, strict=True):
                if earlier.verdict != "violated" and later.verdict == "violated":
                    line = next(v.line() for v in after.violations if v.row == later.row)
                    broken.setdefault(later.row, []).append(f"seed {seed}: {line}")
                elif later.values != earlier.values:
                    changed.setdefault(later.row, []).append(
                        f"seed {seed}: {_figures(dict(earlier.values))} -> {_figures(dict(later.values))}"
                    )

    def rows(found: dict[str, list[str]]) -> list[RowChange]:
        return [
            RowChange(row=r, holds=BY_ID[r].holds, contrasts=len(v), example=v[0])
            for r, v in sorted(found.items(), key=lambda kv: int(kv[0][1:]))
        ]

    return OwnToolsLedger(contrasts=checked, changed=rows(changed), not_held=rows(broken))
