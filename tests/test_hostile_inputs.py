"""Every row of docs/commands.md's table of hostile inputs (issue 33): servers that answer nested
without end or past any size, malformed HTTP to the reference endpoint, strings that try to become
Markdown, HTML or terminal control, and places a key can be put. Over the whole table: no exit 70,
no hang, no key written or printed (as written, or spelled in JSON escapes), nothing printed that
drives a terminal, no tag in a rendered card. What each row sends is tests/hostile_inputs.py.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from endpoint_double import serve
from hostile_inputs import KEY_ENV, SCENARIOS, Request, Scenario, preregistration
from markdown_it import MarkdownIt
from test_bad_inputs import alarm
from test_reference_http import exchange

from poisson_tasks.cli import run_cli
from poisson_tasks.reference import ReferenceServer, start_reference_server

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "commands.md"
ROW_SECONDS = 60
INTERNAL_ERROR = 70
_SPELLED = re.compile(rb"\\+u([0-9a-fA-F]{4})")


def _rows() -> list[tuple[str, str, int, str]]:
    text = DOC.read_text(encoding="utf-8")
    block = text.split("<!-- hostile-inputs -->", 1)[1].split("<!-- /hostile-inputs -->", 1)[0]
    rows = re.findall(
        r"^\| `(\w+)`: [^|]* \| `poisson-tasks ([^`]*)` \| (\d+) \| (.*) \|$", block, re.M
    )
    return [(name, command, int(code), becomes) for name, command, code, becomes in rows]


ROWS = _rows()
RUN_ROWS = [row for row in ROWS if not isinstance(SCENARIOS[row[0]], Request)]
HTTP_ROWS = [row for row in ROWS if isinstance(SCENARIOS[row[0]], Request)]


def leaks(blob: bytes, secret: str) -> list[str]:
    """The 8-character pieces of `secret` in `blob`, as written or with every JSON escape read
    as its character."""
    readable = _SPELLED.sub(lambda m: chr(int(m[1], 16)).encode("utf-8", "replace"), blob)
    pieces = {secret[i : i + 8].encode() for i in range(len(secret) - 7)}
    return [p.decode() for p in pieces if p in blob or p in readable]


def first_code(cell: str) -> str:
    """The text of a table cell's first code span (a longer fence allowed), backticks dropped."""
    found = re.search(r"(`+) ?(.+?) ?\1(?!`)", cell)
    assert found is not None, cell
    return found[2].replace("`", "")


def test_the_table_covers_every_scenario_once() -> None:
    names = [row[0] for row in ROWS]
    assert len(names) == len(set(names)) and set(names) == set(SCENARIOS)
    assert len(RUN_ROWS) >= 20 and len(HTTP_ROWS) >= 8


@pytest.mark.parametrize(
    ("name", "command", "code", "becomes"), RUN_ROWS, ids=[r[0] for r in RUN_ROWS]
)
def test_each_run_row(
    name: str,
    command: str,
    code: int,
    becomes: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    scenario = SCENARIOS[name]
    assert isinstance(scenario, Scenario) and command == "run hostile.yaml"
    monkeypatch.setenv(KEY_ENV, scenario.key)
    monkeypatch.chdir(tmp_path)
    printed: list[str] = []
    with serve(scenario.script, scenario.routes) as double:
        Path("hostile.yaml").write_text(yaml.safe_dump(preregistration(scenario, double.base_url)))
        with alarm(ROW_SECONDS):
            rc = run_cli(["run", "hostile.yaml", "--out", scenario.out, "--quiet"])
        captured = capsys.readouterr()
        printed.append(captured.out + captured.err)
        assert rc == code, captured.err
        if code == 2:  # refused: one line, as the table starts it, and no folder
            errors = [line for line in captured.err.splitlines() if line.startswith("error:")]
            assert len(errors) == 1 and errors[0].startswith(first_code(becomes).split(" ...")[0])
            assert not Path(scenario.out).exists()
        folder = Path(scenario.out)
        followers = [
            ["validate", "hostile.yaml"],
            *(
                [
                    ["card", str(folder), "--out", str(folder / "card")],
                    ["card", str(folder)],
                    ["view", str(folder), "--out", "page.html"],
                ]
                if (folder / "run.json").is_file()
                else []
            ),
        ]
        for args in followers:
            with alarm(ROW_SECONDS):
                other = run_cli(args)
            captured = capsys.readouterr()
            printed.append(captured.out + captured.err)
            assert other != INTERNAL_ERROR, (args, captured.err)
    text = "".join(printed)
    assert "Traceback" not in text and "internal error" not in text
    assert "\x1b" not in text and "\u202e" not in text, name
    written = b"".join(
        p.read_bytes()
        for p in sorted(tmp_path.rglob("*"))
        if p.is_file() and p.name != "hostile.yaml"
    )
    assert not leaks(written + text.encode(), scenario.key), name
    for card_md in tmp_path.rglob("card.md"):
        html = MarkdownIt("commonmark").render(card_md.read_text(encoding="utf-8"))
        assert "<script" not in html and "<img" not in html and "<a " not in html, name


@pytest.fixture(scope="module")
def reference() -> Iterator[ReferenceServer]:
    with start_reference_server("127.0.0.1", 0, process=True) as srv:
        yield srv


@pytest.mark.parametrize(
    ("name", "command", "code", "becomes"), HTTP_ROWS, ids=[r[0] for r in HTTP_ROWS]
)
def test_each_http_row(
    name: str, command: str, code: int, becomes: str, reference: ReferenceServer
) -> None:
    request = SCENARIOS[name]
    assert isinstance(request, Request) and command == "serve-reference"
    t0 = time.monotonic()
    data = exchange(reference, request.payload, 2.0)
    assert time.monotonic() - t0 < 2.5
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(f"HTTP/1.1 {code} ".encode()), data[:200]
    message = json.loads(body)["error"]["message"].replace("`", "")
    assert first_code(becomes) in message, message
    healthy = exchange(reference, b"GET /health HTTP/1.1\r\nhost: x\r\n\r\n")
    assert healthy.startswith(b"HTTP/1.1 200 ")
