"""Where the project reads a spec sentence one way of two, each reading pinned
(docs/spec-deviations.md gives the reasons): which arms' prompts are message lists, where a
bundle's pins are filled, and what cuts an episode short.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from synthetic_runs import reference_preregistration

from poisson_tasks.arms import KNOBS, ArmSpec, all_arms
from poisson_tasks.generator import generate
from poisson_tasks.pins import measure_pins, pinned_bundle, views
from poisson_tasks.prereg import load_preregistration
from poisson_tasks.reference import ReferenceServer
from poisson_tasks.runfolder import iter_episodes
from poisson_tasks.runner import run_preregistration

SEEDS = (0, 5)
SEEDS_HISTORY = frozenset({"depth", "faults"})  # the knobs whose control arm seeds history


def _seeds_history(spec: ArmSpec) -> bool:
    if spec.knob == "history":
        return spec.level > 0
    return spec.control is not None and spec.knob in SEEDS_HISTORY


@pytest.mark.parametrize("knob", KNOBS)
def test_the_prompt_is_a_message_list_exactly_when_the_task_seeds_history(knob: str) -> None:
    """A string on a plain arm; a message list on an arm that seeds history: the depth and faults
    controls and every history level above t0. The distractor, block, arguments and shape controls
    hold length elsewhere (system prompt, block, request), seed nothing, and keep a string."""
    for spec in all_arms(knob):
        for seed in SEEDS:
            bundle = generate(spec, seed)
            seeded = views.seeded_history(bundle)
            assert isinstance(bundle.prompt, list) == _seeds_history(spec) == bool(seeded), (
                spec.id,
                seed,
            )


@pytest.mark.parametrize("knob", KNOBS)
def test_generate_leaves_pins_empty_and_pinned_bundle_fills_them(knob: str) -> None:
    """The generator sits below the pin ledger: generate() returns pins empty; pinned_bundle()
    is the same task (pins are outside task_id) with every measured row filled."""
    for spec in all_arms(knob):
        plain = generate(spec, 1)
        pinned = pinned_bundle(spec, 1)
        assert plain.pins == {}
        assert pinned.task_id == plain.task_id
        assert pinned.pins == measure_pins(plain).measured
        assert pinned.model_copy(update={"pins": {}}) == plain


def _prereg(tmp_path: Path, server: ReferenceServer, turn_limit: int) -> Path:
    doc = reference_preregistration(
        "horizon",
        ["depth:d1"],
        tasks=2,
        attempts=1,
        policy="overshoot",
        seed_string="horizon-test",
        slack=0,
        model={"base_url": server.base_url},
        design={"turn_limit": turn_limit},
    )
    path = tmp_path / f"horizon-{turn_limit}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_the_turn_limit_cuts_an_episode_and_the_horizon_does_not(
    tmp_path: Path, server: ReferenceServer
) -> None:
    """depth:d1 with slack 0 has a horizon of 2 turns; the overshoot policy climbs its record to
    stage 8, nine model calls. Under a turn limit of 32 the episode runs past the horizon and ends
    on its reply (overshoot); under a turn limit of 4 it is cut at 4 (turn_limit)."""
    wide = _prereg(tmp_path, server, 32)
    assert load_preregistration(wide).horizon == 2
    run_preregistration(wide, tmp_path / "wide", show_progress=False)
    lines = list(iter_episodes(tmp_path / "wide"))
    assert [(ln.outcome, ln.model_calls) for ln in lines] == [("overshoot", 9)] * 2
    run_preregistration(_prereg(tmp_path, server, 4), tmp_path / "cut", show_progress=False)
    cut = list(iter_episodes(tmp_path / "cut"))
    assert [(ln.outcome, ln.model_calls) for ln in cut] == [("turn_limit", 4)] * 2
