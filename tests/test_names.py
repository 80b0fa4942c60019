"""No single-letter names in src/ outside comprehensions (issue 8), walked over the AST.

A name counts when it is bound: an assignment or loop target, a parameter (lambdas included), a
function or class name, an `except ... as` name. Comprehension targets are allowed, and so is `_`.

Exempt for good: the files that feed the generator hash (generator/*.py, arms.py, bundle.py,
tokens.py, transcript.py, domain/vocabulary.py; see hashes.generator_hash) and the engine and
ledger (domain/engine.py, domain/ledger.py, which feed the engine hash): renaming there moves
every task id and forces re-running the published cards, for no change in behaviour.

Every other file holds none (the ratchet list that let older files shrink to zero is gone).
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "poisson_tasks"

_HASHED = ("arms.py", "bundle.py", "tokens.py", "transcript.py", "domain/vocabulary.py")
_ENGINE = ("domain/engine.py", "domain/ledger.py")


def _exempt(rel: str) -> bool:
    return rel.startswith("generator/") or rel in _HASHED or rel in _ENGINE


def single_letter_names(source: str) -> list[tuple[int, str]]:
    """(line, name) for every single-letter name `source` binds outside a comprehension."""
    tree = ast.parse(source)
    in_comprehension = {
        id(node)
        for comp in ast.walk(tree)
        if isinstance(comp, ast.comprehension)
        for node in ast.walk(comp.target)
    }
    found = []
    for node in ast.walk(tree):
        name = None
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            name = None if id(node) in in_comprehension else node.id
        elif isinstance(node, ast.arg):
            name = node.arg
        elif isinstance(
            node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.ExceptHandler
        ):
            name = node.name
        if name is not None and len(name) == 1 and name != "_":
            found.append((getattr(node, "lineno", 0), name))
    return sorted(found)


def test_the_walk_finds_what_it_should_and_spares_comprehensions() -> None:
    source = (
        "def f(a, *, bb=1):\n"
        "    x = [i for i in a]\n"
        "    for k, vv in {}.items(): pass\n"
        "    g = lambda y: y\n"
        "    try: pass\n"
        "    except ValueError as e: pass\n"
        "    _ = {j: j for j in a}\n"
    )
    names = [name for _, name in single_letter_names(source)]
    assert sorted(names) == ["a", "e", "f", "g", "k", "x", "y"]


def test_no_single_letter_names_in_src() -> None:
    grown = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if _exempt(rel):
            continue
        found = single_letter_names(path.read_text(encoding="utf-8"))
        if found:
            where = ", ".join(f"{line}:{name}" for line, name in found)
            grown.append(f"{rel}: {len(found)} single-letter names: {where}")
    assert not grown, "name these in words:\n" + "\n".join(grown)


def test_the_exempt_files_are_the_hashed_ones() -> None:
    for rel in (*_HASHED, *_ENGINE):
        assert (SRC / rel).is_file(), f"{rel} is gone: drop it from tests/test_names.py"
    assert (SRC / "generator").is_dir()
