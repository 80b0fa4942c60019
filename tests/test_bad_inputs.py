"""Every row of docs/commands.md's table of bad inputs: the exit status and the first line."""

from __future__ import annotations

import copy
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from poisson_tasks.cli import run_cli
from poisson_tasks.prereg import load_preregistration
from poisson_tasks.runfolder import EPISODES
from poisson_tasks.runner.folder import RunFolder

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "commands.md"
SMOKE = ROOT / "preregistrations" / "smoke.yaml"


def _rows() -> list[tuple[str, int, str]]:
    text = DOC.read_text(encoding="utf-8")
    block = text.split("<!-- bad-inputs -->", 1)[1].split("<!-- /bad-inputs -->", 1)[0]
    rows = re.findall(r"^\| `poisson-tasks ([^`]*)` \| (\d+) \| `(.*)` … \|$", block, re.M)
    return [(cmd, int(code), first) for cmd, code, first in rows]


ROWS = _rows()


def _edit(doc: dict[str, Any], path: str, value: Any) -> str:
    out = copy.deepcopy(doc)
    *head, last = path.split(".")
    node = out
    for key in head:
        node = node.setdefault(key, {})
    node[last] = value
    return yaml.safe_dump(out, sort_keys=False)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("bad")
    text = SMOKE.read_text(encoding="utf-8")
    doc = yaml.safe_load(text)
    (d / "smoke.yaml").write_text(text, encoding="utf-8")
    (d / "latin1.yaml").write_bytes(text.replace("name:", "name: caf\xe9 #", 1).encode("latin-1"))
    (d / "binary.yaml").write_bytes(bytes(range(256)) * 16)
    (d / "big.yaml").write_bytes(b"#" * (1 << 20) + b"\n")
    (d / "alias.yaml").write_text("a: &x [1, 2]\nb: *x\n")
    (d / "dup.yaml").write_text(text + "\nname: again\n")
    (d / "tasks.yaml").write_text(_edit(doc, "design.tasks", 10**9))
    (d / "attempts.yaml").write_text(_edit(doc, "design.attempts", 10**12))
    (d / "wide.yaml").write_text(_edit(doc, "design.tasks", 2**64))
    (d / "digits.yaml").write_text(text.replace("tasks:", "tasks: " + "9" * 5000 + " #", 1))
    (d / "nan.yaml").write_text(_edit(doc, "budget.wall_clock_s", float("nan")))
    (d / "resolution.yaml").write_text(_edit(doc, "thresholds.resolution", 1e-300))
    (d / "arm.yaml").write_text(_edit(doc, "design.arms", ["history:t50"]))
    plan = load_preregistration(SMOKE)
    for name in ("empty", "torn"):
        RunFolder.create(d / name, plan, {}).close("interrupted", "made by the test")
    (d / "torn" / EPISODES).unlink()
    (d / "torn" / EPISODES).mkdir()
    return d


def test_the_table_has_its_rows() -> None:
    assert len(ROWS) >= 25


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
    rc = run_cli(shlex.split(command))
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert rc == code, err
    assert lines, "nothing on stderr"
    assert lines[0].startswith(first), lines[0]
    assert "Traceback" not in err
    assert len(lines) == 1 or command.startswith("validate"), err  # validate: one per problem
