"""How a reference policy reads a request, as an agent would: the task from the user's words, the
tools from their descriptions, and what happened from the tool answers in the conversation.

Nothing here sees a generator or a bundle; a policy knows only what the request shows it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import orjson

_STAGE_DESC = re.compile(
    r"of the (?P<ledger>[\w -]+?) ledger from stage (?P<start>\d+) to stage (?P<stage>\d+)"
)
_READ_DESC = re.compile(r"\bread-only\b|\bchanges no record\b", re.IGNORECASE)
_RID = r"[a-z0-9]+(?:-[a-z0-9]+)+"
_FROM_TO = r"from stage (?P<start>\d+) to stage (?P<stage>\d+)"
# "Move <ledger> record <id> from stage a to stage b"; "Move record <id> in <ledger> from stage ..."
_GOALS = (
    re.compile(rf"\bMove (?:the )?(?P<ledger>[\w -]+?) record (?P<rid>{_RID}) {_FROM_TO}"),
    re.compile(rf"\bMove record (?P<rid>{_RID}) in (?:the )?(?P<ledger>[\w -]+?) {_FROM_TO}"),
)
_MENTION = re.compile(rf"\b[Rr]ecords? (?P<rid>{_RID})")
_CODE = re.compile(r"(?<![0-9A-Za-z])[0-9a-f]{12}(?![0-9A-Za-z])")
_HEX_TOTAL = re.compile(r"\b(\d+) hex(?:adecimal)? digits\b")
_PART = re.compile(r"^part_(\d+)_of_(\d+)$")
CORE_PARAMS = ("record_id", "token")


def ledger_words(text: str) -> tuple[str, ...]:
    """A ledger's name as words, less the word 'ledger': 'refund ledger 4821' -> (refund, 4821)."""
    return tuple(w for w in re.split(r"[\s-]+", text.lower()) if w and w != "ledger")


@dataclass(frozen=True, slots=True)
class ToolSig:
    """One tool of the block as its schema and description present it."""

    name: str
    kind: str  # "stage", "read" or "other"
    params: tuple[str, ...]  # the required parameters, in schema order
    ledger: tuple[str, ...] = ()
    stage: int = 0


class ToolBlock:
    """The tool block in the order the model sees it, indexed by name and by (ledger, stage)."""

    __slots__ = ("_by_name", "_by_stage", "tools")

    def __init__(self, tools: tuple[ToolSig, ...]) -> None:
        self.tools = tools
        self._by_name = {t.name: t for t in tools}
        self._by_stage: dict[tuple[tuple[str, ...], int], ToolSig] = {}
        for tool in tools:
            if tool.kind == "stage":
                self._by_stage.setdefault((tool.ledger, tool.stage), tool)

    def by_name(self, name: str) -> ToolSig | None:
        return self._by_name.get(name)

    def stage_tool(self, ledger: tuple[str, ...], stage: int) -> ToolSig | None:
        return self._by_stage.get((ledger, stage))


def _sig(tool: Mapping[str, Any]) -> ToolSig | None:
    fn = tool.get("function") if isinstance(tool, Mapping) else None
    if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
        return None
    params_schema = fn.get("parameters") or {}
    required = params_schema.get("required") if isinstance(params_schema, Mapping) else None
    params = tuple(p for p in (required or ()) if isinstance(p, str))
    desc = str(fn.get("description") or "")
    stage_match = _STAGE_DESC.search(desc)
    if stage_match is not None:
        return ToolSig(
            fn["name"],
            "stage",
            params,
            ledger_words(stage_match["ledger"]),
            int(stage_match["stage"]),
        )
    kind = "read" if _READ_DESC.search(desc) else "other"
    return ToolSig(fn["name"], kind, params)


@lru_cache(maxsize=256)
def read_block(tools_json: str) -> ToolBlock:
    """The block from the request's `tools` (as JSON text, which is also the cache key)."""
    tools = orjson.loads(tools_json) if tools_json else []
    sigs = (_sig(t) for t in tools if isinstance(t, Mapping)) if isinstance(tools, list) else ()
    return ToolBlock(tuple(s for s in sigs if s is not None))


@dataclass(frozen=True, slots=True)
class GoalLine:
    """One 'Move <ledger> record <id> from stage a to stage b' the request asks for."""

    ledger: tuple[str, ...]
    record_id: str
    start: int
    stage: int


@dataclass(frozen=True, slots=True)
class TaskReading:
    """What the request asks: goals, the entry codes it states, the values stage calls must carry,
    and, when a code is not stated, the read tools it names for finding it."""

    goals: tuple[GoalLine, ...]
    codes: tuple[tuple[str, str], ...]  # (record id, entry code) as stated
    values: tuple[tuple[str, str], ...]  # (field, value) every stage call must carry
    code_reads: tuple[str, ...]  # read tools named for a code the request does not state
    code_hex: int  # the length of an entry code, in hex digits
    digest: str  # a digest of the request's task text, for keying seeded draws

    def code_of(self, record_id: str) -> str | None:
        return dict(self.codes).get(record_id)


