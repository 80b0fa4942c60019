"""Cards on your own tools: a file of the user's OpenAI function schemas in place of the read tools.

A pre-registration may name a tool file (`design.own_tools`). Its tools take the place of the
decorative read tools in every task's block: the task, its verifier and the engine are unchanged,
and a call to a user tool is answered by the engine as a read (it mutates nothing). Reads a task
needs stay: the reads a spread task's entry code is split across, and reads its seeded history
calls or its prompt names.

The file is validated before anything runs, one line per problem: at most MAX_BYTES bytes and
MAX_TOOLS tools; each tool an OpenAI function tool (`{"type": "function", "function": {...}}`, or
the bare function object); names unique and legal (`^[A-Za-z0-9_-]{1,64}$`); no name equal to a
stage tool the generator can make (`<ladder word>_<class>[_<n>]`) or to one of its read names (a
task may keep those); `parameters` a JSON-schema object in the subset documented in
docs/own-tools.md.

Scoring a call to a user tool. The model's arguments are checked against the user's own schema
(required properties, the declared types, enums, nested objects and arrays, additionalProperties),
so an optional parameter left out and a non-string value of the declared type are a valid call.
The engine then sees the call as a read with one argument, the arguments' canonical JSON:
- valid: answered `ok` with a read payload, like any read;
- a required property missing: the engine sees no argument (malformed, clause 3: a required
  argument is missing), as a stage call missing one would be;
- a property the schema does not allow (additionalProperties false): the engine sees an extra
  argument (malformed, clause 4), as for a stage call;
- a value of the wrong type or outside its enum: answered `bad_args` and not malformed, as a
  non-string value in a stage call is;
- arguments that are not JSON: malformed, clause 1, unchanged.
The episode's transcript keeps the model's own wire calls; its `tool_calls` hold what was scored.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict

from poisson_tasks.bundle import TaskBundle, ToolCall, canonical_json, digest
from poisson_tasks.domain.ledger import ToolBinding
from poisson_tasks.domain.vocabulary import CLASSES, LADDER, READ_NOUNS, READ_VERBS
from poisson_tasks.errors import NotARegularFile, TooLarge, ToolFileError
from poisson_tasks.files import read_limited

MAX_BYTES = 1_000_000
MAX_TOOLS = 128
MAX_DEPTH = 8
QUERY = "query"  # the one argument the engine's read binding takes
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_STAGE = re.compile(rf"^(?:{'|'.join(LADDER)})_(?:{'|'.join(CLASSES)})(?:_[0-9]+)?$")
JSON_TYPES: frozenset[str] = frozenset(
    {"string", "number", "integer", "boolean", "array", "object", "null"}
)
_KEYWORDS: frozenset[str] = frozenset(
    {
        "type",
        "description",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "default",
        "title",
        "examples",
        "format",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "pattern",
        "minItems",
        "maxItems",
        "nullable",
        "const",
    }
)


@cache
def generator_read_names() -> frozenset[str]:
    return frozenset(f"{v}_{n}" for v in READ_VERBS for n in READ_NOUNS)


class UserTool(BaseModel):
    """One tool of the user's file: its name, description and parameters schema, as given."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    description: str
    parameters: dict[str, Any]

    def tool_schema(self) -> dict[str, Any]:
        """The OpenAI function-tool object the model sees."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


class ToolSet(BaseModel):
    """A validated tool file: where it came from, its bytes' SHA-256, and its tools in order."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source: str
    sha256: str
    tools: tuple[UserTool, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tools)

    def tool(self, name: str) -> UserTool | None:
        return next((t for t in self.tools if t.name == name), None)


# --------------------------------------------------------------------------- validation


