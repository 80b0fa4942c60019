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

import ast
import json
import re
from typing import Any

from poisson_tasks.boundedjson import depth_exceeds

# Reasoning a model wrote into its content: <think>...</think> blocks, and anything before a lone
# close tag (templates that open the block in the prompt leave only "</think>" in the reply).
_THINK_TAG = re.compile(r"<(/?)(?:think|thinking|reasoning)>", re.IGNORECASE)
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
_FENCE_LANG = re.compile(r"^[\w\-]*[ \t]*\n")
_MAX_OBJECTS = 8
_DECODER = json.JSONDecoder()


_PYTHONIC_MAX = 20_000  # characters: longer text is not parsed as a pythonic list


def _pythonic(text: str) -> bool:
    """A pythonic call list (Llama 3.2 / 4, ToolACE) as the whole text: [name(a="x", b=1), f()].

    Parsed with the ast module (never evaluated): a list whose every element is a call of a name
    or dotted name with keyword arguments only.
    """
    body = text.strip()
    if not (body.startswith("[") and body.endswith("]")) or len(body) > _PYTHONIC_MAX:
        return False
    try:
        tree = ast.parse(body, mode="eval").body
    except (SyntaxError, ValueError, RecursionError):
        return False
    if not isinstance(tree, ast.List) or not tree.elts:
        return False
    return all(
        isinstance(e, ast.Call)
        and isinstance(e.func, (ast.Name, ast.Attribute))
        and not e.args
        and all(k.arg is not None for k in e.keywords)
        for e in tree.elts
    )


def strip_reasoning(text: str) -> str:
    """The reply text less any reasoning the model wrote into it (one pass over the tags): text
    inside a block is dropped, text before a close tag with no open one is dropped, and a block
    never closed runs to the end."""
    kept: list[str] = []
    depth = 0
    pos = 0
    for match in _THINK_TAG.finditer(text):
        closing = match.group(1) == "/"
        if depth == 0:
            if closing:  # a lone close tag: what came before it was reasoning
                kept.clear()
            else:
                kept.append(text[pos : match.start()])
                depth = 1
        elif closing:
            depth -= 1
        else:
            depth += 1
        pos = match.end()
    if depth == 0:
        kept.append(text[pos:])
    return "".join(kept)


def _fenced(text: str) -> list[str]:
    """The contents of ``` code fences (a leading language tag dropped); one split, no regex scan."""
    parts = text.split("```")
    return [_FENCE_LANG.sub("", part, count=1) for part in parts[1:-1:2]]


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
        index = min(
            (j for j in (text.find("{", start), text.find("[", start)) if j >= 0), default=-1
        )
        if index < 0:
            return False
        try:
            obj, end = _DECODER.raw_decode(text, index)
        except (ValueError, RecursionError):  # not JSON here, or nested past Python's recursion
            start = index + 1
            continue
        if not depth_exceeds(obj) and _is_call(obj):  # nested deeper than a call: none
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
    if _pythonic(body):
        return "pythonic"
    for fenced in _fenced(body):
        if _pythonic(fenced):
            return "pythonic"
        if _json_call(fenced):
            return "fenced_json"
    if _json_call(body):
        return "json"
    return None


def looks_like_tool_call(text: str | None) -> bool:
    """True when reply text holds a tool call in any known dialect (reasoning excluded)."""
    return text_call_dialect(text) is not None
