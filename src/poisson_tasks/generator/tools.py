"""Tool bindings and their JSON schemas: stage tools climb a ledger's ladder, read tools answer catalogue questions."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import orjson

from poisson_tasks.bundle import canonical_json
from poisson_tasks.domain.ledger import ToolBinding
from poisson_tasks.domain.vocabulary import LADDER
from poisson_tasks.tokens import count_tokens


def stage_tool_name(cls: str, stage: int, ledger_number: int | None = None) -> str:
    base = f"{LADDER[stage - 1]}_{cls}"
    return base if ledger_number is None else f"{base}_{ledger_number}"


@lru_cache(maxsize=8192)
def stage_tool(
    cls: str,
    stage: int,
    *,
    ledger: str | None = None,
    ledger_number: int | None = None,
    fixed: tuple[tuple[str, str], ...] = (),
) -> ToolBinding:
    """The tool that moves a record of `ledger` from stage-1 to `stage`."""
    extra = tuple(f for f, _ in fixed)
    return ToolBinding(
        name=stage_tool_name(cls, stage, ledger_number),
        kind="stage",
        ledger=ledger or cls,
        stage=stage,
        parameters=("record_id", "token", *extra),
        fixed=fixed,
    )


@lru_cache(maxsize=8192)
def read_tool(name: str, *, part: str | None = None, part_status: str = "ok") -> ToolBinding:
    return ToolBinding(
        name=name, kind="read", parameters=("query",), part=part, part_status=part_status
    )


def _stage_description(b: ToolBinding, ledger_label: str) -> str:
    name = LADDER[b.stage - 1]
    token = (
        "the record's entry code"
        if b.stage == 1
        else f"the token the stage-{b.stage - 1} call returned"
    )
    return (
        f"Advance a record of the {ledger_label} ledger from stage {b.stage - 1} to stage "
        f"{b.stage} ({name}). token: {token}. Returns the next token in the payload."
    )


def _read_description(name: str) -> str:
    verb, noun = name.split("_", 1)
    return f"Read-only {verb} of the {noun} catalogue for a query; changes no record."


_FIELD_TEXT = "a value the request states for every stage call"


def schema(b: ToolBinding) -> dict[str, Any]:
    """The OpenAI function-tool schema the model sees for one binding (a fresh copy each call)."""
    parsed: dict[str, Any] = orjson.loads(_schema_json(b))
    return parsed


def block_schemas(bindings: tuple[ToolBinding, ...]) -> list[dict[str, Any]]:
    """The schemas of a whole block, in order, as fresh objects (one JSON parse for the block)."""
    parsed: list[dict[str, Any]] = orjson.loads(
        b"[" + b",".join(_schema_json(b) for b in bindings) + b"]"
    )
    return parsed


@lru_cache(maxsize=8192)
def _schema_json(b: ToolBinding) -> bytes:
    return orjson.dumps(_schema(b))


def _schema(b: ToolBinding) -> dict[str, Any]:
    if b.kind == "stage":
        props: dict[str, Any] = {
            "record_id": {"type": "string", "description": "The record to advance."},
            "token": {"type": "string", "description": "Entry code or previous chain token."},
        }
        for f, _ in b.fixed:
            props[f] = {"type": "string", "description": _FIELD_TEXT}
        desc = _stage_description(b, b.ledger.replace("-", " "))
    else:
        props = {"query": {"type": "string", "description": "What to look up."}}
        desc = _read_description(b.name)
    return {
        "type": "function",
        "function": {
            "name": b.name,
            "description": desc,
            "parameters": {
                "type": "object",
                "properties": props,
                "required": list(b.parameters),
                "additionalProperties": False,
            },
        },
    }


def block_tokens(block: list[ToolBinding]) -> int:
    """Tokens of a tool block as the model receives it (canonical JSON of the schemas, in order)."""
    return _block_tokens(tuple(block))


@lru_cache(maxsize=4096)
def _block_tokens(block: tuple[ToolBinding, ...]) -> int:
    return count_tokens(canonical_json([schema(b) for b in block]).decode())