def _schema_problems(where: str, schema: object, depth: int) -> list[str]:
    """The problems of one schema node in the supported JSON-schema subset."""
    if not isinstance(schema, dict):
        return [f"{where}: must be a JSON-schema object (a mapping), got {type(schema).__name__}"]
    if depth > MAX_DEPTH:
        return [f"{where}: nested deeper than {MAX_DEPTH} levels"]
    problems: list[str] = []
    unknown = sorted(k for k in schema if k not in _KEYWORDS)
    if unknown:
        problems.append(
            f"{where}: unsupported keyword(s) {', '.join(unknown)}; supported: "
            + ", ".join(sorted(_KEYWORDS))
        )
    type_field = schema.get("type")
    types = (
        type_field
        if isinstance(type_field, list)
        else [type_field]
        if type_field is not None
        else []
    )
    if type_field is not None and (
        not types or not all(isinstance(x, str) and x in JSON_TYPES for x in types)
    ):
        problems.append(
            f"{where}.type: {type_field!r} is not a JSON-schema type "
            f"({', '.join(sorted(JSON_TYPES))})"
        )
    if "enum" in schema and (not isinstance(schema["enum"], list) or not schema["enum"]):
        problems.append(f"{where}.enum: must be a non-empty list of values")
    if "properties" in schema:
        props = schema["properties"]
        if not isinstance(props, dict):
            problems.append(f"{where}.properties: must be a mapping of property name to schema")
        else:
            for key, sub in props.items():
                problems += _schema_problems(f"{where}.properties.{key}", sub, depth + 1)
    if "required" in schema:
        req = schema["required"]
        declared = schema.get("properties")
        names: dict[str, Any] = declared if isinstance(declared, dict) else {}
        if not isinstance(req, list) or not all(isinstance(r, str) for r in req):
            problems.append(f"{where}.required: must be a list of property names")
        else:
            missing = [r for r in req if r not in names]
            if missing:
                problems.append(f"{where}.required: {', '.join(missing)} not in properties")
    if "additionalProperties" in schema and not isinstance(
        schema["additionalProperties"], (bool, dict)
    ):
        problems.append(f"{where}.additionalProperties: must be true, false or a schema")
    if isinstance(schema.get("additionalProperties"), dict):
        problems += _schema_problems(
            f"{where}.additionalProperties", schema["additionalProperties"], depth + 1
        )
    if "items" in schema:
        problems += _schema_problems(f"{where}.items", schema["items"], depth + 1)
    return problems


def _function(index: int, raw: object) -> tuple[dict[str, Any] | None, list[str]]:
    where = f"tools[{index}]"
    if not isinstance(raw, dict):
        return None, [f"{where}: must be an OpenAI function tool object, got {type(raw).__name__}"]
    if "function" in raw or "type" in raw:
        if raw.get("type") != "function":
            return None, [f"{where}.type: must be 'function', got {raw.get('type')!r}"]
        extra = sorted(k for k in raw if k not in ("type", "function"))
        if extra:
            return None, [f"{where}: unknown key(s) {', '.join(extra)}"]
        fn = raw.get("function")
        if not isinstance(fn, dict):
            return None, [f"{where}.function: must be a mapping with name and parameters"]
        return fn, []
    return raw, []


