"""The plan as `poisson-tasks validate` prints it."""

from __future__ import annotations

from poisson_tasks.arms import parse_arm_id
from poisson_tasks.nouns import counted
from poisson_tasks.prereg.schema import Plan, build_hashes
from poisson_tasks.resolution import (
    power_warning,
    reads_line,
    resolution_line,
)
from poisson_tasks.seeding import validate_seed_line
from poisson_tasks.supplied import terminal


def _reads(plan: Plan) -> list[str]:
    """What the design can and cannot resolve, in words, from the resolution figures above."""
    resolution = plan.resolution
    levels: dict[str, set[str]] = {}
    for arm in plan.arms:
        spec = parse_arm_id(arm)
        if not spec.is_control:
            levels.setdefault(spec.knob, set()).add(arm)
    out = []
    if not any(len(arms) > 1 for arms in levels.values()):
        out.append(
            "no knob has two levels here: nothing is compared, and the card gives each arm's rates "
            "with their intervals only"
        )
    else:
        out.append(reads_line(resolution))
    if plan.attempts == 1:
        out.append(
            "one attempt per task: pass@k and pass^k beyond k = 1 read n/a, and whether a task's "
            "attempts agree with each other is not seen"
        )
    return out


def describe_plan(plan: Plan, *, seeds: bool = False) -> str:
    """The plan as validate prints it: arms, seeds and hash, episodes, horizon, resolution (and,
    with `seeds`, the seed list: validate --seeds)."""
    pr = plan.preregistration
    resolution = plan.resolution
    lines = [
        f"pre-registration {pr.name} ({terminal(plan.source or 'in memory')}): valid",
        f"  model        {pr.model.provider} {terminal(pr.model.model)}"
        + (f" @ {terminal(pr.model.revision)}" if pr.model.revision else ""),
        f"  arms         {len(plan.arms)}: {', '.join(plan.arms)}",
        f"  seeds        {len(plan.seeds)} from {terminal(repr(pr.design.seed_string))}, "
        f"seed_list_hash {plan.seed_list_hash}",
        f"  episodes     {plan.episodes} ({counted(len(plan.arms), 'arm')} x "
        f"{counted(len(plan.seeds), 'task')} x {counted(plan.attempts, 'attempt')})",
        f"  horizon      {plan.horizon} (slack {pr.design.slack}); turn limit "
        f"{pr.design.turn_limit}",
        f"  resolution   {resolution_line(resolution)}",
    ]
    warning = power_warning(resolution)
    if warning is not None:
        lines.append(f"  warning: {warning}")
    lines += [f"  reads        {line}" for line in _reads(plan)]
    lines.append(
        f"  seed         {validate_seed_line(pr.model.provider, pr.decoding.seed == 'derived')}"
    )
    budget = pr.budget
    lines.append(
        f"  budget       {budget.tokens:,} tokens, {budget.wall_clock_s:g} s per session, "
        + (f"${budget.dollars:g}" if budget.dollars is not None else "no dollar cap")
        + ("" if pr.model.rates else " (no rates declared: dollars are not computed)")
    )
    if plan.own_tools is not None:
        lines.append(
            f"  own tools    {len(plan.own_tools.tools)} from {terminal(plan.own_tools.source)} "
            "(sha256 "
            f"{plan.own_tools.sha256[:16]}), in place of the read tools"
        )
    lines.append(f"  concurrency  {pr.execution.concurrency}")
    lines.append(f"  hash         {plan.preregistration_hash}")
    pinned = pr.build is not None
    lines.append(
        "  build        "
        + ", ".join(f"{k} {v}" for k, v in build_hashes().items())
        + (
            " (pinned by this pre-registration)"
            if pinned
            else " (this install's; pin them under `build:` to refuse another build)"
        )
    )
    lines += [f"  note         {note}" for note in plan.notes]
    if seeds:
        lines.append("seeds: " + ", ".join(map(str, plan.seeds)))
    return "\n".join(lines)
