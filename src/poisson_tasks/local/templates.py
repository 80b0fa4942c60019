"""Chat templates for serving a GGUF with tools, and the check that a template has a tool section.

A tool-calling study only measures something when the tool block reaches the model: with a chat
template that has no tool section, llama.cpp renders the conversation without the tools, and the
model can only answer in prose. So `serve-local` refuses such a template, twice:

1. before the model loads, by rendering the template (Jinja2, sandboxed) with one probe tool and
   checking that the tool's name is in the prompt it makes;
2. once the server is up, by asking the server itself (`POST /apply-template`) to render the same
   conversation, since llama.cpp's own Jinja engine is the one that counts.

The shipped templates are this project's own files under `data/templates/`; each states the model
family it is written for in its opening comment (`family: ...`).
"""

from __future__ import annotations

import hashlib
import re
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from poisson_tasks.errors import LocalServeError, MissingExtraError

DEFAULT_TEMPLATE = "chatml-tools"
EMBEDDED = "embedded"
PROBE_TOOL = "poisson_probe_tool_7f3a"
_FAMILY = re.compile(r"^\s*family:\s*(.+?)\s*$", re.MULTILINE)


class ChatTemplate(BaseModel):
    """A chat template as serve-local hands it to llama.cpp: its name, stated family and text."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    family: str | None
    text: str
    source: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


def shipped_templates() -> list[str]:
    """The names of the templates this package ships."""
    folder = resources.files("poisson_tasks").joinpath("data", "templates")
    return sorted(
        p.name.removesuffix(".jinja") for p in folder.iterdir() if p.name.endswith(".jinja")
    )


def _family(text: str) -> str | None:
    found = _FAMILY.search(text.split("-#}", 1)[0]) if text.lstrip().startswith("{#") else None
    return found.group(1) if found else None


def load_template(spec: str) -> ChatTemplate | None:
    """A shipped template by name, or a Jinja file by path; None for `embedded` (the GGUF's own)."""
    if spec == EMBEDDED:
        return None
    if spec in shipped_templates():
        res = resources.files("poisson_tasks").joinpath("data", "templates", f"{spec}.jinja")
        text = res.read_text(encoding="utf-8")
        return ChatTemplate(name=spec, family=_family(text), text=text, source="shipped")
    path = Path(spec)
    if not path.is_file():
        raise LocalServeError(
            f"--template {spec!r} is neither a shipped template ({', '.join(shipped_templates())}), "
            f"`{EMBEDDED}` (the GGUF's own) nor a readable file: give one of those"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LocalServeError(f"--template {path}: cannot be read as UTF-8 text ({exc})") from None
    return ChatTemplate(name=path.name, family=_family(text), text=text, source=str(path))


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


def _no_tools(where: str, name: str) -> LocalServeError:
    return LocalServeError(
        f"chat template {name}: {where} renders no tool section (the probe tool is not in the "
        "prompt), so tools would never reach the model; use --template "
        f"{DEFAULT_TEMPLATE} or a template that lists `tools`"
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


def check_applied(prompt: str, name: str) -> None:
    """Refuse when the server's own rendering (`/apply-template`) leaves the probe tool out."""
    if PROBE_TOOL not in prompt:
        raise _no_tools("the server's /apply-template", name)
