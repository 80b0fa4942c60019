"""Tiny GGUF files for tests: a header and metadata only, no tensors (never loaded by llama.cpp).

Written to ggml's gguf layout (magic, version, tensor count, key-value count, then typed pairs,
little-endian), the same layout local.gguf reads; a real GGUF (SmolLM2's) is read in
tests/test_local_served.py.
"""

from __future__ import annotations

import struct
from pathlib import Path

Value = str | int | bool | list[str] | list[int]


def _string(text: str) -> bytes:
    data = text.encode("utf-8")
    return struct.pack("<Q", len(data)) + data


def _value(value: Value) -> bytes:
    if isinstance(value, bool):
        return struct.pack("<I?", 7, value)
    if isinstance(value, int):
        return struct.pack("<Iq", 11, value)
    if isinstance(value, str):
        return struct.pack("<I", 8) + _string(value)
    if all(isinstance(v, str) for v in value):
        return struct.pack("<IIQ", 9, 8, len(value)) + b"".join(_string(str(v)) for v in value)
    return struct.pack("<IIQ", 9, 5, len(value)) + b"".join(struct.pack("<i", v) for v in value)


def gguf_bytes(metadata: dict[str, Value], *, version: int = 3) -> bytes:
    """The bytes of a GGUF file holding `metadata` and no tensors."""
    body = b"".join(_string(key) + _value(value) for key, value in metadata.items())
    return b"GGUF" + struct.pack("<IQQ", version, 0, len(metadata)) + body


def write_gguf(path: Path, metadata: dict[str, Value], *, version: int = 3) -> Path:
    path.write_bytes(gguf_bytes(metadata, version=version))
    return path


CHATML_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "hello", "Ġworld"]
CHATML_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
GEMMA_TOKENS = ["<pad>", "<eos>", "<bos>", "<start_of_turn>", "<end_of_turn>", "hello"]
GEMMA_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<start_of_turn>{{ m['role'] }}\n{{ m['content'] }}"
    "<end_of_turn>\n{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)


def chatml_model(path: Path, *, template: bool = True) -> Path:
    """A ChatML model's metadata (SmolLM2's shape: architecture llama, im markers as tokens)."""
    meta: dict[str, Value] = {
        "general.architecture": "llama",
        "general.name": "Tiny ChatML",
        "llama.context_length": 8192,
        "tokenizer.ggml.tokens": CHATML_TOKENS,
        "tokenizer.ggml.token_type": [3, 3, 3, 1, 1],
    }
    if template:
        meta["tokenizer.chat_template"] = CHATML_TEMPLATE
    return write_gguf(path, meta)


def gemma_model(path: Path) -> Path:
    """A Gemma model's metadata: its own turn markers, no ChatML ones."""
    return write_gguf(
        path,
        {
            "general.architecture": "gemma3",
            "general.name": "Tiny Gemma",
            "tokenizer.ggml.tokens": GEMMA_TOKENS,
            "tokenizer.chat_template": GEMMA_TEMPLATE,
            "general.file_type": 3,
        },
    )


# A stand-in for a Qwen2.5-style template, written for these tests: it asks for calls as JSON
# inside <tool_call> tags (as the Qwen2, Qwen2.5 and Qwen3 templates do) and writes them so; the
# `\n` inside the Jinja strings is how such a template's source holds its newlines.
QWEN_TEMPLATE = (
    "{% if tools %}<|im_start|>system\\n# Tools\\n<tools>{% for t in tools %}{{ t | tojson }}"
    "{% endfor %}</tools>\\nFor each function call, return a json object within <tool_call>"
    '</tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": '
    "<args-json-object>}\\n</tool_call><|im_end|>\\n{% endif %}{% for m in messages %}"
    "<|im_start|>{{ m['role'] }}\\n{{ m['content'] }}<|im_end|>\\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\\n{% endif %}"
)
# A Qwen3-Coder-style template's call: XML inside <tool_call>, which llama.cpp reads natively.
XML_CALL_TEMPLATE = (
    "{% if tools %}<|im_start|>system\\n<tools>{{ tools }}</tools>\\n<tool_call>\\n"
    "<function=name>\\n<parameter=p>\\nvalue\\n</parameter>\\n</function>\\n</tool_call>"
    "<|im_end|>\\n{% endif %}"
)


def qwen_model(
    path: Path,
    *,
    name: str = "Qwen2.5 0.5B Instruct",
    basename: str | None = "Qwen2.5",
    architecture: str = "qwen2",
    template: str = QWEN_TEMPLATE,
) -> Path:
    """A Qwen2.5-shaped model's metadata (ChatML tokens, a template with a <tool_call> section);
    name it `Qwen2.5 Coder ...` for a Qwen2.5-Coder."""
    meta: dict[str, Value] = {
        "general.architecture": architecture,
        "general.name": name,
        "tokenizer.ggml.tokens": CHATML_TOKENS,
        "tokenizer.chat_template": template,
    }
    if basename is not None:
        meta["general.basename"] = basename
    return write_gguf(path, meta)
