"""The docs' example cards are current (python.md's blocks are run by tests/test_docs.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
_spec = importlib.util.spec_from_file_location(
    "render_card_examples", ROOT / "scripts" / "render_card_examples.py"
)
assert _spec and _spec.loader
examples = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(examples)


def test_card_examples_are_current() -> None:
    found = 0
    for path in sorted(DOCS.glob("*.md")):
        text = path.read_text(encoding="utf-8")
        found += len(examples.BLOCK.findall(text))
        assert examples.refreshed(text) == text, f"{path.name}: run scripts/render_card_examples.py"
    assert found >= 2
