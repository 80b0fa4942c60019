"""Chat templates for serving a GGUF with tools, and the check that a template has a tool section.

A tool-calling study only measures something when the tool block reaches the model: with a chat
template that has no tool section, llama.cpp renders the conversation without the tools, and the
model can only answer in prose. So `serve-local` refuses such a template, twice:

1. before the model loads, by rendering the template (Jinja2, sandboxed) with one probe tool and
   checking that the tool's name is in the prompt it makes;
2. once the server is up, by asking the server itself (`POST /apply-template`) to render the same
   conversation, since llama.cpp's own Jinja engine is the one that counts.

A tool section is not enough: llama.cpp learns a template's call format from how the template
writes a tool call in an assistant turn, and parses the model's reply with what it learned. A
template that writes no call there leaves every call the model makes as text. `call_text` finds
the text a template writes for one probe call (the same conversation rendered with a plain reply
and with the call, diffed), which serve-local checks before the model loads and then hands to the
server as a reply to parse (server.verify_parsed_call).

The shipped templates are this project's own files under `data/templates/`; each states in its
opening comment the model family it is written for (`family: ...`) and the turn markers it writes
(`markers: ...`), which serve-local looks for in the model's vocabulary (`family_warning`).
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from poisson_tasks.errors import LocalServeError, MissingExtraError, TooLarge
from poisson_tasks.files import read_limited
from poisson_tasks.local.defaults import AUTO, EMBEDDED, TEMPLATE_SUFFIX, shipped_templates
from poisson_tasks.local.gguf import GgufMetadata

TEMPLATE_MAX_BYTES = 1 << 20  # a --template file: a page of Jinja
PROBE_TOOL = "poisson_probe_tool_7f3a"
PROBE_ARGUMENTS = {"q": "probe"}
_PROBE_REPLY = "\u2063poisson probe reply\u2063"  # invisible separators: no template writes them
_FAMILY = re.compile(r"^\s*family:\s*(.+?)\s*$", re.MULTILINE)
_MARKERS = re.compile(r"^\s*markers:\s*(.+?)\s*$", re.MULTILINE)


class ChatTemplate(BaseModel):
    """A chat template as serve-local hands it to llama.cpp: its name, stated family, the turn
    markers it writes, its text, and the sha256 of the file it came from (what `sha256sum` of the
    file prints)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    family: str | None
    markers: tuple[str, ...]
    text: str
    source: str
    file_sha256: str


def _header(pattern: re.Pattern[str], text: str) -> str | None:
    """A `key: value` line of the template's opening comment, if it opens with one."""
    found = pattern.search(text.split("-#}", 1)[0]) if text.lstrip().startswith("{#") else None
    return found.group(1) if found else None


def _template(name: str, data: bytes, source: str) -> ChatTemplate:
    text = data.decode("utf-8")  # as the file is: no newline translation, so hashes agree
    markers = _header(_MARKERS, text)
    return ChatTemplate(
        name=name,
        family=_header(_FAMILY, text),
        markers=tuple(markers.split()) if markers else (),
        text=text,
        source=source,
        file_sha256=hashlib.sha256(data).hexdigest(),
    )


def load_template(spec: str) -> ChatTemplate | None:
    """A shipped template by name, or a Jinja file by path; None for `embedded` (the GGUF's own)."""
    if spec == EMBEDDED:
        return None
    if spec in shipped_templates():
        res = resources.files("poisson_tasks").joinpath("data", "templates", spec + TEMPLATE_SUFFIX)
        return _template(spec, res.read_bytes(), "shipped")
    path = Path(spec)
    if not path.is_file():
        raise LocalServeError(
            f"--template {spec!r} is neither `{AUTO}` (chosen from the GGUF), a shipped template "
            f"({', '.join(shipped_templates())}), `{EMBEDDED}` (the GGUF's own) nor a readable "
            "file: give one of those"
        )
    try:
        return _template(path.name, read_limited(path, TEMPLATE_MAX_BYTES), str(path))
    except TooLarge:
        raise LocalServeError(
            f"--template {path}: larger than {TEMPLATE_MAX_BYTES:,} bytes; a chat template is a "
            "page of Jinja"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise LocalServeError(f"--template {path}: cannot be read as UTF-8 text ({exc})") from None


def probe_conversation() -> dict[str, Any]:
    """The conversation both checks render: a system turn, a user turn and one probe tool."""
    return {
        "messages": [
            {"role": "system", "content": "You are a careful assistant."},
            {"role": "user", "content": "Use the tool."},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": PROBE_TOOL,
                    "description": "A probe: checks that tools reach the prompt.",
                    "parameters": {
                        "type": "object",
                        "properties": {"q": {"type": "string"}},
                        "required": ["q"],
                    },
                },
            }
        ],
    }


def probe_call() -> dict[str, Any]:
    """The one tool call both call checks write: the probe tool with PROBE_ARGUMENTS."""
    arguments = json.dumps(PROBE_ARGUMENTS)
    return {
        "id": "call_0",
        "type": "function",
        "function": {"name": PROBE_TOOL, "arguments": arguments},
    }


