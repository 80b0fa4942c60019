"""Spotting a tool call that arrived as plain text (format clause 1).

A serving stack whose tool parser misses a call hands it back as the message's text with
finish_reason "stop" (vLLM #17790, #21840). Such a reply is not a reply: the runner keeps the text
raw and counts it in FormatReport.unparsed_calls, so the verifier scores it malformed_call.
"""

from __future__ import annotations

import json
import re
from typing import Any

_TAG = re.compile(r"<\s*/?\s*(tool_call|function_call|tool_use)\b", re.IGNORECASE)
_FUNCTION_TAG = re.compile(r"<function=[\w.\-]+>", re.IGNORECASE)
_MAX_OBJECTS = 8
_DECODER = json.JSONDecoder()


def _is_call(obj: Any) -> bool:
    """JSON shaped like a tool call: {name, arguments|parameters}, a function wrapper, a list."""
    if isinstance(obj, list):
        return bool(obj) and all(_is_call(x) for x in obj)
    if not isinstance(obj, dict):
        return False
    if isinstance(obj.get("tool_calls"), list):
        return True
    fn = obj.get("function")
    if isinstance(fn, dict) and isinstance(fn.get("name"), str):
        return True
    return isinstance(obj.get("name"), str) and ("arguments" in obj or "parameters" in obj)


def looks_like_tool_call(text: str | None) -> bool:
    """True when reply text holds a tool call: a <tool_call> tag, or JSON naming a tool."""
    if not text:
        return False
    if _TAG.search(text) or _FUNCTION_TAG.search(text):
        return True
    start = 0
    for _ in range(_MAX_OBJECTS):
        i = min((j for j in (text.find("{", start), text.find("[", start)) if j >= 0), default=-1)
        if i < 0:
            return False
        try:
            obj, end = _DECODER.raw_decode(text, i)
        except ValueError:
            start = i + 1
            continue
        if _is_call(obj):
            return True
        start = end
    return False
