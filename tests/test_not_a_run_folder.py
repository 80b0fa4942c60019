"""Every command that reads a run folder says the same thing of a folder that holds no run.

One predicate (runfolder.is_run_folder) and one error (errors.NotARunFolder, worded by
runfolder.not_a_run_folder): the command's own fix ends the line, the rest is shared, so the
five verbs cannot drift apart again (card used to say "is not a run folder: run.json is missing").
"""

from __future__ import annotations

from pathlib import Path

import pytest

from poisson_tasks.cli import run_cli
from poisson_tasks.errors import NotARunFolder
from poisson_tasks.runfolder import is_run_folder, open_run

VERBS = {
    "card": ["card", "{folder}"],
    "view": ["view", "{folder}", "--out", "{tmp}/r.html"],
    "resume": ["run", "--resume", "{folder}"],
    "replay": ["replay", "{folder}", "--sample", "1"],
    "merge": ["merge", "{folder}", "--out", "{tmp}/m"],
}


@pytest.mark.parametrize("kind", ["empty", "missing", "file"])
@pytest.mark.parametrize("verb", sorted(VERBS))
def test_every_verb_names_a_folder_without_a_run_in_the_same_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], verb: str, kind: str
) -> None:
    if verb == "card" and kind != "empty":
        pytest.skip("card's target may be a pre-registration file: it is read as one")
    folder = tmp_path / kind
    if kind == "empty":
        folder.mkdir()
    elif kind == "file":
        folder.write_text("not a run\n")
    argv = [arg.format(folder=folder, tmp=tmp_path) for arg in VERBS[verb]]
    assert run_cli(argv) == 2
    err = capsys.readouterr().err
    reason = {"empty": "run.json is missing", "missing": "no such folder", "file": "not a folder"}
    assert err.startswith(f"error: {folder} is not a run folder ({reason[kind]}): "), err
    assert err.count("\n") == 1
    assert not (tmp_path / "m").exists() and not (tmp_path / "r.html").exists()


def test_open_run_refuses_a_folder_without_a_run_with_its_one_error(tmp_path: Path) -> None:
    assert not is_run_folder(tmp_path)
    with pytest.raises(NotARunFolder, match=r"is not a run folder \(run\.json is missing\): x$"):
        open_run(tmp_path, "x")
