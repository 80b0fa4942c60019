"""The docs are run (issue 34, item 2): generated examples in docs/ match what this build prints
(hash lines aside, which move with any source edit), and every block of README.md and docs/ that a
user would paste runs as pasted, page by page in a fresh folder, or carries its reason not to
(tests/docs_blocks.py says how blocks are read, run and marked)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from docs_blocks import PAGES, ROOT, Block, DocsFailure, Session, blocks, make_clone, shown_problem

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


# --------------------------------------------------------------------------- pasted blocks


# a file a marker's reason cites as its evidence: tests/x.py, tests/x.py::test_y, scripts/ci/z
CITED = re.compile(r"(?P<path>(?:tests|scripts)/[\w./-]*\w)(?:::(?P<test>\w+))?")


def _kinds(block: Block) -> list[str]:
    if block.python:
        return [block.kind_of("")[0]]
    return [block.kind_of(command)[0] for command, _ in block.commands()]


def _pages(kind: str) -> list[Path]:
    """The pages with at least one command or Python block of `kind` (run, slow)."""
    return [page for page in PAGES if any(kind in _kinds(b) for b in blocks(page))]


def test_every_pasted_block_runs_or_says_why_not() -> None:
    """Every marker parses and sits above a pasted block; every quoted TEXT names a command of
    its block; every block has something to run or its reason; and most of it runs."""
    counts = {"run": 0, "slow": 0, "skip": 0}
    for page in PAGES:
        for block in blocks(page):  # ValueError names a marker that is wrong or stray
            commands = [command for command, _ in block.commands()]
            assert block.python or commands, f"{block.where}: a block with no command"
            for marker in block.markers:
                assert marker.text is None or any(marker.text in c for c in commands), (
                    f"{block.where}: marker on line {marker.line} names {marker.text!r}, "
                    "which no command of the block holds"
                )
                for cited in CITED.finditer(marker.rest):  # a reason's evidence must exist
                    path, test = ROOT / cited["path"], cited["test"]
                    assert path.exists(), f"{block.where}: {cited['path']} does not exist"
                    assert test is None or f"def {test}(" in path.read_text(encoding="utf-8"), (
                        f"{block.where}: {cited['path']} has no {test}"
                    )
            for kind in _kinds(block):
                counts[kind] += 1
    assert counts["run"] >= 40, counts  # a floor: marking blocks skipped is not a way out


@pytest.mark.parametrize("page", _pages("run"), ids=lambda p: str(p.relative_to(ROOT)))
def test_a_pages_blocks_run_as_pasted(page: Path, tmp_path: Path) -> None:
    session = Session(make_clone(tmp_path / "clone"), slow=False)
    for block in blocks(page):
        session.run_block(block)
    assert session.ran >= 1


@pytest.mark.slow
@pytest.mark.parametrize("page", _pages("slow"), ids=lambda p: str(p.relative_to(ROOT)))
def test_a_pages_slow_blocks_run_as_pasted(page: Path, tmp_path: Path) -> None:
    session = Session(make_clone(tmp_path / "clone"), slow=True)
    for block in blocks(page):
        session.run_block(block)


def test_the_harness_catches_a_wrong_value_a_failing_command_and_a_stray_marker(
    tmp_path: Path,
) -> None:
    """What makes the page tests able to fail: each kind of drift is caught."""
    session = Session(make_clone(tmp_path / "clone"), slow=False)
    wrong = blocks_of_text(tmp_path, "```python\nx = 1 + 1\nx  # -> 3\n```\n")
    with pytest.raises(DocsFailure, match="shows 3, the value is 2"):
        session.run_block(wrong[0])
    right = blocks_of_text(tmp_path, "```python\n{'a': 1}  # -> {'a':\n#    1}\n```\n")
    session.run_block(right[0])
    failing = blocks_of_text(tmp_path, "```bash\npoisson-tasks generate nope:x1\n```\n")
    with pytest.raises(DocsFailure, match="exited 2"):
        session.run_block(failing[0])
    skipped = blocks_of_text(
        tmp_path,
        '<!-- docs-test: skip "nope" a command that fails -->\n```bash\n'
        "poisson-tasks generate nope:x1\npoisson-tasks knobs faults\n```\n",
    )
    session.run_block(skipped[0])
    with pytest.raises(ValueError, match="must sit just above a pasted block"):
        blocks_of_text(tmp_path, "<!-- docs-test: skip why -->\n\n```bash\nls\n```\n")
    with pytest.raises(ValueError, match="needs a reason"):
        blocks_of_text(tmp_path, "<!-- docs-test: skip -->\n```bash\nls\n```\n")
    with pytest.raises(ValueError, match="is not one of"):
        blocks_of_text(tmp_path, "<!-- docs-test: maybe later -->\n```bash\nls\n```\n")


def test_a_transcript_is_matched_line_by_line_with_gaps() -> None:
    printed = ["a", "b", "c", "d"]
    assert shown_problem(["a", "b", "...", "d"], printed) is None
    assert shown_problem(["...", "c"], printed) is not None  # d is printed after it
    assert shown_problem(["...", "c", "..."], printed) is None
    assert shown_problem(["b", "..."], printed) is not None  # the output starts with a
    assert shown_problem(["a", "c", "..."], printed) is not None  # not adjacent


def blocks_of_text(tmp_path: Path, text: str) -> list[Block]:
    """The blocks of a page made of `text` (the harness's own tests)."""
    path = tmp_path / "page.md"
    path.write_text(text, encoding="utf-8")
    return blocks(path)
