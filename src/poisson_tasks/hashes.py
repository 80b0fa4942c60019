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


def _distributions_list() -> str:
    """Installed distributions as sorted `name==version` lines (names normalised, PEP 503)."""
    import re
    from importlib.metadata import distributions

    seen: dict[str, str] = {}
    for dist in distributions():
        name = dist.metadata["Name"]
        if not name:
            continue
        key = re.sub(r"[-_.]+", "-", name).lower()
        seen.setdefault(key, dist.version)
    return "".join(f"{k}=={v}\n" for k, v in sorted(seen.items()))


def environment_hash(flake_lock: Path | None = None) -> str:
    """What pins the environment: `flake.lock:<sha256>` of the lock file when there is one,
    else `distributions:<sha256>` of the installed distributions' sorted name==version list."""
    lock = flake_lock if flake_lock is not None else _ROOT.parents[1] / "flake.lock"
    if lock.is_file():
        return "flake.lock:" + hashlib.sha256(lock.read_bytes()).hexdigest()
    listing = _distributions_list().encode()
    return "distributions:" + hashlib.sha256(listing).hexdigest()
