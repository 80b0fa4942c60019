"""Where a model's calls first part from the reference solution, and what two paired tasks differ in.

Both are read off an episode and the task regenerated from its (arm, seed); neither is a card
figure (the card's figures come from the Artifact alone), they only point a reader at a step.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from poisson_tasks.bundle import TaskBundle

__all__ = ["first_divergence", "flat_calls", "task_changes"]

_WORDS = re.compile(r"\s*\S+\s*")


def flat_calls(turns: Sequence[Sequence[Mapping[str, Any]]]) -> list[Mapping[str, Any]]:
    """The transcript's scored calls (one list per model turn) as one list, in call order."""
    return [call for turn in turns for call in turn]


def first_divergence(
    calls: Sequence[Mapping[str, Any]], reference: Sequence[Mapping[str, Any]]
) -> dict[str, Any] | None:
    """The first step at which `calls` differ from the reference's (each a {name, arguments}
    mapping, as a transcript and a task view hold them), or None when they are the same.

    step counts calls from 0. kind: "different" (a call other than the reference's at that step:
    another tool, or other arguments, named in `fields`), "stopped" (the model made fewer calls
    than the reference, each one the reference's), "extra" (every reference call made, then more).
    """
    for step, (call, ref) in enumerate(zip(calls, reference, strict=False)):
        name, arguments = call.get("name"), call.get("arguments")
        ref_name, ref_arguments = ref.get("name"), ref.get("arguments")
        if name != ref_name or arguments != ref_arguments:
            fields = ["name"] if name != ref_name else []
            if isinstance(arguments, dict) and isinstance(ref_arguments, dict):
                keys = sorted(set(arguments) | set(ref_arguments))
                fields += [k for k in keys if arguments.get(k) != ref_arguments.get(k)]
            elif arguments != ref_arguments:
                fields.append("arguments")
            return {"step": step, "kind": "different", "fields": fields}
    if len(calls) < len(reference):
        return {"step": len(calls), "kind": "stopped", "fields": []}
    if len(calls) > len(reference):
        return {"step": len(reference), "kind": "extra", "fields": []}
    return None


def _words(lower: str, upper: str) -> tuple[list[list[str]], list[list[str]]]:
    """Each text as [op, text] pieces, op "=" kept, "-" only in lower, "+" only in upper."""
    old, new = _WORDS.findall(lower), _WORDS.findall(upper)
    left: list[list[str]] = []
    right: list[list[str]] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new).get_opcodes():
        if op == "equal":
            left.append(["=", "".join(old[i1:i2])])
            right.append(["=", "".join(new[j1:j2])])
            continue
        if i2 > i1:
            left.append(["-", "".join(old[i1:i2])])
        if j2 > j1:
            right.append(["+", "".join(new[j1:j2])])
    return left, right


def _user_text(bundle: TaskBundle) -> str:
    """The task's instruction: the prompt, or the first user message of a seeded history."""
    if isinstance(bundle.prompt, str):
        return bundle.prompt
    for message in bundle.prompt:
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            return str(message["content"])
    return ""


def _history(bundle: TaskBundle) -> int:
    return 0 if isinstance(bundle.prompt, str) else max(0, len(bundle.prompt) - 1)


def task_changes(lower: TaskBundle, upper: TaskBundle) -> dict[str, Any]:
    """What differs between two tasks of one seed: the instruction word by word, the tool block,
    the system prompt, the seeded history, the goal and the turn budget; `same` names the facts
    that are equal (what the pin ledger held)."""
    left, right = _words(_user_text(lower), _user_text(upper))
    low_tools, up_tools = lower.tool_names, upper.tool_names
    facts: list[tuple[str, Any, Any]] = [
        ("goal stage", [g.stage for g in lower.goal], [g.stage for g in upper.goal]),
        ("minimum calls", lower.min_calls, upper.min_calls),
        ("reference turns", lower.reference_turns, upper.reference_turns),
        ("tools in the block", len(low_tools), len(up_tools)),
        ("seeded history messages", _history(lower), _history(upper)),
        ("system prompt characters", len(lower.system_prompt), len(upper.system_prompt)),
        ("scenario (ledger, record)", _scenario(lower), _scenario(upper)),
    ]
    changed = [{"what": what, "lower": low, "upper": up} for what, low, up in facts if low != up]
    same = [what for what, low, up in facts if low == up]
    if low_tools == up_tools:
        same.append("tool block names and order")
    if lower.system_prompt == upper.system_prompt:
        same.append("system prompt text")
    return {
        "changed": changed,
        "same": same,
        "instruction": {"lower": left, "upper": right},
        "tools_only_lower": [n for n in low_tools if n not in set(up_tools)],
        "tools_only_upper": [n for n in up_tools if n not in set(low_tools)],
    }


def _scenario(bundle: TaskBundle) -> list[str]:
    return [f"{g.ledger} {g.record_id}" for g in bundle.goal]
