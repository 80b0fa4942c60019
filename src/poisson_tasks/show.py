"""A readable rendering of one TaskBundle: what the model sees, how it is judged, what produced it."""

from __future__ import annotations

import json

from poisson_tasks.bundle import TaskBundle, ToolCall
from poisson_tasks.verifier import verify


def _call(c: ToolCall) -> str:
    args = (
        json.dumps(c.arguments, sort_keys=True)
        if c.arguments is not None
        else repr(c.raw_arguments)
    )
    return f"{c.name}({args})"


def render_bundle(b: TaskBundle) -> str:
    """The whole task as text, in the order a reader checks it."""
    out: list[str] = []
    add = out.append
    add(f"task {b.task_id}")
    add(f"arm {b.arm_id}   seed {b.seed}   split {b.split}   verifier {b.verifier}")
    add(f"min calls {b.min_calls}   reference turns {b.reference_turns}")
    add("")
    add("== system prompt")
    add(b.system_prompt)
    add("")
    add("== prompt")
    if isinstance(b.prompt, str):
        add(b.prompt)
    else:
        for m in b.prompt:
            if m.get("tool_calls"):
                for tc in m["tool_calls"]:
                    fn = tc["function"]
                    add(f"[assistant] {fn['name']}({fn['arguments']})")
            else:
                add(f"[{m['role']}] {m.get('content')}")
    add("")
    add(f"== tools ({len(b.tools)}, in the order the model sees them)")
    for i, t in enumerate(b.tools, start=1):
        fn = t["function"]
        params = ", ".join(fn["parameters"]["required"])
        add(f"{i:3d}. {fn['name']}({params})")
        add(f"     {fn['description']}")
    add("")
    add("== goal")
    for g in b.goal:
        add(f"{g.ledger} {g.record_id} at stage {g.stage}")
    add("")
    add("== reference solution (call -> the engine's 52-byte answer)")
    for c, o in zip(b.reference_calls, b.reference_observations, strict=True):
        add(f"{_call(c)}")
        add(f"    -> {o}")
    add("")
    add("== negative controls (keyed outcome -> what verify gives)")
    for key, ep in b.negative_controls.items():
        v = verify(b, ep.turns, ep.ended_with_reply, ep.turn_limit_hit)
        calls = [c for t in ep.turns for c in t]
        end = "turn limit" if ep.turn_limit_hit else "reply"
        add(f"{key}: {len(calls)} calls, ends on {end} -> {v.outcome}")
    add("")
    add("== ledger (ledger, record_id, stage, token)")
    add("initial:  " + "; ".join(" ".join(map(str, r)) for r in b.initial_state))
    add("expected: " + "; ".join(" ".join(map(str, r)) for r in b.expected_final_state))
    add("")
    add("== hashes")
    add(f"engine_hash     {b.engine_hash}")
    add(f"generator_hash  {b.generator_hash}")
    add(f"vocabulary_hash {b.vocabulary_hash}")
    return "\n".join(out)