def tool_file_problems(data: object) -> tuple[list[UserTool], list[str]]:
    """Validate parsed tool-file JSON: the tools it holds and one line per problem."""
    items = data.get("tools") if isinstance(data, dict) else data
    if not isinstance(items, list):
        return [], ['(file): must be a JSON list of OpenAI function tools, or {"tools": [...]}']
    problems: list[str] = []
    if not items:
        problems.append("(file): holds no tools; list at least one")
    if len(items) > MAX_TOOLS:
        problems.append(f"(file): {len(items)} tools is more than the {MAX_TOOLS} a block may hold")
    tools: list[UserTool] = []
    seen: dict[str, int] = {}
    for index, raw in enumerate(items):
        fn, probs = _function(index, raw)
        problems += probs
        if fn is None:
            continue
        where = f"tools[{index}]"
        extra = sorted(k for k in fn if k not in ("name", "description", "parameters", "strict"))
        if extra:
            problems.append(f"{where}: unknown key(s) {', '.join(extra)} in the function object")
        name = fn.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            problems.append(
                f"{where}.name: {name!r} is not a legal tool name "
                "(1-64 letters, digits, '_' or '-')"
            )
            continue
        if name in seen:
            problems.append(
                f"{where}.name: {name!r} repeats tools[{seen[name]}]; tool names must be unique"
            )
            continue
        seen[name] = index
        if _STAGE.match(name):
            problems.append(
                f"{where}.name: {name!r} is a stage tool name the tasks use "
                "(<ladder word>_<class>); rename the tool"
            )
            continue
        if name in generator_read_names():
            problems.append(
                f"{where}.name: {name!r} is a read tool name the tasks may keep in the block; "
                "rename the tool"
            )
            continue
        desc = fn.get("description", "")
        if not isinstance(desc, str):
            problems.append(f"{where}.description: must be a string")
            continue
        params = fn.get("parameters", {"type": "object", "properties": {}})
        where_p = f"{where}.parameters"
        if not isinstance(params, dict) or params.get("type") != "object":
            problems.append(f'{where_p}: must be a JSON-schema object with "type": "object"')
            continue
        probs = _schema_problems(where_p, params, 0)
        if probs:
            problems += probs
            continue
        tools.append(UserTool(name=name, description=desc, parameters=params))
    return tools, problems


def load_tool_file(path: str | Path, *, shown_as: str | None = None) -> ToolSet:
    """Read and validate a tool file; ToolFileError carries one line per problem."""
    file_path = Path(path)
    label = shown_as or str(file_path)
    try:
        raw = read_limited(file_path, MAX_BYTES)
    except TooLarge:
        raise ToolFileError(
            [f"{label}: more than the {MAX_BYTES:,} bytes a tool file may hold"]
        ) from None
    except NotARegularFile as exc:
        raise ToolFileError([f"{label}: {exc.strerror}; name a JSON file of tools"]) from None
    except OSError as exc:
        raise ToolFileError([f"{label}: cannot be read ({exc.strerror}); check the path"]) from None
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ToolFileError([f"{label}: not valid JSON ({exc})"]) from None
    tools, problems = tool_file_problems(data)
    if problems:
        raise ToolFileError([f"{label}: {x}" for x in problems])
    return ToolSet(source=label, sha256=hashlib.sha256(raw).hexdigest(), tools=tuple(tools))


# --------------------------------------------------------------------------- the block


def _names_in_prompt(bundle: TaskBundle) -> str:
    parts = (
        [bundle.prompt]
        if isinstance(bundle.prompt, str)
        else [canonical_json(bundle.prompt).decode()]
    )
    return "\n".join(parts)


def kept_reads(bundle: TaskBundle) -> frozenset[str]:
    """The reads the task needs: a spread part, or a read its prompt or seeded history names."""
    text = _names_in_prompt(bundle)
    out = set()
    for binding in bundle.engine.bindings:
        if binding.kind != "read":
            continue
        if binding.part is not None or re.search(
            rf"(?<![\w]){re.escape(binding.name)}(?![\w])", text
        ):
            out.add(binding.name)
    return frozenset(out)


def own_block(bundle: TaskBundle, tools: ToolSet) -> tuple[list[ToolBinding], list[dict[str, Any]]]:
    """The block with the user's tools in the decorative reads' slots, in order; what is left of
    the user's tools follows the last slot. Returns the engine bindings and the schemas."""
    keep = kept_reads(bundle)
    schemas = {s["function"]["name"]: s for s in bundle.tools}
    user = iter(tools.tools)
    bindings: list[ToolBinding] = []
    out: list[dict[str, Any]] = []

    def add_user(user_tool: UserTool) -> None:
        bindings.append(ToolBinding(name=user_tool.name, kind="read", parameters=(QUERY,)))
        out.append(user_tool.tool_schema())

    for binding in bundle.engine.bindings:
        if binding.kind == "read" and binding.name not in keep:
            nxt = next(user, None)
            if nxt is not None:
                add_user(nxt)
            continue
        bindings.append(binding)
        out.append(schemas[binding.name])
    for user_tool in user:
        add_user(user_tool)
    return bindings, out


