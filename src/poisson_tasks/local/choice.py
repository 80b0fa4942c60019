"""The chat template serve-local uses when none is given (`--template auto`): chosen from the
GGUF's own metadata, with the reason in one sentence.

The metadata read (local.gguf): the architecture (`general.architecture`), the model's name
(`general.name`, `general.basename`), its vocabulary's turn markers and its own chat template
(`tokenizer.chat_template`). The rules, first match wins:

1. a Qwen2 Coder model (architecture qwen2, a name that says Coder) gets json-tools: Qwen2.5-Coder
   ships Qwen2.5's template, which asks for <tool_call> tags, yet writes its calls as fenced or
   bare JSON (issue 34: no native call under hermes-tools, 132 in 136 replies under a fenced-JSON
   template; the same is reported against vLLM's and Ollama's Hermes parsers);
2. a model whose own template asks for calls as JSON inside <tool_call> tags (Qwen2, Qwen2.5,
   Qwen3, Hermes) gets hermes-tools, which asks in Qwen2.5's own words;
3. a ChatML model (its vocabulary holds <|im_start|> and <|im_end|>) whose own template lists no
   tools (SmolLM2-Instruct, CI's model) gets chatml-tools;
4. any other model whose own template lists tools gets `embedded`, its own template;
5. anything else is refused: no shipped template writes its turn markers, and its own template
   would drop the tools.

A choice from metadata is a guess about how the model writes calls; serve-local's start-up tool
call (local.server.probe_tool_call) is the check of it, before any study.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from poisson_tasks.errors import LocalServeError
from poisson_tasks.local.defaults import EMBEDDED
from poisson_tasks.local.gguf import GgufMetadata

__all__ = ["CHATML_MARKERS", "TemplateChoice", "choose_template"]

CHATML_MARKERS = ("<|im_start|>", "<|im_end|>")
_CODER = re.compile(r"coder", re.IGNORECASE)
# <tool_call> then a JSON object naming the function (its newline written as \n or as itself)
_HERMES_CALL = re.compile(r'<tool_call>(?:\\n|\s)*\{\s*\\?"(?:name|arguments)\\?"')


@dataclass(frozen=True, slots=True)
class TemplateChoice:
    """The template the metadata points to (a shipped template's name, or `embedded`) and why."""

    name: str
    reason: str


def _chatml(meta: GgufMetadata) -> bool:
    if meta.tokens:
        return all(marker in meta.tokens for marker in CHATML_MARKERS)
    own = meta.chat_template or ""
    return all(marker in own for marker in CHATML_MARKERS)


def _named(meta: GgufMetadata) -> str:
    return " ".join(x for x in (meta.name, meta.basename) if x)


def choose_template(meta: GgufMetadata, model_name: str) -> TemplateChoice:
    """The template for a GGUF by the rules of this module's docstring; LocalServeError (one
    line) when none fits."""
    own = meta.chat_template or ""
    arch = meta.architecture or "no architecture"
    if meta.architecture == "qwen2" and _CODER.search(_named(meta)) and _chatml(meta):
        return TemplateChoice(
            "json-tools",
            f"a Qwen2 Coder model ({_named(meta)}, general.architecture qwen2): these write their "
            "calls as fenced JSON, not in the <tool_call> tags their own template asks for",
        )
    if _HERMES_CALL.search(own) and "<function=" not in own:
        return TemplateChoice(
            "hermes-tools",
            f"its own chat template asks for calls as JSON inside <tool_call> tags (the Hermes "
            f"form of Qwen2, Qwen2.5 and Qwen3; general.architecture {arch})",
        )
    if _chatml(meta) and "tools" not in own:
        return TemplateChoice(
            "chatml-tools",
            f"a ChatML model (its vocabulary has <|im_start|> and <|im_end|>; general.architecture "
            f"{arch}) whose own chat template " + ("lists no tools" if own else "is missing"),
        )
    if "tools" in own:
        return TemplateChoice(
            EMBEDDED,
            f"its own chat template lists tools and is not one a shipped template stands in for "
            f"(general.architecture {arch})",
        )
    raise LocalServeError(
        f"{model_name}: no shipped template fits it (its vocabulary has no <|im_start|> and "
        f"<|im_end|>; general.architecture {arch}) and its own chat template lists no tools: give "
        "--template FILE, a template in the model's own format with a tool section"
    )
