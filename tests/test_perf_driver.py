"""benchmarks/perf.py, the one benchmark driver: its table format, its blocks, its rewrite of
RESULTS.md (only between a block's markers)."""

from __future__ import annotations

from pathlib import Path

import common  # benchmarks/ is on pytest's pythonpath (pyproject.toml), as for a script there
import perf
import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"


ROW = {
    "stage": "card, 4,200 episodes",
    "now": "0.50 s",
    "anchor": "0.45 s",
    "target": "< 0.6 s",
    "ratio": "1.11x",
    "met": False,
    "note": "a|b",
}


def test_table_spells_out_met_and_escapes_pipes() -> None:
    lines = common.rows_table([ROW, {**ROW, "met": True}]).splitlines()
    assert lines[0].startswith("| stage | now | anchor | target |")
    assert lines[1] == "|---|---|---|---|---|---|---|"
    assert "**not met**" in lines[2] and "a\\|b" in lines[2]
    assert "| met |" in lines[3]


def test_every_block_has_its_markers_and_its_script() -> None:
    driver = perf
    results = (BENCHMARKS / "RESULTS.md").read_text(encoding="utf-8")
    for name, block in driver.BLOCKS.items():
        start, stop = results.find(driver.begin(name)), results.find(driver.end(name))
        assert 0 <= start < stop, name
        section = results.rfind("\n## ", 0, start)
        assert results[section + 1 :].startswith(block.section + "\n"), name
        for command in block.commands():
            assert Path(command[1]).is_file(), command


def test_a_block_is_rewritten_and_nothing_else(tmp_path: Path) -> None:
    driver = perf
    text = (
        "# Measured\n\n## Cards (issue 5)\n\nprose before\n\n"
        f"{driver.begin('cards')}\nold table\n{driver.end('cards')}\n\nprose after\n\n"
        "## Later\n\nkeep me too\n"
    )
    updated = driver.replace_block(text, "cards", "| new |\n|---|")
    assert "old table" not in updated
    assert updated == text.replace("old table", "| new |\n|---|")
    with pytest.raises(SystemExit, match="no block view"):
        driver.replace_block(text, "view", "x")


def test_targets_text_counts_the_targets_met_and_lists_failures() -> None:
    text = perf.targets_text([ROW], ["perf_x.py exited 1: boom"])
    assert "**0 of 1 targets met.**" in text
    assert "- perf_x.py exited 1: boom" in text
