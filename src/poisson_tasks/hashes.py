"""Source hashes that pin an instrument: engine, generator and vocabulary, over the files' bytes."""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

from poisson_tasks.tokens import TOKENIZER_ID

_ROOT = Path(__file__).resolve().parent
ENGINE_FILES: tuple[str, ...] = ("domain/engine.py", "domain/ledger.py")
VOCABULARY_FILES: tuple[str, ...] = ("domain/vocabulary.py",)


def _generator_files() -> tuple[str, ...]:
    gen = sorted(p.relative_to(_ROOT).as_posix() for p in (_ROOT / "generator").glob("*.py"))
    return (*gen, "arms.py", "bundle.py", "tokens.py", *VOCABULARY_FILES)


def _hash_files(files: tuple[str, ...], extra: str = "") -> str:
    h = hashlib.sha256()
    for rel in files:
        h.update(rel.encode() + b"\0")
        h.update((_ROOT / rel).read_bytes())
        h.update(b"\0")
    h.update(extra.encode())
    return h.hexdigest()


@cache
def engine_hash() -> str:
    """Hash of the engine's sources: a change here changes every observation."""
    return _hash_files(ENGINE_FILES)


@cache
def vocabulary_hash() -> str:
    return _hash_files(VOCABULARY_FILES)


@cache
def generator_hash() -> str:
    """Hash of the generator, vocabulary and tokenizer: a change here makes every card stale."""
    return _hash_files(_generator_files(), extra=TOKENIZER_ID)
