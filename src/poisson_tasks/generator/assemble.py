"""generate(arm, seed): draw the scenario, let the knob build its draft, replay the reference, seal the bundle."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from poisson_tasks.arms import ArmSpec, arm_id, parse_arm_id
from poisson_tasks.bundle import PromptParts, TaskBundle, assembled, canonical_model
from poisson_tasks.domain.engine import LedgerState, apply, initial_state, line_status
from poisson_tasks.domain.ledger import EngineConfig, Row
from poisson_tasks.errors import ArmError, GeneratorFault
from poisson_tasks.generator import (
    arguments,
    block,
    depth,
    distractor,
    faults,
    history,
    shape,
    similarity,
    spread,
)
from poisson_tasks.generator.controls import control_plans
from poisson_tasks.generator.draft import Draft
from poisson_tasks.generator.prompts import SYSTEM_PROMPT, render
from poisson_tasks.generator.scenario import Scenario, check_seed, draw_scenario
from poisson_tasks.generator.tools import block_schemas
from poisson_tasks.hashes import engine_hash, generator_hash, vocabulary_hash

Builder = Callable[[ArmSpec, Scenario], Draft]
BUILDERS: dict[str, Builder] = {
    "depth": depth.build,
    "distractor": distractor.build,
    "similarity": similarity.build,
    "faults": faults.build,
    "history": history.build,
    "block": block.build,
    "arguments": arguments.build,
    "shape": shape.build,
    "spread": spread.build,
}
_OK_STATUSES = ("ok", "unavailable", "part")


def _spec(arm: ArmSpec | str) -> ArmSpec:
    return _parsed(arm) if isinstance(arm, str) else arm


@lru_cache(maxsize=4096)
def _parsed(arm: str) -> ArmSpec:
    """parse_arm_id, once per id: an ArmSpec is frozen, so one instance serves every seed."""
    return parse_arm_id(arm)


def generate(arm: ArmSpec | str, seed: int, *, controls: bool = True) -> TaskBundle:
    """The task of `arm` at `seed`: the same bytes in every process, platform and Python version.

    `bundle.pins` is empty: the pin ledger sits above the generator, and
    `poisson_tasks.pins.pinned_bundle(arm, seed)` returns the bundle with its measurements filled
    in. task_id excludes pins, so both carry the same id.

    controls=False leaves `negative_controls` empty, for a caller that only runs the task (the
    runner never reads them): the task id is still the whole task's, and every other field is
    the same, but its canonical() bytes are not the task's, so never publish or hash that bundle.
    """
    spec = _spec(arm)
    check_seed(seed)
    builder = BUILDERS.get(spec.knob)
    if builder is None:
        raise ArmError(
            f"knob {spec.knob!r} has no generator in this build; generated knobs: {', '.join(BUILDERS)}"
        )
    sc = draw_scenario(spec.split, seed)
    return seal(spec, sc, builder(spec, sc), controls=controls)


def _rows(rows: tuple[Row, ...]) -> list[tuple[object, ...]]:
    return [tuple(row) for row in rows]  # plain tuples: JSON arrays without orjson's fallback


def _engine_plain(config: EngineConfig) -> dict[str, Any]:
    """The engine config's JSON form, built directly (its __dict__ also holds a binding lookup)."""
    return {
        "key": config.key,
        "rows": _rows(config.rows),
        "bindings": [binding.__dict__ for binding in config.bindings],
        "faults": [fault.__dict__ for fault in config.faults],
        "start_seq": config.start_seq,
    }


def _replayed_reference(
    spec: ArmSpec, sc: Scenario, config: EngineConfig, draft: Draft
) -> tuple[LedgerState, list[str]]:
    """The reference replayed through the engine: its final state and its answers; a fault unless
    every call succeeds and every goal record ends at its goal stage."""
    state = initial_state(config)
    observations: list[str] = []
    for call in draft.reference:
        state, line = apply(config, state, call.name, call.arguments)
        if not line_status(line).startswith(_OK_STATUSES):
            raise GeneratorFault(
                f"{arm_id(spec)} seed {sc.seed}: reference call {call.name} -> {line}"
            )
        observations.append(line)
    stages = {(r.ledger, r.record_id): r.stage for r in state.rows}
    for g in draft.goals:
        if stages.get((g.ledger, g.record_id)) != g.stage:
            raise GeneratorFault(f"{arm_id(spec)} seed {sc.seed}: reference misses goal {g}")
    return state, observations