def call_conversations() -> tuple[dict[str, Any], dict[str, Any]]:
    """The probe conversation continued by a plain reply, and by the probe call, then a user turn.

    Rendered by the same template, the two differ only where the assistant turn's body is: that
    difference, read after the generation prompt, is the text the template writes for the call.
    """
    replied, called = copy.deepcopy(probe_conversation()), copy.deepcopy(probe_conversation())
    replied["messages"].append({"role": "assistant", "content": _PROBE_REPLY})
    called["messages"].append({"role": "assistant", "content": None, "tool_calls": [probe_call()]})
    for conversation in (replied, called):
        conversation["messages"].append({"role": "user", "content": "Thank you."})
    return replied, called


def call_text(generation: str, replied: str, called: str) -> str | None:
    """The text a template writes for the probe call after its generation prompt, or None.

    `generation` is the probe conversation rendered with the generation prompt, `replied` and
    `called` the two conversations of call_conversations. None when the call is not written after
    the generation prompt with the probe tool's name in it (the template writes no call, or opens
    the assistant turn otherwise than the generation prompt does).
    """
    suffix = _common_suffix(replied, called)
    body = called[: len(called) - suffix]
    if not body.startswith(generation) or PROBE_TOOL not in body[len(generation) :]:
        return None
    return body[len(generation) :]


def _common_suffix(first: str, second: str) -> int:
    """How many characters two strings share at their ends."""
    shared, most = 0, min(len(first), len(second))
    while shared < most and first[-1 - shared] == second[-1 - shared]:
        shared += 1
    return shared


def _no_tools(where: str, name: str) -> LocalServeError:
    return LocalServeError(
        f"chat template {name}: {where} renders no tool section (the probe tool is not in the "
        "prompt), so tools would never reach the model; use --template "
        f"{_shipped()} or a template that lists `tools`"
    )


def _shipped() -> str:
    return " or ".join(shipped_templates())


def no_call_format(where: str, name: str) -> LocalServeError:
    """The refusal of a template that writes no tool call into an assistant turn."""
    return LocalServeError(
        f"chat template {name}: {where} writes no tool call into an assistant turn (the probe call "
        "is not in the prompt), so llama.cpp cannot learn its call format and every call the "
        f"model makes would arrive as text; use --template {_shipped()} or a template that "
        "renders an assistant's `tool_calls`"
    )


def render(template: ChatTemplate, conversation: dict[str, Any]) -> str:
    """The prompt the template makes for a conversation, rendered as Hugging Face templates are."""
    try:  # jinja2 comes with the `local` extra: only serve-local renders templates
        from jinja2 import TemplateError  # noqa: PLC0415 (the `local` extra)
        from jinja2.sandbox import ImmutableSandboxedEnvironment  # noqa: PLC0415 (the `local` extra)
    except ImportError:
        raise MissingExtraError(
            'serve-local needs the `local` extra: pip install "poisson-tasks[local]"'
        ) from None

    def _raise(message: str) -> str:
        raise TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: "2026-01-01"
    try:
        return env.from_string(template.text).render(
            **conversation, add_generation_prompt=True, bos_token="", eos_token=""
        )
    except TemplateError as exc:
        raise LocalServeError(
            f"chat template {template.name}: does not render ({type(exc).__name__}: {exc}); "
            "fix the template"
        ) from None


def check_tool_section(template: ChatTemplate) -> None:
    """Refuse a template whose rendering of the probe conversation leaves the tool out."""
    if PROBE_TOOL not in render(template, probe_conversation()):
        raise _no_tools("it", template.name)


def check_call_format(template: ChatTemplate) -> str:
    """The text the template writes for the probe call; refuse a template that writes none."""
    replied, called = call_conversations()
    text = call_text(
        render(template, probe_conversation()), render(template, replied), render(template, called)
    )
    if text is None:
        raise no_call_format("it", template.name)
    return text


def check_applied(prompt: str, name: str) -> None:
    """Refuse when the server's own rendering (`/apply-template`) leaves the probe tool out."""
    if PROBE_TOOL not in prompt:
        raise _no_tools("the server's /apply-template", name)


def family_warning(template: ChatTemplate, model: GgufMetadata, model_name: str) -> str | None:
    """One line when the model's GGUF names another family than the template is written for.

    A template's turn markers (`markers:` in its opening comment) must be tokens of the model's
    vocabulary, and the GGUF's own chat template, when it has one, writes them too; a model that
    lacks them would read turn markers it was never trained on. None when nothing contradicts.
    """
    if not template.markers:
        return None
    arch = f"general.architecture {model.architecture}" if model.architecture else "no architecture"
    missing = [m for m in template.markers if m not in model.tokens]
    if model.tokens and missing:
        why = f"its vocabulary has no {' or '.join(missing)} token"
    elif model.chat_template and not any(m in model.chat_template for m in template.markers):
        why = f"its own chat template writes none of {' '.join(template.markers)}"
    else:
        return None
    return (
        f"chat template {template.name} is written for {template.family or 'another family'}, but "
        f"{model_name} ({arch}) looks like another family: {why}; the model would read turn "
        "markers it was not trained on (give --template embedded or a template in its own format)"
    )
