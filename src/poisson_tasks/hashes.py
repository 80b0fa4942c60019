"""Source hashes that pin an instrument: engine, generator and vocabulary, over the files' bytes."""

from __future__ import annotations

import hashlib
import json
import os
import re
import tomllib
from collections.abc import Mapping
from functools import cache
from importlib.metadata import distributions
from pathlib import Path
from typing import NamedTuple

from poisson_tasks import __version__
from poisson_tasks.tokens import TOKENIZER_ID

_ROOT = Path(__file__).resolve().parent
ENGINE_FILES: tuple[str, ...] = ("domain/engine.py", "domain/ledger.py")
VOCABULARY_FILES: tuple[str, ...] = ("domain/vocabulary.py",)
PROVENANCE_ENV = "POISSON_TASKS_PROVENANCE"  # a JSON file the Nix flake writes (flake.nix)
UV_LOCK_ENV = "POISSON_TASKS_UV_LOCK"  # the uv.lock an image was installed from
_PROJECT = "poisson-tasks"
_INSTALLERS = frozenset({"pip", "setuptools", "wheel", "uv"})


def _generator_files() -> tuple[str, ...]:
    """The generator's sources and the verifier's: a task is generated together with its verifier,
    so a change in how an episode is judged makes a card stale like a change in the task."""
    gen = sorted(p.relative_to(_ROOT).as_posix() for p in (_ROOT / "generator").glob("*.py"))
    return (
        *gen,
        "arms.py",
        "bundle.py",
        "tokens.py",
        "transcript.py",
        "verifier.py",
        *VOCABULARY_FILES,
    )


def _hash_files(files: tuple[str, ...], extra: str = "") -> str:
    hasher = hashlib.sha256()
    for rel in files:
        hasher.update(rel.encode() + b"\0")
        hasher.update((_ROOT / rel).read_bytes())
        hasher.update(b"\0")
    hasher.update(extra.encode())
    return hasher.hexdigest()


@cache
def engine_hash() -> str:
    """Hash of the engine's sources: a change here changes every observation."""
    return _hash_files(ENGINE_FILES)


@cache
def vocabulary_hash() -> str:
    return _hash_files(VOCABULARY_FILES)


@cache
def generator_hash() -> str:
    """Hash of the generator, verifier, vocabulary and tokenizer: a change here makes every card
    stale."""
    return _hash_files(_generator_files(), extra=TOKENIZER_ID)


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_distributions() -> dict[str, str]:
    """Installed distributions as {normalised name: version} (PEP 503 names)."""
    seen: dict[str, str] = {}
    for dist in distributions():
        name = dist.metadata["Name"]
        if name:
            seen.setdefault(_canonical(name), dist.version)
    return seen


def _distributions_list(installed: Mapping[str, str]) -> str:
    return "".join(f"{k}=={v}\n" for k, v in sorted(installed.items()))


def lock_mismatches(lock_text: str, installed: Mapping[str, str]) -> list[str]:
    """What stops `installed` from being an environment of this uv.lock (empty when it is one).

    Every installed distribution must be a locked package at its locked version (this package
    itself and the installers pip/setuptools/wheel/uv excepted), and this package's locked runtime
    dependencies must all be installed. Cheap: one TOML parse, no resolution.
    """
    try:
        lock = tomllib.loads(lock_text)
    except tomllib.TOMLDecodeError as exc:
        return [f"uv.lock does not parse: {exc}"]
    locked: dict[str, set[str]] = {}
    runtime: list[str] = []
    for pkg in lock.get("package", []):
        name = _canonical(str(pkg.get("name", "")))
        locked.setdefault(name, set()).add(str(pkg.get("version", "")))
        if name == _PROJECT:
            runtime = [_canonical(str(d["name"])) for d in pkg.get("dependencies", [])]
    problems = []
    for name, version in sorted(installed.items()):
        if name == _PROJECT or name in _INSTALLERS:
            continue
        if name not in locked:
            problems.append(f"{name}=={version} is not in uv.lock")
        elif version not in locked[name]:
            problems.append(f"{name}=={version}, uv.lock has {', '.join(sorted(locked[name]))}")
    problems += [f"{d} (locked) is not installed" for d in runtime if d not in installed]
    return problems


class EnvironmentSource(NamedTuple):
    """Where the environment hash came from, and why not from a lock when it is not."""

    hash: str
    note: str


def _flake_provenance() -> str | None:
    """`flake:<sha256 of flake.lock>` from the provenance file the Nix flake writes, if any."""
    path = os.environ.get(PROVENANCE_ENV)
    if not path:
        return None
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        digest = str(data["flake_lock_sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return "flake:" + digest if re.fullmatch(r"[0-9a-f]{64}", digest) else None


def _uv_lock_path() -> Path:
    named = os.environ.get(UV_LOCK_ENV)
    return Path(named) if named else _ROOT.parents[1] / "uv.lock"


def environment_source(
    uv_lock: Path | None = None, installed: Mapping[str, str] | None = None
) -> EnvironmentSource:
    """What pins this environment, most specific first:

    - `flake:<sha256 of flake.lock>` when the Nix flake's provenance file names it
      (environment variable POISSON_TASKS_PROVENANCE, written by the flake's wrapper);
    - `uv.lock:<sha256 of uv.lock>` when the installed distributions match that lock
      (POISSON_TASKS_UV_LOCK names it, else the source tree's uv.lock);
    - `distributions:<sha256 of the sorted name==version list>` otherwise: not from a lock.
    """
    if uv_lock is None and installed is None and (flake := _flake_provenance()):
        return EnvironmentSource(flake, "the Nix flake's environment (flake.lock)")
    have = installed_distributions() if installed is None else dict(installed)
    lock = _uv_lock_path() if uv_lock is None else uv_lock
    if lock.is_file():
        data = lock.read_bytes()
        problems = lock_mismatches(data.decode("utf-8", "replace"), have)
        if not problems:
            return EnvironmentSource(
                "uv.lock:" + hashlib.sha256(data).hexdigest(),
                "the installed distributions match uv.lock",
            )
        why = f"installed distributions differ from {lock.name}: {problems[0]}"
    else:
        why = "no uv.lock or flake provenance found"
    listing = _distributions_list(have).encode()
    return EnvironmentSource("distributions:" + hashlib.sha256(listing).hexdigest(), why)


@cache
def environment_hash() -> str:
    """The environment's hash, naming its source (see environment_source)."""
    return environment_source().hash


def describe_environment_hash(value: str) -> str:
    """The card's words for an environment hash's source."""
    kind = value.split(":", 1)[0]
    return _DESCRIPTIONS.get(kind, "source not recorded")


_DESCRIPTIONS = {
    "flake": "from the Nix flake: sha256 of flake.lock",
    "flake.lock": "from the Nix flake: sha256 of flake.lock",
    "uv.lock": "from uv.lock: sha256 of the lock the installed distributions were checked against",
    "distributions": "not from a lock: sha256 of the installed distributions' name==version list",
}


def version_lines() -> list[str]:
    """What `poisson-tasks --version` prints: the version, then the build's hashes under the names
    a card's provenance gives them, so a card can be matched to the install that would rebuild it."""
    env = environment_hash()
    return [
        f"poisson-tasks {__version__}",
        f"engine hash       {engine_hash()}",
        f"generator hash    {generator_hash()}",
        f"vocabulary hash   {vocabulary_hash()}",
        f"environment hash  {env} ({describe_environment_hash(env)})",
    ]