def _mentions(text: str, ids: Sequence[str]) -> list[tuple[int, str]]:
    if not ids:
        return []
    alt = "|".join(re.escape(i) for i in sorted(ids, key=len, reverse=True))
    return [(m.start(), m.group()) for m in re.finditer(rf"(?<![\w-])(?:{alt})(?![\w-])", text)]


def _codes(text: str, ids: Sequence[str]) -> list[tuple[str, str]]:
    """Each stated code goes with the record named closest before it ('record X ... code C')."""
    mentions = _mentions(text, ids)
    out: dict[str, str] = {}
    for code_match in _CODE.finditer(text):
        before = [rid for pos, rid in mentions if pos < code_match.start()]
        if before and before[-1] not in out:
            out[before[-1]] = code_match.group()
    return sorted(out.items())


def _value_of(text: str, field: str) -> str | None:
    sep = r"\s*(?:=|:|\bis\b|\bof\b)?\s*[\"'`]?"
    pat = rf"(?<![\w]){re.escape(field)}(?![\w]){sep}([A-Za-z0-9][\w.-]*)"
    found = re.search(pat, text)
    return found.group(1).rstrip(".-") if found else None


def _mentioned_ids(text: str) -> list[str]:
    return [m["rid"] for m in _MENTION.finditer(text)]


def _named_reads(text: str, block: ToolBlock) -> tuple[str, ...]:
    found = []
    for tool in block.tools:
        if tool.kind == "read":
            mention = re.search(rf"(?<![\w]){re.escape(tool.name)}(?![\w])", text)
            if mention is not None:
                found.append((mention.start(), tool.name))
    return tuple(name for _, name in sorted(found))


@lru_cache(maxsize=256)
def read_task(text: str, tools_json: str) -> TaskReading:
    """Read the task the user's words state, against the tool block offered (its JSON text)."""
    block = read_block(tools_json)
    found = sorted(
        (goal_match for pat in _GOALS for goal_match in pat.finditer(text)),
        key=lambda goal_match: goal_match.start(),
    )
    goals = tuple(
        GoalLine(ledger_words(m["ledger"]), m["rid"], int(m["start"]), int(m["stage"]))
        for m in found
    )
    ids = list(dict.fromkeys([g.record_id for g in goals] + _mentioned_ids(text)))
    codes = _codes(text, ids)
    goal_ledgers = {g.ledger for g in goals}
    fields: list[str] = []
    for tool in block.tools:
        if tool.kind == "stage" and tool.ledger in goal_ledgers:
            fields += [p for p in tool.params if p not in CORE_PARAMS and p not in fields]
    values = tuple((f, value) for f in fields if (value := _value_of(text, f)) is not None)
    stated = dict(codes)
    hidden = any(g.record_id not in stated for g in goals)
    hex_total = _HEX_TOTAL.search(text)
    return TaskReading(
        goals=goals,
        codes=tuple(codes),
        values=values,
        code_reads=_named_reads(text, block) if hidden else (),
        code_hex=int(hex_total.group(1)) if hex_total else 12,
        digest=hashlib.sha256(text.encode()).hexdigest()[:16],
    )


def content_text(content: object) -> str:
    """A message's text, whether its content is a string or a list of text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(p.get("text", ""))
            for p in content
            if isinstance(p, dict) and p.get("type") == "text"
        )
    return ""


def task_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """The user's words: every user message's text, in order."""
    return "\n".join(content_text(m.get("content")) for m in messages if m.get("role") == "user")


@dataclass(frozen=True, slots=True)
class Answer:
    """One tool call in the conversation and the line it was answered with."""

    name: str
    arguments: Mapping[str, object] | None
    status: str
    payload: str

    @property
    def part(self) -> tuple[int, int] | None:
        """(i, n) when the status is part_i_of_n."""
        part_match = _PART.match(self.status)
        return (int(part_match.group(1)), int(part_match.group(2))) if part_match else None


def _arguments(raw: object) -> Mapping[str, object] | None:
    if isinstance(raw, dict):
        return raw
    if not isinstance(raw, str):
        return None
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


@dataclass(frozen=True, slots=True)
class Conversation:
    """The answered calls so far, and how many assistant turns the conversation holds."""

    answers: tuple[Answer, ...]
    turns: int


def read_conversation(messages: Sequence[Mapping[str, Any]]) -> Conversation:
    """Pair every assistant tool call with its tool answer; calls with no answer are left out."""
    results: dict[str, str] = {}
    for message in messages:
        if message.get("role") == "tool":
            call_id = message.get("tool_call_id")
            if isinstance(call_id, str):
                content = message.get("content")
                results[call_id] = content if isinstance(content, str) else content_text(content)
    answers: list[Answer] = []
    turns = 0
    for message in messages:
        if message.get("role") != "assistant":
            continue
        turns += 1
        for tc in message.get("tool_calls") or ():
            if not isinstance(tc, dict):
                continue
            fn, line = tc.get("function"), results.get(str(tc.get("id")))
            if not isinstance(fn, dict) or line is None:
                continue
            words = line.split()
            answers.append(
                Answer(
                    name=str(fn.get("name", "")),
                    arguments=_arguments(fn.get("arguments")),
                    status=words[1] if len(words) > 1 else "",
                    payload=words[2] if len(words) > 2 else "",
                )
            )
    return Conversation(tuple(answers), turns)
