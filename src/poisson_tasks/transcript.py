"""Transcript helpers shared by the generator and the pin ledger: the message pairs a request
carries for an earlier call, and the one token measure of seeded history."""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from poisson_tasks.bundle import ToolCall, canonical_json
from poisson_tasks.tokens import count_tokens

BAND = 2  # every "within two tokens" row of the pin ledger


def exchange(call_id: str, name: str, arguments: dict[str, str], line: str) -> list[dict[str, Any]]:
    """One earlier call and its answer, as the assistant/tool message pair a request carries."""
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(arguments, sort_keys=True)},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": line},
    ]


def call_transcript(calls: Sequence[ToolCall], lines: Sequence[str]) -> list[dict[str, Any]]:
    """Calls and the engine's answers as the message pairs an episode adds, numbered call_seed_1..
    and rendered as seeded history is: what a depth control's seeded history is matched against
    (pin N9), and how the generator sizes it."""
    out: list[dict[str, Any]] = []
    for index, (call, line) in enumerate(zip(calls, lines, strict=True)):
        arguments = {str(k): str(v) for k, v in (call.arguments or {}).items()}
        out += exchange(f"call_seed_{index + 1}", call.name, arguments, line)
    return out


def history_tokens(messages: list[dict[str, Any]]) -> int:
    """Tokens of seeded history: each message counted as the canonical JSON a request carries.

    The one measure of seeded-history length: the history knob's level (N23), the faults
    control's match (N26) and the depth controls' band (N9) all use it.
    """
    return sum(_message_tokens(canonical_json(m).decode()) for m in messages)


@lru_cache(maxsize=65536)
def _message_tokens(text: str) -> int:
    return count_tokens(text)
