"""The published cards' tasks regenerated (calibration/regenerated.py): the spec's check that
regenerates all 840 tasks of each card and compares them with what its records hold.

The slow test runs it on the shipped cards (CI's slow step); the fast ones hold its rules on a
small synthetic folder whose records carry real task ids and opening messages (no model ran).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from synthetic_runs import header, line, write_run

from poisson_tasks.calibration.manifest import read_manifest
from poisson_tasks.calibration.regenerated import check_published_tasks, check_tasks
from poisson_tasks.generator import generate
from poisson_tasks.hashes import generator_hash
from poisson_tasks.runfolder import EpisodeLine

ARMS = ("depth:d1", "depth:d1+h8")
SEEDS = (0, 1)  # synthetic headers derive their seeds from "range"


def _line(arm: str, seed: int, attempt: int, **change: Any) -> EpisodeLine:
    """An episode line holding the real task's id and opening messages, then a reply."""
    bundle = generate(arm, seed)
    opening = bundle.messages()
    transcript = {
        "messages": [*opening, {"role": "assistant", "content": "Done."}],
        "opening_messages": len(opening),
    }
    return line(arm, seed, attempt).model_copy(
        update={"task_id": bundle.task_id, "transcript": transcript, **change}
    )


def _folder(tmp_path: Path, lines: list[EpisodeLine], gen: str | None = None) -> Path:
    head = header(ARMS, SEEDS, 2, generator_hash=gen or generator_hash())
    return write_run(tmp_path / "run", head, lines)


def _all() -> list[EpisodeLine]:
    return [_line(a, s, t) for a in ARMS for s in SEEDS for t in range(2)]


def test_a_folder_of_this_builds_tasks_passes(tmp_path: Path) -> None:
    result = check_tasks(_folder(tmp_path, _all()))
    assert result.ok, result.describe()
    assert (result.arms, result.seeds, result.tasks, result.records) == (2, 2, 4, 8)
    assert result.describe().startswith("its 4 tasks (2 arms × 2 seeds) regenerate on this build")


def test_a_record_with_another_task_id_is_named(tmp_path: Path) -> None:
    lines = _all()
    lines[5] = lines[5].model_copy(update={"task_id": "0" * 64})
    result = check_tasks(_folder(tmp_path, lines))
    assert not result.ok and result.other_ids == [f"{lines[5].arm_id} seed {lines[5].seed}"]
    assert result.other_text == []
    assert "1 of its 4 tasks (2 arms × 2 seeds) regenerated with another task id" in (
        result.describe()
    )


def test_a_record_whose_opening_messages_differ_is_named(tmp_path: Path) -> None:
    lines = _all()
    transcript = dict(lines[2].transcript)
    messages = [dict(m) for m in transcript["messages"]]
    messages[1]["content"] += " Quickly."
    lines[2] = lines[2].model_copy(update={"transcript": {**transcript, "messages": messages}})
    result = check_tasks(_folder(tmp_path, lines))
    assert not result.ok and result.other_ids == []
    assert result.other_text == [f"{lines[2].arm_id} seed {lines[2].seed}"]


def test_missing_and_unplanned_tasks_are_named(tmp_path: Path) -> None:
    lines = [ln for ln in _all() if (ln.arm_id, ln.seed) != ("depth:d1+h8", 1)]
    lines.append(_line("depth:d1", 5, 0))
    result = check_tasks(_folder(tmp_path, lines))
    assert result.unrecorded == ["depth:d1+h8 seed 1"]
    assert result.unplanned == ["depth:d1 seed 5"]
    assert not result.ok


def test_a_card_made_by_another_generator_is_not_current(tmp_path: Path) -> None:
    result = check_tasks(_folder(tmp_path, _all(), gen="a" * 64))
    assert not result.ok
    text = result.describe()
    assert text.startswith(
        f"it was made by generator aaaaaaaaaaaa, this build is {generator_hash()[:12]}"
    )
    assert text.endswith("every task regenerates with the same text: re-run the card on this build")


def test_an_unreadable_card_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text(
        '{"cards": ["reference-x"], "format": "poisson-tasks/published@1"}'
    )
    (check,) = check_published_tasks(tmp_path)
    assert not check.ok and check.message.startswith(
        "published card reference-x: tasks not checked:"
    )


@pytest.mark.slow
def test_every_published_card_regenerates_its_840_tasks() -> None:
    checks = check_published_tasks()
    assert [c.name for c in checks] == read_manifest() and len(checks) == 3
    for check in checks:
        assert check.ok, check.message
        assert "its 840 tasks (14 arms × 60 seeds) regenerate on this build" in check.message
        assert "each of its 4,200 records holds" in check.message
