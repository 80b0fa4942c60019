"""The docs' example cards are current, and python.md's card walk-through runs as written."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from synthetic_runs import example_run

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


def test_python_md_card_walkthrough_runs(tmp_path: Path) -> None:
    text = (DOCS / "python.md").read_text(encoding="utf-8")
    blocks = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "runs/my-study" in b]
    assert blocks
    run = example_run(tmp_path / "run")
    code = blocks[0].replace('Path("runs/my-study")', f"Path({str(run)!r})")
    assert str(run) in code
    exec(compile(code, "python.md", "exec"), {})
    assert (run / "card" / "card.json").is_file() and (run / "card" / "card.md").is_file()


def test_python_md_task_and_study_blocks_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other walk-throughs run as written (a study's folders land in a temporary directory)."""
    text = (DOCS / "python.md").read_text(encoding="utf-8")
    blocks = [
        b
        for b in re.findall(r"```python\n(.*?)```", text, re.S)
        if "generate(" in b or "run_study(" in b
    ]
    assert len(blocks) == 2
    root = Path(__file__).resolve().parent.parent
    monkeypatch.chdir(tmp_path)
    for code in blocks:
        code = code.replace('"preregistrations/', f'"{root}/preregistrations/')
        exec(compile(code, "python.md", "exec"), {})
    assert (tmp_path / "runs" / "smoke" / "run.json").is_file()
    assert (tmp_path / "runs" / "one-cell" / "run.json").is_file()
