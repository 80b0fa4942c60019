"""local.gguf: the metadata serve-local reads from a GGUF file before the model loads.

The files here are written by tests/gguf_writer.py (metadata only); the real SmolLM2 GGUF is read
in tests/test_local_served.py.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from gguf_writer import CHATML_TEMPLATE, CHATML_TOKENS, chatml_model, gguf_bytes, write_gguf

from poisson_tasks.errors import LocalServeError
from poisson_tasks.local.gguf import read_gguf_metadata


def test_reads_architecture_name_template_and_vocabulary(tmp_path: Path) -> None:
    meta = read_gguf_metadata(chatml_model(tmp_path / "m.gguf"))
    assert meta.architecture == "llama" and meta.name == "Tiny ChatML"
    assert meta.chat_template == CHATML_TEMPLATE
    assert meta.tokens == frozenset(CHATML_TOKENS)


def test_skips_every_value_type_it_does_not_keep(tmp_path: Path) -> None:
    path = write_gguf(
        tmp_path / "m.gguf",
        {
            "a.int": -5,
            "a.bool": True,
            "a.ints": [1, 2, 3],
            "tokenizer.ggml.merges": ["a b", "c d"],
            "a.text": "not kept",
            "general.architecture": "qwen2",
        },
    )
    meta = read_gguf_metadata(path)
    assert meta.architecture == "qwen2" and meta.chat_template is None and meta.tokens == set()


def test_a_file_with_no_template_says_none(tmp_path: Path) -> None:
    assert (
        read_gguf_metadata(chatml_model(tmp_path / "m.gguf", template=False)).chat_template is None
    )


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"", "cannot be read as a GGUF file"),
        (b"GGML" + bytes(40), "not a GGUF file"),
        (gguf_bytes({"general.architecture": "llama"}, version=1), "GGUF version 1"),
        (gguf_bytes({"general.architecture": "llama"})[:-3], "cut short or damaged"),
        (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + bytes(range(256)) * 4, "cut short or damaged"),
        (b"GGUF" + bytes(range(256)) * 40, "GGUF version 50462976"),
    ],
    ids=["empty", "magic", "version", "truncated", "huge-key", "junk"],
)
def test_a_file_that_is_not_a_readable_gguf_is_one_error(
    tmp_path: Path, data: bytes, says: str
) -> None:
    path = tmp_path / "bad.gguf"
    path.write_bytes(data)
    with pytest.raises(LocalServeError, match=says):
        read_gguf_metadata(path)
