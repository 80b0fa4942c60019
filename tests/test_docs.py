"""Generated examples in docs/ match what this build prints (hash lines aside, which move with any source edit)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs"
_spec = importlib.util.spec_from_file_location(
    "render_docs", DOCS.parent / "scripts" / "render_docs.py"
)
assert _spec and _spec.loader
render_docs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(render_docs)


def _stable(text: str) -> list[str]:
    return [
        ln
        for ln in text.splitlines()
        if not ln.startswith(("task ", "engine_hash", "generator_hash", "vocabulary_hash"))
    ]


def test_show_examples_are_current() -> None:
    found = 0
    for path in sorted(DOCS.glob("*.md")):
        text = path.read_text(encoding="utf-8")
        found += len(render_docs.BLOCK.findall(text))
        assert _stable(render_docs.refreshed(text)) == _stable(text), (
            f"{path.name}: run scripts/render_docs.py"
        )
    assert found >= 1
