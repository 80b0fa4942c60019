"""Every row of docs/commands.md's table of bad inputs, run in this process through the CLI's own
entry (cli.run_cli): the exit status, exactly one line on stderr and it an `error:` line starting
as shown, no traceback, no hang (each row under a 10 s alarm), and nothing written anywhere: the
table's folder and the folder above it hold the same entries, sizes and times before and after.
The files and folders the rows name are made by tests/bad_input_files.py."""

from __future__ import annotations

import os
import re
import shlex
import signal
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

import pytest
from bad_input_files import make

from poisson_tasks.cli import run_cli

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "commands.md"
ROW_SECONDS = 10


def _rows() -> list[tuple[str, int, str]]:
    text = DOC.read_text(encoding="utf-8")
    block = text.split("<!-- bad-inputs -->", 1)[1].split("<!-- /bad-inputs -->", 1)[0]
    rows = re.findall(r"^\| `poisson-tasks ([^`]*)` \| (\d+) \| `(.*)` … \|$", block, re.M)
    return [(cmd, int(code), first.replace("\\|", "|")) for cmd, code, first in rows]


ROWS = _rows()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("bad") / "table"
    d.mkdir()
    make(d)
    return d


def snapshot(folder: Path, depth: int) -> dict[str, tuple[int, int, int]]:
    """Every entry under `folder` (to `depth` levels, links not followed, FIFOs never opened):
    its type, size and modification time."""
    out: dict[str, tuple[int, int, int]] = {}
    for entry in os.scandir(folder):
        st = entry.stat(follow_symlinks=False)
        out[entry.path] = (stat.S_IFMT(st.st_mode), st.st_size, st.st_mtime_ns)
        if depth > 1 and entry.is_dir(follow_symlinks=False):
            out.update(snapshot(Path(entry.path), depth - 1))
    return out


class RowHung(Exception):
    """A row that ran past ROW_SECONDS."""


@contextmanager
def alarm(seconds: int) -> Iterator[None]:
    def ring(signum: int, frame: FrameType | None) -> None:
        raise RowHung(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_the_table_has_its_rows() -> None:
    assert len(ROWS) >= 100
    assert len({cmd for cmd, _, _ in ROWS}) == len(ROWS)  # each row once


@pytest.mark.parametrize(("command", "code", "first"), ROWS, ids=[r[0] for r in ROWS])
def test_each_row(
    workdir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: str,
    code: int,
    first: str,
) -> None:
    monkeypatch.chdir(workdir)
    before = snapshot(workdir, 3), snapshot(workdir.parent, 1)
    with alarm(ROW_SECONDS):
        rc = run_cli(shlex.split(command))
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert rc == code, captured.err
    assert len(lines) == 1, captured.err  # one line, and it the error
    assert lines[0].startswith("error: ") and lines[0].startswith(first), lines[0]
    assert "Traceback" not in captured.err + captured.out
    assert (snapshot(workdir, 3), snapshot(workdir.parent, 1)) == before  # nothing written
