"""A run.json edited after its run is refused by every reader, in one line naming the field.

A card decides with the header's thresholds, arms, seeds and attempts; each is a copy of what the
pre-registration stored beside it registers, and that document is held to its own hash
(runfolder.check_header). The folders here are synthetic (synthetic_runs: outcomes chosen by the
test, no model's results): their headers are laid out as the runner writes them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from synthetic_runs import full_run, line, write_run
from synthetic_runs import header as synthetic_header

from poisson_tasks.bundle import digest
from poisson_tasks.calibration import card_from_run
from poisson_tasks.cli import run_cli
from poisson_tasks.errors import CardRefusal, RunFolderError
from poisson_tasks.runfolder import HEADER, read_header

ARMS = ["depth:d1", "depth:d3"]
TASKS = 10


def _no_calls(folder: Path) -> Path:
    """Every episode passes, but 3 of each arm's 10 tasks made no tool call: 0.3 of the scored
    episodes, over the default no-call limit of 0.1, so the card is refused."""
    lines = [
        line(
            arm,
            seed,
            0,
            "wrong_state" if seed < 3 else "passed",
            tool_calls=0 if seed < 3 else None,
        )
        for arm in ARMS
        for seed in range(TASKS)
    ]
    return write_run(folder, synthetic_header(ARMS, range(TASKS), 1), lines)


def _edit(folder: Path, change: Callable[[dict[str, Any]], None], rehash: bool = False) -> None:
    header = json.loads((folder / HEADER).read_text())
    change(header)
    if rehash:  # a forgery that keeps the document and its hash consistent
        header["preregistration_hash"] = digest(header["preregistration"])
    (folder / HEADER).write_text(json.dumps(header))


def test_an_edited_threshold_no_longer_turns_a_refused_card_into_a_published_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _no_calls(tmp_path / "run")
    with pytest.raises(CardRefusal, match=r"more than 0\.1 of the scored episodes made no tool"):
        card_from_run(folder)
    _edit(folder, lambda h: h["thresholds"].update(no_call_max=0.9))
    with pytest.raises(RunFolderError) as info:
        card_from_run(folder)
    assert str(info.value) == (
        f"{folder / HEADER}: thresholds.no_call_max is 0.9 but its pre-registration registered "
        "0.1: run.json was changed after its run; restore it as its run wrote it, or register "
        "the change in a new pre-registration and run that"
    )
    assert run_cli(["card", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {folder / HEADER}: thresholds.no_call")


def _drop_last(key: str) -> Callable[[dict[str, Any]], None]:
    return lambda h: h.update({key: h[key][:-1]})


def _set_in(*path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(header: dict[str, Any]) -> None:
        node = header
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return change


EDITS: list[tuple[str, Callable[[dict[str, Any]], None], bool, str]] = [
    (
        "the document's threshold, its hash kept",
        _set_in("preregistration", "thresholds", value={"no_call_max": 0.9}),
        False,
        "preregistration_hash is not the hash of the pre-registration it stores",
    ),
    (
        "both thresholds, the hash kept",
        lambda h: (
            h["thresholds"].update(no_call_max=0.9),
            h["preregistration"].update(thresholds={"no_call_max": 0.9}),
        ),
        False,
        "preregistration_hash is not the hash",
    ),
    ("an arm dropped", _drop_last("arms"), False, "arms are not the ones its pre-registration"),
    ("a seed dropped", _drop_last("seeds"), False, "seeds or seed_list_hash are not the ones"),
    ("the seed list's hash", _set_in("seed_list_hash", value="0" * 64), False, "seed_list_hash"),
    ("attempts", _set_in("attempts", value=2), False, "attempts is 2 but its pre-registration"),
    (
        "the concurrency a card prints, its document as a run writes it (execution registered)",
        lambda h: (
            h["preregistration"].update(execution={"concurrency": h["concurrency"]}),
            h.update(concurrency=64),
        ),
        True,
        "concurrency is 64 but its pre-registration registered 4",
    ),
    ("the hash", _set_in("preregistration_hash", value="0" * 64), False, "preregistration_hash"),
    (
        "a session renumbered",
        lambda h: h["sessions"][0].update(index=3),
        False,
        "sessions are not numbered 0, 1, 2",
    ),
    (
        "a document of a billion attempts, rehashed",
        _set_in("preregistration", "design", "attempts", value=10**9),
        True,
        "preregistration.design.attempts 1000000000 is outside 1 to 1,000",
    ),
    (
        "a document of 10^12 tasks, rehashed",
        _set_in("preregistration", "design", "tasks", value=10**12),
        True,
        "preregistration.design.tasks 1000000000000 is outside 1 to 100,000",
    ),
    (
        "a document whose design is not a mapping, rehashed",
        _set_in("preregistration", "design", value=[1]),
        True,
        "preregistration.design is not a mapping",
    ),
    (
        "a shard record stuck on a whole run",
        _set_in(
            "shard",
            value={
                "index": 0,
                "count": 10**12,
                "rule": "r",
                "plan_hash": "p",
                "slots": 1,
                "slots_sha256": "s",
                "budget": {},
            },
        ),
        False,
        "shard.count 1000000000000 is not 1 to the plan's 20 tasks",
    ),
]


@pytest.mark.parametrize(
    ("what", "change", "rehash", "says"), EDITS, ids=[edit[0] for edit in EDITS]
)
def test_each_edit_alone_is_refused_by_every_reader(
    tmp_path: Path, what: str, change: Callable[[dict[str, Any]], None], rehash: bool, says: str
) -> None:
    folder = full_run(tmp_path / "run", ARMS, range(TASKS), 1, lambda *_: "passed")
    card_from_run(folder)  # as written, it cards
    _edit(folder, change, rehash)
    for read in (read_header, card_from_run):
        with pytest.raises(RunFolderError) as info:
            read(folder)
        message = str(info.value)
        assert message.startswith(f"{folder / HEADER}: ") and says in message, message
        assert "\n" not in message


def test_every_header_the_runner_writes_holds(finished_run: Any) -> None:
    """A real run's run.json (the reference endpoint on loopback) reads as written, and so do the
    published cards' (calibration/)."""
    assert read_header(finished_run.folder).preregistration_hash
    for published in sorted((Path(__file__).resolve().parents[1] / "calibration").glob("*/")):
        assert read_header(published).sessions