def with_own_tools(bundle: TaskBundle, tools: ToolSet) -> TaskBundle:
    """The same task with the user's tools in its block: same goal, verifier and engine rules."""
    bindings, schemas = own_block(bundle, tools)
    engine = bundle.engine.model_copy(update={"bindings": tuple(bindings)})
    fields = bundle.model_dump(exclude={"task_id", "pins"})
    fields.update(tools=schemas, engine=engine)
    task_id = digest({**fields, "own_tools_sha256": tools.sha256})
    return bundle.model_copy(update={"tools": schemas, "engine": engine, "task_id": task_id})


# --------------------------------------------------------------------------- scoring a call


def _type_ok(value: object, type_name: str) -> bool:
    if type_name == "string":
        return isinstance(value, str)
    if type_name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if type_name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if type_name == "boolean":
        return isinstance(value, bool)
    if type_name == "array":
        return isinstance(value, list)
    if type_name == "object":
        return isinstance(value, dict)
    return value is None  # null


def _value_ok(value: object, schema: Mapping[str, Any]) -> bool:
    """Whether a value meets a schema node's type, enum, items and nested object rules."""
    if value is None and schema.get("nullable") is True:
        return True
    type_field = schema.get("type")
    types = (
        type_field
        if isinstance(type_field, list)
        else [type_field]
        if isinstance(type_field, str)
        else []
    )
    if types and not any(_type_ok(value, x) for x in types):
        return False
    if "enum" in schema and value not in schema["enum"]:
        return False
    if "const" in schema and value != schema["const"]:
        return False
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return all(_value_ok(v, schema["items"]) for v in value)
    if isinstance(value, dict) and ("properties" in schema or "required" in schema):
        return _object_check(value, schema) == "ok"
    return True


def _object_check(args: Mapping[str, Any], schema: Mapping[str, Any]) -> str:
    """'missing', 'extra', 'value' or 'ok' for an object against its schema."""
    props: Mapping[str, Any] = schema.get("properties") or {}
    if any(r not in args for r in schema.get("required") or ()):
        return "missing"
    extra = [k for k in args if k not in props]
    addl = schema.get("additionalProperties", True)
    if extra and addl is False:
        return "extra"
    for key, value in args.items():
        sub = props.get(key, addl if isinstance(addl, dict) else None)
        if isinstance(sub, dict) and not _value_ok(value, sub):
            return "value"
    return "ok"


def check_call(tool: UserTool, arguments: Mapping[str, Any]) -> str:
    """How a call's arguments meet the user's schema: 'ok', 'missing', 'extra' or 'value'."""
    return _object_check(arguments, tool.parameters)


def scored_call(call: ToolCall, tools: ToolSet) -> ToolCall:
    """The call as the engine and verifier see it (see the module docstring); a call to any other
    tool, or whose arguments did not parse, is returned unchanged."""
    tool = tools.tool(call.name)
    if tool is None or call.arguments is None:
        return call
    verdict = check_call(tool, call.arguments)
    text = canonical_json(call.arguments).decode()
    if verdict == "missing":
        return ToolCall(name=call.name, arguments={})
    if verdict == "extra":
        return ToolCall(name=call.name, arguments={QUERY: text, "not_in_schema": ""})
    if verdict == "value":
        return ToolCall(name=call.name, arguments={QUERY: None})
    return ToolCall(name=call.name, arguments={QUERY: text})


def scored_calls(calls: Sequence[ToolCall], tools: ToolSet | None) -> list[ToolCall]:
    return list(calls) if tools is None else [scored_call(c, tools) for c in calls]
