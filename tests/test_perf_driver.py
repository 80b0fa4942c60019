"""benchmarks/perf.py: its table and its rewrite of RESULTS.md's Performance section."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def _driver() -> ModuleType:
    spec = importlib.util.spec_from_file_location("perf_driver", ROOT / "benchmarks" / "perf.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
    text = _driver().table([ROW, {**ROW, "met": True}])
    lines = text.splitlines()
    assert lines[0].startswith("| stage | now | anchor | target |")
    assert "**not met**" in lines[2] and "a\\|b" in lines[2]
    assert "| met |" in lines[3]


def test_write_section_replaces_only_its_own_section(tmp_path: Path) -> None:
    driver = _driver()
    results = tmp_path / "RESULTS.md"
    results.write_text(
        "# Measured\n\n## Cards\n\nkeep me\n\n## Performance (issue 15)\n\nold table\n\n"
        "## Later\n\nkeep me too\n",
        encoding="utf-8",
    )
    driver.write_section(driver.section([ROW], [], ["--write"]), results)
    text = results.read_text(encoding="utf-8")
    assert "old table" not in text
    assert text.count("## Performance (issue 15)") == 1
    assert "keep me\n" in text and "keep me too" in text
    assert "0 of 1 targets met" in text and "`python benchmarks/perf.py --write`" in text
    assert text.index("## Cards") < text.index("## Performance") < text.index("## Later")


def test_write_section_appends_when_absent(tmp_path: Path) -> None:
    driver = _driver()
    results = tmp_path / "RESULTS.md"
    results.write_text("# Measured\n\n## Cards\n\nkeep me\n", encoding="utf-8")
    driver.write_section(driver.section([ROW], ["perf_x.py exited 1: boom"], []), results)
    text = results.read_text(encoding="utf-8")
    assert text.startswith("# Measured\n\n## Cards\n\nkeep me\n\n## Performance (issue 15)")
    assert "- perf_x.py exited 1: boom" in text
