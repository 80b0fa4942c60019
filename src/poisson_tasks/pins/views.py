"""What the pin ledger reads off a bundle: instruction, seeded history, right tools, token counts.

Every reader takes a TaskBundle and nothing else, so a row measures the bundle a model would see.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

from poisson_tasks.bundle import TaskBundle, canonical_json
from poisson_tasks.domain.engine import line_status
from poisson_tasks.domain.ledger import ToolBinding
from poisson_tasks.tokens import count_tokens
from poisson_tasks.transcript import call_transcript, exchange, history_tokens

_WORD = re.compile(r"[a-z0-9]+")
MIN_WORD = 4  # shorter words ("is", "in", "a") sit inside tool names by chance, not by cue


def instruction(bundle: TaskBundle) -> str:
    """The user instruction: the prompt string, or the first user message of a seeded prompt."""
    if isinstance(bundle.prompt, str):
        return bundle.prompt
    for message in bundle.prompt:
        if message.get("role") == "user":
            return str(message.get("content") or "")
    return ""


def seeded_history(bundle: TaskBundle) -> list[dict[str, Any]]:
    """The messages seeded after the instruction (empty on a plain-string prompt)."""
    if isinstance(bundle.prompt, str):
        return []
    msgs = list(bundle.prompt)
    for index, message in enumerate(msgs):
        if message.get("role") == "user":
            return msgs[index + 1 :]
    return msgs


def seeded_calls(bundle: TaskBundle) -> list[tuple[str, str, dict[str, Any] | None, str | None]]:
    """(call id, tool name, parsed arguments, answer line) for every seeded call, in order."""
    history = seeded_history(bundle)
    answers = {m.get("tool_call_id"): m.get("content") for m in history if m.get("role") == "tool"}
    out: list[tuple[str, str, dict[str, Any] | None, str | None]] = []
    for message in history:
        for call in message.get("tool_calls") or []:
            fn = call.get("function") or {}
            try:
                args = json.loads(fn.get("arguments") or "")
            except ValueError:
                args = None
            cid = str(call.get("id"))
            parsed = args if isinstance(args, dict) else None
            out.append((cid, str(fn.get("name")), parsed, answers.get(cid)))
    return out


def bindings(bundle: TaskBundle) -> dict[str, ToolBinding]:
    """The engine's bindings by name, read from the tuple itself.

    Not EngineConfig.binding(): its cached lookup survives model_copy(update={"bindings": ...}),
    so a copied config would answer with the old bindings.
    """
    return {b.name: b for b in bundle.engine.bindings}


def right_tools(bundle: TaskBundle) -> list[str]:
    """The distinct stage tools the reference solution calls, in first-call order."""
    out: list[str] = []
    by_name = bindings(bundle)
    for call in bundle.reference_calls:
        binding = by_name.get(call.name)
        if binding is not None and binding.kind == "stage" and call.name not in out:
            out.append(call.name)
    return out


def required_tools(bundle: TaskBundle) -> list[str]:
    """Every distinct tool the reference solution calls (stage or read), in first-call order."""
    out: list[str] = []
    for call in bundle.reference_calls:
        if call.name not in out:
            out.append(call.name)
    return out


_HEAD, _SEP, _TAIL = '[{"', '"},{"', '"}]'
_OPEN, _CLOSE = '{"function":', ',"type":"function"}'


def tool_texts(bundle: TaskBundle) -> list[str]:
    """Each tool schema's canonical JSON, in block order (the block's JSON is them in `[...]`)."""
    return [canonical_json(tool).decode() for tool in bundle.tools]


def block_tokens(bundle: TaskBundle, texts: list[str] | None = None) -> int:
    """Tokens of the tool block as a request carries it: count_tokens(canonical JSON of the list).

    Counted tool by tool so each schema's count is reused across arms and seeds. It is exact:
    every schema's JSON is `{"function":...,"type":"function"}`, so the list is `[{"` + cores
    joined by `"},{"` + `"}]`, and the tokenizer's pre-split cuts the text at both ends of each
    joint (a run of punctuation between two words), so no token spans a joint. A block of any
    other shape is counted whole; a test holds both counts equal on every knob's bundles.
    `texts` may pass tool_texts(bundle) already made.
    """
    texts = tool_texts(bundle) if texts is None else texts
    if not texts:
        return tokens("[]")
    if not all(t.startswith(_OPEN) and t.endswith(_CLOSE) for t in texts):
        return tokens("[" + ",".join(texts) + "]")
    joints = tokens(_HEAD) + tokens(_TAIL) + (len(texts) - 1) * tokens(_SEP)
    return joints + sum(tokens(t[2:-2]) for t in texts)


@lru_cache(maxsize=8192)
def tokens(text: str) -> int:
    """count_tokens, remembered: the arms of a contrast repeat most of their text."""
    return count_tokens(text)


def transcript(bundle: TaskBundle) -> list[dict[str, Any]]:
    """The reference solution as the message pairs an episode adds, rendered like seeded history."""
    return call_transcript(bundle.reference_calls, bundle.reference_observations)


def failed_transcript(bundle: TaskBundle) -> list[dict[str, Any]]:
    """The reference calls answered `unavailable` and their answers, numbered call_seed_1.. in turn.

    This is the rendering a faults control's seeded history is matched against (N26).
    """
    out: list[dict[str, Any]] = []
    for call, line in zip(bundle.reference_calls, bundle.reference_observations, strict=True):
        if status(line) == "unavailable":
            number = len(out) // 2 + 1
            out += exchange(f"call_seed_{number}", call.name, _str_args(call.arguments), line)
    return out


def _str_args(arguments: dict[str, Any] | None) -> dict[str, str]:
    return {str(k): str(v) for k, v in (arguments or {}).items()}


def status(line: str) -> str:
    """The status word of an engine line (`SSSSSS status______ payload`)."""
    return line_status(line)


def words(text: str) -> list[str]:
    """Distinct lower-case words of `text` of MIN_WORD characters or more, in first-seen order."""
    out: list[str] = []
    for word in _WORD.findall(text.lower()):
        if len(word) >= MIN_WORD and word not in out:
            out.append(word)
    return out


def goal_ledger(bundle: TaskBundle) -> str:
    return bundle.goal[0].ledger if bundle.goal else ""


def goal_class(bundle: TaskBundle) -> str:
    """The task class: the goal ledger's name up to its first hyphen (similarity numbers it)."""
    return goal_ledger(bundle).split("-")[0]


def entry_code(bundle: TaskBundle) -> str:
    """The goal record's token before any call: its entry code."""
    if not bundle.goal:
        return ""
    goal = bundle.goal[0]
    for row in bundle.initial_state:
        if row[0] == goal.ledger and row[1] == goal.record_id:
            return str(row[3])
    return ""


def seeded_tokens(bundle: TaskBundle) -> int:
    return history_tokens(seeded_history(bundle))
