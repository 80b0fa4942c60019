"""A run's tasks regenerated from (arm, seed): what a report shows beside each episode and pair.

`regenerate` is a pure function of the run's plan, so the report runs it in a second process
while the first reads the records (gather.py): it returns each task's id and reference calls (the
episodes are checked against them), and each arm's task views and the paired facts already packed
for the page, so only small values cross back.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from poisson_tasks.arms import ArmSpec, arm_id, parse_arm_id
from poisson_tasks.bundle import TaskBundle
from poisson_tasks.errors import PoissonError
from poisson_tasks.generator import generate
from poisson_tasks.view.diverge import task_changes

__all__ = ["TaskSet", "pairs_of", "regenerate", "task_view"]


@dataclass
class TaskSet:
    """Each (arm, seed)'s task id and reference calls, and the page's packed task chunks."""

    ids: dict[tuple[str, int], str] = field(default_factory=dict)
    references: dict[tuple[str, int], list[dict[str, Any]]] = field(default_factory=dict)
    packed: dict[str, str] = field(default_factory=dict)  # arm -> its task views, packed
    pairs: dict[str, dict[int, dict[str, Any]]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def task_view(bundle: TaskBundle) -> dict[str, Any]:
    """The parts of a task a reader looks at beside an episode; its opening messages are not
    repeated (the transcript holds them, as the model was sent them)."""
    return {
        "task_id": bundle.task_id,
        "verifier": bundle.verifier,
        "goal": [g.model_dump() for g in bundle.goal],
        "tools": bundle.tools,
        "reference_calls": [c.model_dump() for c in bundle.reference_calls],
        "reference_observations": bundle.reference_observations,
        "initial_state": [list(r) for r in bundle.initial_state],
        "expected_final_state": [list(r) for r in bundle.expected_final_state],
        "min_calls": bundle.min_calls,
        "reference_turns": bundle.reference_turns,
        "prompt_slots": bundle.prompt_parts.slots,
    }


def pairs_of(arms: Sequence[str]) -> list[tuple[str, str]]:
    """(lower, upper) arms read side by side: each knob's adjacent levels (its arms that are not
    controls, in level order, as a card's knob table lists them), then each control arm beside
    the level it keeps and the level whose length it adds, where the plan has them."""
    specs = {arm: parse_arm_id(arm) for arm in arms}
    by_knob: dict[str, list[tuple[int, str]]] = {}
    for arm, spec in specs.items():
        if spec.control is None:
            by_knob.setdefault(spec.knob, []).append((spec.level, arm))
    pairs: list[tuple[str, str]] = []
    for levels in by_knob.values():
        ordered = [arm for _, arm in sorted(levels)]
        pairs += list(itertools.pairwise(ordered))
    for arm, spec in specs.items():
        if spec.control is None:
            continue
        base: ArmSpec = dataclasses.replace(spec, control=None)
        longer: ArmSpec = dataclasses.replace(spec, level=spec.control, control=None)
        for low, up in ((arm_id(base), arm), (arm, arm_id(longer))):
            if low in specs and up in specs:
                pairs.append((low, up))
    return list(dict.fromkeys(pairs))


def regenerate(arms: Sequence[str], seeds: Sequence[int], pack: Callable[[Any], str]) -> TaskSet:
    """Every (arm, seed) task of the plan, packed per arm with `pack`, and the paired facts."""
    out = TaskSet()
    bundles: dict[tuple[str, int], TaskBundle] = {}
    for arm in arms:
        views: dict[int, dict[str, Any]] = {}
        for seed in seeds:
            try:
                bundle = generate(arm, seed, controls=False)
            except PoissonError as exc:
                out.problems.append(f"{arm} seed {seed}: no task generated ({exc})")
                continue
            bundles[arm, seed] = bundle
            views[seed] = task_view(bundle)
            out.ids[arm, seed] = bundle.task_id
            out.references[arm, seed] = views[seed]["reference_calls"]
        out.packed[arm] = pack(views)
    for lower, upper in pairs_of(arms):
        changes = out.pairs.setdefault(f"{lower}|{upper}", {})
        for seed in seeds:
            low, up = bundles.get((lower, seed)), bundles.get((upper, seed))
            if low is not None and up is not None:
                changes[seed] = task_changes(low, up)
    return out
