"""The one pinned tokenizer used at generation time (o200k_base, shipped offline by bpe-openai).

bpe-openai's package (`import bpe_openai`) decodes three whole token tables in Python when it is
imported (cl100k, o200k, voyage3; about 0.5 s) although its encoder is a Rust extension that
carries its own tables and never reads them. This module loads that extension alone, on the first
count, and builds only the o200k tokenizer: the same Rust object that
`bpe_openai.get_encoding("o200k_base")` encodes with. Counts come from its `count` (about twice as
fast as listing the tokens); tests/test_tokens.py holds them equal to the package's
`len(encode(text))` on every text the full pin sweep counts and on adversarial ones. Importing
this module loads nothing but the version string.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from functools import cache, lru_cache
from importlib.metadata import version
from pathlib import Path
from types import ModuleType
from typing import Protocol, cast

ENCODING = "o200k_base"
TOKENIZER_ID = f"bpe-openai=={version('bpe-openai')}:{ENCODING}"

_BINDINGS = "bpe_openai._bindings"
# What bpe_openai's Encoding.encode refuses by default (disallowed_special="all") and its limits.
_SPECIAL_TOKENS = ("<|endoftext|>", "<|endofprompt|>")
_MAX_CHARS = 1_000_000
_MAX_TOKENS = 200_000


class _Backend(Protocol):
    def count(self, text: str) -> int: ...


def _load_bindings() -> ModuleType:
    """bpe_openai's Rust extension, without running the package's __init__ (the table decoding).

    Registered under its own name, so a later `import bpe_openai` reuses this very module.
    """
    loaded = sys.modules.get(_BINDINGS)
    if loaded is not None:
        return loaded
    package = importlib.util.find_spec("bpe_openai")  # finds the folder; executes nothing
    folders = list(package.submodule_search_locations or []) if package else []
    for folder in folders:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = Path(folder) / f"_bindings{suffix}"
            if not path.is_file():
                continue
            loader = importlib.machinery.ExtensionFileLoader(_BINDINGS, str(path))
            spec = importlib.util.spec_from_file_location(_BINDINGS, path, loader=loader)
            if spec is None:
                continue
            module = importlib.util.module_from_spec(spec)
            sys.modules[_BINDINGS] = module
            loader.exec_module(module)
            return module
    raise ImportError(
        f"bpe-openai's tokenizer extension ({_BINDINGS}) was not found: reinstall poisson-tasks "
        "(pip install poisson-tasks) so that bpe-openai==0.1.4 is installed"
    )


@cache
def _backend() -> _Backend:
    """The o200k tokenizer, built once per process (about 0.1 s); forked workers inherit it."""
    bindings = _load_bindings()
    return cast(_Backend, bindings.tokenizer_for_encoding(ENCODING))


def warm() -> None:
    """Build the tokenizer now: before forking workers, or before a clock starts."""
    _backend()


@lru_cache(maxsize=1 << 16)
def count_tokens(text: str) -> int:
    """Tokens of `text` under the pinned tokenizer (memoised: the same texts recur across arms).

    What `len(bpe_openai.get_encoding("o200k_base").encode(text))` gives, with its refusals: a
    special token's text raises ValueError, and so does a text too long for it to encode.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: replaced, as bpe_openai does
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    for special in _SPECIAL_TOKENS:
        if special in text:
            raise ValueError(
                f"Encountered text corresponding to disallowed special token {special!r}."
            )
    if not text:
        return 0
    if len(text) >= _MAX_CHARS:
        raise ValueError("Input too long to encode safely")
    count = _backend().count(text)
    if count > _MAX_TOKENS:
        raise ValueError(f"Input produces {count} tokens which exceeds chunk limit {_MAX_TOKENS}")
    return count
