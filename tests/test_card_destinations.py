"""Where `poisson-tasks card` writes (issue 34, item 1): a run's card goes into its own folder,
RUN_DIR/card/, whether `card` ran the run or was given its folder, and `--out DIR` writes the same
files into DIR too; a destination that would overwrite something else is refused in one line
before anything runs or is written.

The runs are the smoke study against the in-process reference endpoint (a scripted baseline).
"""

from __future__ import annotations

import datetime as real_datetime
import json
from pathlib import Path

import pytest
import yaml

from poisson_tasks.calibration import output
from poisson_tasks.cli import run_cli
from poisson_tasks.runner import folder as run_folder
from poisson_tasks.runner import run_preregistration

ROOT = Path(__file__).resolve().parents[1]
SMOKE = "smoke.yaml"  # the smoke study cut to 8 episodes, written into each test's folder


def _tree(folder: Path) -> dict[str, bytes]:
    """Every file under `folder`, by relative path, with its bytes."""
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def _card(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = run_cli(["card", *argv])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    doc = yaml.safe_load((ROOT / "preregistrations" / "smoke.yaml").read_text())
    doc["design"].update(tasks=2, attempts=1)
    (tmp_path / SMOKE).write_text(yaml.safe_dump(doc, sort_keys=False))
    run_preregistration(SMOKE, tmp_path / "runs" / "s1", show_progress=False)
    return tmp_path


def test_a_new_study_never_writes_its_card_into_another_runs_folder(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's case: `card PREREG --out runs/s1/card` ran a new study and replaced s1's card."""
    assert _card(["runs/s1"], capsys)[0] == 0
    before = _tree(here / "runs")
    rc, out, err = _card([SMOKE, "--out", "runs/s1/card", "--quiet"], capsys)
    assert rc == 2 and out == ""
    assert err.splitlines() == [err.strip()] and err.startswith(
        "error: --out runs/s1/card lies in the run folder runs/s1, which is another run's"
    )
    assert _tree(here / "runs") == before  # no new run, s1's card as it was


def test_card_run_and_card_prereg_write_the_same_files_in_the_same_place(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, printed, err = _card([SMOKE, "--run-dir", "runs/s2", "--quiet"], capsys)
    assert rc == 0
    home = here / "runs" / "s2" / "card"
    assert sorted(p.name for p in home.iterdir()) == ["card.json", "card.md"]
    assert (home / "card.md").read_text() == printed
    assert "runs/s2/card/card.md" in err.splitlines()
    first = _tree(home)
    rc, again, err = _card(["runs/s2"], capsys)  # the same place, the same bytes
    assert rc == 0 and again == printed and _tree(home) == first
    assert err.splitlines() == ["runs/s2/card/card.json", "runs/s2/card/card.md"]
    # a folder `run` made gets its card where `card PREREG` would have put it
    assert not (here / "runs" / "s1" / "card").exists()
    rc, printed, _ = _card(["runs/s1"], capsys)
    assert rc == 0 and (here / "runs" / "s1" / "card" / "card.md").read_text() == printed


def test_out_gets_the_same_files_and_is_refreshed_for_the_same_run(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _card(["runs/s1", "--out", "cards/s1"], capsys)[0] == 0
    assert _tree(here / "cards" / "s1") == _tree(here / "runs" / "s1" / "card")
    assert _card(["runs/s1", "--out", "cards/s1", "--json"], capsys)[0] == 0  # same run: fine
    assert _card(["runs/s1", "--out", "runs/s1/card"], capsys)[0] == 0  # its own card folder


# --out, then the first line `card RUN` and `card PREREG` print (the same line where one is given)
REFUSED = [
    (
        "runs/s1",
        "error: --out runs/s1 is the run folder itself",
        "error: --out runs/s1 lies in the run folder runs/s1, which is another run's",
    ),
    (
        "runs/s2/card",
        "error: --out runs/s2/card lies in the run folder runs/s2, which is another run's",
        None,
    ),
    ("notes", "error: --out notes holds files a card does not write (todo.txt)", None),
    (
        "theirs",
        "error: --out theirs holds a card other than the one in runs/s1/card (another run's",
        "error: --out theirs holds a card other than the one in runs/smoke-",
    ),
    ("file.txt", "error: --out file.txt is a file", None),
]


def test_a_destination_that_would_overwrite_something_is_refused_in_one_line(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_preregistration(SMOKE, here / "runs" / "s2", show_progress=False)
    assert _card(["runs/s2", "--out", "theirs"], capsys)[0] == 0  # another run's card
    (here / "notes").mkdir()
    (here / "notes" / "todo.txt").write_text("mine\n")
    (here / "file.txt").write_text("mine\n")
    before = _tree(here)
    for out, says_run, says_prereg in REFUSED:
        for argv, says in (
            (["runs/s1", "--out", out], says_run),
            ([SMOKE, "--out", out, "--quiet"], says_prereg or says_run),
        ):
            rc, printed, err = _card(argv, capsys)
            assert rc == 2 and printed == "", err
            assert len(err.splitlines()) == 1 and err.startswith(says), err
            assert _tree(here) == before  # nothing written: no card, no new run


def test_a_card_folder_holding_foreign_files_is_refused_too(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = here / "runs" / "s1" / "card"
    home.mkdir()
    (home / "notes.txt").write_text("mine\n")
    rc, printed, err = _card(["runs/s1"], capsys)
    assert rc == 2 and printed == ""
    assert err.startswith("error: runs/s1/card holds files a card does not write (notes.txt)")
    assert sorted(p.name for p in home.iterdir()) == ["notes.txt"]


def test_a_read_only_run_folder_is_carded_and_says_where_its_card_is_not(
    here: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Root may write anywhere, so the run folder's refusal is played by a stand-in."""
    monkeypatch.setattr(output, "_writable", lambda folder: False)
    rc, printed, err = _card(["runs/s1"], capsys)
    assert rc == 0 and printed.startswith("# Reference-policy card")
    assert err.startswith("note: runs/s1 is read-only here: its card is not kept in runs/s1/card")
    assert not (here / "runs" / "s1" / "card").exists()
    for _ in range(2):  # again: the card there is the one about to be written
        rc, _, err = _card(["runs/s1", "--out", "cards/s1"], capsys)
        assert rc == 0 and (here / "cards" / "s1" / "card.json").is_file(), err
    assert json.loads((here / "cards" / "s1" / "card.json").read_text())["provenance"]


def test_two_studies_carded_in_the_same_second_get_two_folders(
    here: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default folder is runs/<name>-<UTC second>: a second `card PREREG` in the same second
    used to be refused, its folder already holding the first run."""

    class Frozen(real_datetime.datetime):
        @classmethod
        def now(cls, tz: real_datetime.tzinfo | None = None) -> Frozen:  # type: ignore[override]
            return cls(2026, 12, 4, 12, 0, 0, tzinfo=tz)

    monkeypatch.setattr(run_folder, "datetime", Frozen)
    for _ in range(2):
        assert _card([SMOKE, "--quiet"], capsys)[0] == 0
    made = sorted(p.name for p in (here / "runs").iterdir())
    assert made == ["s1", "smoke-20261204T120000Z", "smoke-20261204T120000Z-2"]
