"""Arguments: how many values each stage call must carry (a2 ... a8), and a2+len(aH).

Stage tools take record_id, token and the first A-2 of vocabulary.EXTRA_FIELDS; each extra field
has one fixed value from sc.extra_values (e.g. CO-4821), the same on both stage calls, checked
by the engine (ToolBinding.fixed: a wrong or missing value answers bad_args and changes
nothing). The values are stated in the `extra` slot, the knob slot, as
" Every stage call must also carry cost_center=CO-4821 and batch_ref=BA-1234." and appear in
no tool name (N31: values are upper-case with a hyphen; names are lower-case snake case).
The stage tools' schemas differ across levels only in the extra fields (N30). The control
a2+len(aH) is the a2 task whose `extra` slot holds neutral filler words instead of values,
chosen so the whole user prompt is as long as aH's within two tokens (N32); a control on a
higher base (a4+len(a8)) keeps its own stated values and adds the filler after them.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from poisson_tasks.arms import ArmSpec
from poisson_tasks.domain.vocabulary import EXTRA_FIELDS
from poisson_tasks.generator.draft import (
    Draft,
    base_block,
    base_task,
    check_band,
    climb_slots,
)
from poisson_tasks.generator.prompts import CLIMB, padding, stated_values
from poisson_tasks.generator.scenario import Scenario
from poisson_tasks.generator.tools import stage_tool
from poisson_tasks.tokens import count_tokens


def values(sc: Scenario, level: int) -> tuple[tuple[str, str], ...]:
    """The level's stated values: the first level-2 extra fields, each with its scenario value."""
    return tuple(zip(EXTRA_FIELDS[: level - 2], sc.extra_values[: level - 2], strict=True))


def prompt_tokens(sc: Scenario, extra: str) -> int:
    """Tokens of the base task's user prompt with `extra` in its knob slot."""
    return count_tokens(CLIMB.format(**climb_slots(sc, extra)))


@lru_cache(maxsize=1024)
def control_extra(sc: Scenario, level: int, higher: int) -> str:
    """The control's `extra` slot: its own stated values, then filler up to `higher`'s length."""
    own = stated_values(list(values(sc, level)))
    target = prompt_tokens(sc, stated_values(list(values(sc, higher))))
    words = padding(target, lambda text: prompt_tokens(sc, f"{own} {text}".rstrip()))
    extra = f"{own} {words}".rstrip()
    what = f"arguments a{level}+len(a{higher}) seed {sc.seed}: request"
    check_band(what, prompt_tokens(sc, extra), target)
    return extra


def build(spec: ArmSpec, sc: Scenario) -> Draft:
    fixed = values(sc, spec.level)
    right = {s: stage_tool(sc.cls, s, fixed=fixed) for s in (1, 2)}
    extra = stated_values(list(fixed))
    if spec.control is not None:
        extra = control_extra(sc, spec.level, spec.control)
    return replace(
        base_task(sc, base_block(sc, right), right, stated=dict(fixed)),
        slots=climb_slots(sc, extra),
        knob_slots=["extra"],
    )