def _prompt(draft: Draft) -> tuple[str | list[dict[str, object]], PromptParts, str]:
    """The user prompt (with its history, if any), its parts and the system prompt."""
    prompt_text, parts = render(draft.template, draft.slots, draft.knob_slots)
    prompt: str | list[dict[str, object]]
    if draft.history:
        prompt = [{"role": "user", "content": prompt_text}, *draft.history]
    else:
        prompt = prompt_text
    system = SYSTEM_PROMPT + (" " + draft.system_filler if draft.system_filler else "")
    return prompt, parts, system


def seal(spec: ArmSpec, sc: Scenario, draft: Draft, *, controls: bool = True) -> TaskBundle:
    """Turn a draft into a bundle: schemas, engine config, replayed reference, controls, task_id."""
    config = EngineConfig(
        key=sc.key,
        rows=tuple(sorted(draft.rows)),
        bindings=tuple(draft.bindings),
        faults=tuple(draft.faults),
        start_seq=sum(1 for m in draft.history if m.get("role") == "tool"),
    )
    state, observations = _replayed_reference(spec, sc, config, draft)
    prompt, parts, system = _prompt(draft)
    tools = block_schemas(tuple(draft.bindings))
    plans = control_plans(
        config, {b.name for b in draft.bindings}, draft.goals, draft.reference, draft.bystander
    )
    name = arm_id(spec)
    hashes = (engine_hash(), generator_hash(), vocabulary_hash())
    # The task id digests every field but task_id and pins, in their JSON form. It is built here
    # from plain values (a model's fields are its __dict__, a row a tuple), which orjson writes
    # without calling back into Python; canonical_model's fallback still covers anything else,
    # and a test holds task_id equal to the digest of the finished bundle's fields.
    hashed: dict[str, Any] = {
        "arm_id": name,
        "seed": sc.seed,
        "split": spec.split,
        "system_prompt": system,
        "prompt": prompt,
        "tools": tools,
        "goal": [goal.__dict__ for goal in draft.goals],
        "reference_calls": [call.__dict__ for call in draft.reference],
        "reference_observations": observations,
        "negative_controls": {outcome: plan.plain() for outcome, plan in plans.items()},
        "verifier": spec.strictness,
        "engine_hash": hashes[0],
        "generator_hash": hashes[1],
        "vocabulary_hash": hashes[2],
        "initial_state": _rows(config.rows),
        "expected_final_state": _rows(state.rows),
        "min_calls": spec.min_calls,
        "reference_turns": spec.reference_turns,
        "prompt_parts": parts.__dict__,
        "system_filler": draft.system_filler,
        "engine": _engine_plain(config),
    }
    task_id = hashlib.sha256(canonical_model(hashed)).hexdigest()
    # Built from values this module made and typed itself, so validation is skipped; a test
    # holds that every generated bundle survives a full model_validate round trip unchanged.
    return assembled(
        TaskBundle,
        {
            "task_id": task_id,
            "arm_id": name,
            "seed": sc.seed,
            "split": spec.split,
            "system_prompt": system,
            "prompt": prompt,
            "tools": tools,
            "goal": draft.goals,
            "reference_calls": draft.reference,
            "reference_observations": observations,
            "negative_controls": (
                {outcome: plan.episode() for outcome, plan in plans.items()} if controls else {}
            ),
            "verifier": spec.strictness,
            "pins": {},
            "engine_hash": hashes[0],
            "generator_hash": hashes[1],
            "vocabulary_hash": hashes[2],
            "initial_state": list(config.rows),
            "expected_final_state": list(state.rows),
            "min_calls": spec.min_calls,
            "reference_turns": spec.reference_turns,
            "prompt_parts": parts,
            "system_filler": draft.system_filler,
            "engine": config,
        },
    )
