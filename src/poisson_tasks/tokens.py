"""The one pinned tokenizer used at generation time (o200k_base, shipped offline by bpe-openai)."""

from __future__ import annotations

from functools import cache, lru_cache
from importlib.metadata import version

import bpe_openai

ENCODING = "o200k_base"
TOKENIZER_ID = f"bpe-openai=={version('bpe-openai')}:{ENCODING}"


@cache
def _encoding():  # type: ignore[no-untyped-def]
    return bpe_openai.get_encoding(ENCODING)


@lru_cache(maxsize=1 << 16)
def count_tokens(text: str) -> int:
    """Tokens of `text` under the pinned tokenizer (memoised: the same texts recur across arms)."""
    return len(_encoding().encode(text))
