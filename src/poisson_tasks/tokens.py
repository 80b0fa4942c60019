"""The one pinned tokenizer used at generation time (o200k_base, shipped offline by bpe-openai)."""

from __future__ import annotations

from functools import cache
from importlib.metadata import version

ENCODING = "o200k_base"
TOKENIZER_ID = f"bpe-openai=={version('bpe-openai')}:{ENCODING}"


@cache
def _encoding():  # type: ignore[no-untyped-def]
    import bpe_openai

    return bpe_openai.get_encoding(ENCODING)


def count_tokens(text: str) -> int:
    """Tokens of `text` under the pinned tokenizer."""
    return len(_encoding().encode(text))
