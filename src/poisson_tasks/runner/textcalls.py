"""Spotting a tool call that arrived as plain text (format clause 1).

A serving stack whose tool parser misses a call hands it back as the message's text with
finish_reason "stop" (vLLM #17790, #21840). Such a reply is not a reply: the runner keeps the text
raw and counts it in FormatReport.unparsed_calls, so the verifier scores it malformed_call and the
format alarm can ring. Detection only classifies; a text call is never executed.

No maintained parser library on PyPI covers these formats without pulling in a serving stack (vLLM's
tool parsers need its tokenizers), so this is a table of patterns, one row per dialect, each written
from the format's published description (the chat templates and tool parsers of the stacks that
emit them). Reasoning is removed first: a `<think>...</think>` block (or text before a lone
`</think>`) may hold call-shaped JSON the model only thought about; `reasoning_content` never
reaches this module.
"""

from __future__ import annotations

import json
import re
from typing import Any

# Reasoning a model wrote into its content: whole blocks, then anything before a lone close tag
# (templates that open the block in the prompt leave only "</think>" in the reply).
_THINK_BLOCK = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.IGNORECASE | re.DOTALL)
_THINK_TAIL = re.compile(r"^.*?</(think|thinking|reasoning)>", re.IGNORECASE | re.DOTALL)
_IDENT = r"[A-Za-z_][\w.\-]*"

# (dialect, pattern): the first row that matches names the dialect.
DIALECTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    # Hermes / Qwen 2.5 / Qwen 3: <tool_call>{"name": ..., "arguments": {...}}</tool_call>
    ("hermes", re.compile(r"<\s*/?\s*(tool_call|function_call|tool_use|tool_calls)\b", re.I)),
    # Granite: <|tool_call|>[...]
    ("granite", re.compile(r"<\|tool_call\|>")),
    # Llama 3.1 custom and functionary v3.1 / Qwen3-Coder XML: <function=name>...</function>
    ("function_tag", re.compile(rf"<function={_IDENT}>", re.I)),
    # Llama 3.x built-in and JSON tool calls: <|python_tag|>{...} or <|python_tag|>tool.call(...)
    ("llama3_python_tag", re.compile(r"<\|python_tag\|>")),
    # Mistral: v3 (pre-v11) "[TOOL_CALLS] [{...}]", v11 "[TOOL_CALLS]name[ARGS]{...}",
    # v13 "[TOOL_CALLS]name[CALL_ID]id[ARGS]{...}"
    ("mistral", re.compile(r"\[TOOL_CALLS\]|\[ARGS\]\s*\{")),
    # gpt-oss harmony leaking through: "<|channel|>commentary to=functions.name <|constrain|>json
    # <|message|>{...}<|call|>", or the same without the special tokens rendered
    ("harmony", re.compile(r"to=functions\.[\w\-]+|<\|call\|>|<\|channel\|>\s*commentary")),
    # DeepSeek V3 / R1: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>name
    ("deepseek", re.compile(r"<｜tool▁calls?▁begin｜>|<｜tool▁sep｜>")),
    # functionary v3 (meetkai): ">>>name\n{...}" at the start of a line ("all" is its plain reply)
    ("functionary", re.compile(rf"(?m)^\s*>>>\s*(?!all\b){_IDENT}\s*\n?\s*\{{")),
    # InternLM: <|action_start|><|plugin|>{...}<|action_end|>
    ("internlm", re.compile(r"<\|action_start\|>")),
    # Phi-4-mini: functools[{...}]
    ("phi4", re.compile(r"functools\s*\[\s*\{")),
)
# Pythonic lists (Llama 3.2 / 4, ToolACE): [name(a="x", b=1), other()] as the whole reply.
_PYTHONIC = re.compile(
    rf"^\s*\[\s*{_IDENT}\s*\((\s*|\s*\w+\s*=.*)\)\s*(,\s*{_IDENT}\s*\((\s*|\s*\w+\s*=.*)\)\s*)*\]\s*$",
    re.DOTALL,
)
_FENCE = re.compile(r"```(?:json|tool_call|tool_code|python)?\s*\n(.*?)```", re.DOTALL)
_MAX_OBJECTS = 8
_DECODER = json.JSONDecoder()


def strip_reasoning(text: str) -> str:
    """The reply text less any reasoning the model wrote into it."""
    text = _THINK_BLOCK.sub("", text)
    return _THINK_TAIL.sub("", text, count=1)


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


def _json_call(text: str) -> bool:
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


def text_call_dialect(text: str | None) -> str | None:
    """The dialect of a tool call written as text in a reply, or None when the text holds none."""
    if not text:
        return None
    body = strip_reasoning(text)
    for name, pattern in DIALECTS:
        if pattern.search(body):
            return name
    if _PYTHONIC.match(body):
        return "pythonic"
    for fenced in _FENCE.findall(body):
        if _PYTHONIC.match(fenced):
            return "pythonic"
        if _json_call(fenced):
            return "fenced_json"
    if _json_call(body):
        return "json"
    return None


def looks_like_tool_call(text: str | None) -> bool:
    """True when reply text holds a tool call in any known dialect (reasoning excluded)."""
    return text_call_dialect(text) is not None
