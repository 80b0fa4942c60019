"""A readable rendering of one TaskBundle: what the model sees, how it is judged, what produced it."""

from __future__ import annotations

import json

from poisson_tasks.bundle import TaskBundle, ToolCall
from poisson_tasks.pins.rows import ROWS
from poisson_tasks.verifier import verify


def _call(call: ToolCall) -> str:
    args = (
        json.dumps(call.arguments, sort_keys=True)
        if call.arguments is not None
        else repr(call.raw_arguments)
    )
    return f"{call.name}({args})"


def render_bundle(bundle: TaskBundle) -> str:
    """The whole task as text, in the order a reader checks it."""
    out: list[str] = []
    add = out.append
    add(f"task {bundle.task_id}")
    add(
        f"arm {bundle.arm_id}   seed {bundle.seed}   split {bundle.split}   verifier {bundle.verifier}"
    )
    add(f"min calls {bundle.min_calls}   reference turns {bundle.reference_turns}")
    add("")
    add("== system prompt")
    add(bundle.system_prompt)
    add("")
    add("== prompt")
    if isinstance(bundle.prompt, str):
        add(bundle.prompt)
    else:
        for message in bundle.prompt:
            if message.get("tool_calls"):
                for tc in message["tool_calls"]:
                    fn = tc["function"]
                    add(f"[assistant] {fn['name']}({fn['arguments']})")
            else:
                add(f"[{message['role']}] {message.get('content')}")
    add("")
    add(f"== tools ({len(bundle.tools)}, in the order the model sees them)")
    for number, tool in enumerate(bundle.tools, start=1):
        fn = tool["function"]
        params = ", ".join(fn["parameters"]["required"])
        add(f"{number:3d}. {fn['name']}({params})")
        add(f"     {fn['description']}")
    add("")
    add("== goal")
    for goal in bundle.goal:
        add(f"{goal.ledger} {goal.record_id} at stage {goal.stage}")
    add("")
    add("== reference solution (call -> the engine's 52-byte answer)")
    for call, observation in zip(
        bundle.reference_calls, bundle.reference_observations, strict=True
    ):
        add(f"{_call(call)}")
        add(f"    -> {observation}")
    add("")
    add("== negative controls (keyed outcome -> what verify gives)")
    for key, ep in bundle.negative_controls.items():
        verdict = verify(bundle, ep.turns, ep.ended_with_reply, ep.turn_limit_hit)
        calls = [c for t in ep.turns for c in t]
        end = "turn limit" if ep.turn_limit_hit else "reply"
        add(f"{key}: {len(calls)} calls, ends on {end} -> {verdict.outcome}")
    add("")
    add("== ledger (ledger, record_id, stage, token)")
    add("initial:  " + "; ".join(" ".join(map(str, r)) for r in bundle.initial_state))
    add("expected: " + "; ".join(" ".join(map(str, r)) for r in bundle.expected_final_state))
    add("")
    add("== hashes")
    add(f"engine_hash     {bundle.engine_hash}")
    add(f"generator_hash  {bundle.generator_hash}")
    add(f"vocabulary_hash {bundle.vocabulary_hash}")
    add("")
    out += _pins(bundle)
    return "\n".join(out)


def _pins(bundle: TaskBundle) -> list[str]:
    """The pin ledger's measurements of this bundle: each row's figure and what the row holds."""
    if not bundle.pins:
        return [
            "== pins",
            "not measured on this bundle: pins.pinned_bundle(arm, seed) measures them",
        ]
    out = ["== pins (each row's figure on this bundle; `generate --arms` holds them across arms)"]
    for row in ROWS:
        if row.id in bundle.pins and row.figure is not None:
            figure = str(row.figure(bundle.pins[row.id]))
        else:
            figure = "unmeasured"
        out.append(f"{row.id:<4} {figure:<24} {row.holds}")
    return out
