"""Issue 21's inputs, one test per defect (items 4 to 11): each refused in one line before
anything is written, or recorded as what happened. The table of bad inputs (test_bad_inputs.py)
runs the same refusals row by row; these tests hold what a row cannot show."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx2
import pytest
import yaml
from endpoint_double import Answer, Seen, serve
from test_real_endpoints import lines_of, prereg
from typer.testing import CliRunner

from poisson_tasks import runfolder
from poisson_tasks.calibration import card_from_run, render_document
from poisson_tasks.cli import app, run_cli
from poisson_tasks.errors import RunFolderError, escape_controls
from poisson_tasks.pins.plan import MAX_WORKERS
from poisson_tasks.prereg import load_preregistration, url_form_problems
from poisson_tasks.runfolder import EPISODES, HEADER, read_header
from poisson_tasks.runner import run_preregistration
from poisson_tasks.runner.endpoint import checked_usage

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "preregistrations" / "smoke.yaml"
cli = CliRunner()


def _smoke(tmp_path: Path, **top: Any) -> Path:
    doc = yaml.safe_load(SMOKE.read_text(encoding="utf-8"))
    for key, value in top.items():
        section, _, field = key.partition("__")
        if field:
            doc[section][field] = value
        else:
            doc[section] = value
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A finished run of the smoke study cut to 2 tasks x 1 attempt (8 episodes), and its file."""
    d = tmp_path_factory.mktemp("small")
    doc = yaml.safe_load(SMOKE.read_text(encoding="utf-8"))
    doc["design"].update(tasks=2, attempts=1)
    path = d / "small.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    assert run_cli(["run", str(path), "--out", str(d / "run"), "--quiet"]) == 0
    return path, d / "run"


def _copy(small_run: tuple[Path, Path], tmp_path: Path) -> Path:
    return Path(shutil.copytree(small_run[1], tmp_path / "run"))


def _one_error(res: Any) -> str:
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return str(lines[0])


# ------------------------------------------------------------------ 4: base_url's form

BAD_URLS = [
    ("http://127.0.0.1:99999/v1", "port 99999 is outside 1..65535"),
    ("http://[::1/v1", "is not a valid [IPv6] address"),
    ("http://[zz]:80/v1", "is not a valid [IPv6] address"),
    ("http://127.0.0.1:8000/v1\r\nX-Injected: 1", "control character"),
    ("http://", "has no host"),
    ("http://127.0.0.1:0\u00b9/v1", "the port is not a number"),  # the fuzz's: '¹'.isdigit()
]


@pytest.mark.parametrize(("url", "fragment"), BAD_URLS)
def test_a_base_url_no_client_can_use_is_refused_at_validate_and_run(
    tmp_path: Path, url: str, fragment: str
) -> None:
    served = {"provider": "openai-compatible", "model": "m", "base_url": url}
    path = _smoke(tmp_path, model=served)
    first = _one_error(cli.invoke(app, ["validate", str(path)]))
    assert first.startswith("error: model.base_url: ") and fragment in first
    assert "\r" not in first and "X-Injected" not in first  # the URL itself is never echoed
    res = cli.invoke(app, ["run", str(path), "--out", str(tmp_path / "run")])
    assert res.exit_code == 2 and _one_error(res) == first
    assert not (tmp_path / "run").exists()


def test_every_url_validate_accepts_is_one_the_http_client_takes() -> None:
    for url in ("http://127.0.0.1:8000/v1", "http://[::1]:8000/v1", "https://api.example.com/v1"):
        assert url_form_problems(url) == []
        assert httpx2.URL(url).host


# ------------------------------------------------------------------ 5: files read within bounds


@pytest.mark.parametrize("target", ["dir", "/dev/zero", "fifo"])
def test_own_tools_that_are_not_a_file_are_refused_at_once(tmp_path: Path, target: str) -> None:
    if target == "dir":
        (tmp_path / "dir").mkdir()
    if target == "fifo":
        os.mkfifo(tmp_path / "fifo")
    path = _smoke(tmp_path, design__own_tools=target)
    first = _one_error(cli.invoke(app, ["validate", str(path)]))
    assert first.startswith(f"error: design.own_tools: {target}: is a ") and "not a file" in first


@pytest.mark.parametrize("kind", ["zero", "fifo"])
def test_card_and_resume_refuse_an_endless_episodes_file(
    tmp_path: Path, small_run: tuple[Path, Path], kind: str
) -> None:
    folder = _copy(small_run, tmp_path)
    (folder / EPISODES).unlink()
    if kind == "zero":
        (folder / EPISODES).symlink_to("/dev/zero")
    else:
        os.mkfifo(folder / EPISODES)
    header = (folder / HEADER).read_bytes()
    for argv in (["card", str(folder)], ["run", "--resume", str(folder)]):
        res = cli.invoke(app, argv)
        assert res.exit_code == 2 and "episodes.jsonl" in _one_error(res)
    assert (folder / HEADER).read_bytes() == header


def test_a_line_longer_than_its_limit_is_refused(
    tmp_path: Path, small_run: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _copy(small_run, tmp_path)
    longest = max(len(x) for x in (folder / EPISODES).read_bytes().splitlines(keepends=True))
    monkeypatch.setattr(runfolder.episodes, "LINE_MAX_BYTES", longest - 1)  # the lines' reader
    with pytest.raises(RunFolderError, match="holds a line longer than"):
        list(runfolder.iter_episodes(folder))


# ------------------------------------------------------------------ 6: a name is a safe slug


@pytest.mark.parametrize("name", ["../../escaped", "/tmp/escaped-abs", "a\x00b", "a/b", ".."])
def test_a_name_that_is_not_a_safe_folder_name_is_refused_and_nothing_escapes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    path = _smoke(tmp_path, name=name)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    res = cli.invoke(app, ["run", str(path), "--quiet"])  # no --out: runs/<name>-<time>
    assert res.exit_code == 2 and _one_error(res).startswith("error: name: not a safe name")
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
    assert not list(Path("/tmp").glob("escaped-abs*"))


# ------------------------------------------------------------------ 7: --workers bounded, no orphans


def test_workers_are_bounded_with_the_bound_in_the_message() -> None:
    res = cli.invoke(app, ["generate", "--arms", "depth:d1,depth:d3", "--workers", "100000"])
    assert res.exit_code == 2 and f"give 1 to {MAX_WORKERS} processes" in _one_error(res)


def _children(pid: int) -> set[int]:
    out: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text()
        out |= {int(x) for x in text.split()}
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
def test_pin_workers_end_when_their_parent_is_killed() -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "poisson_tasks",
            "generate",
            "--arms",
            "depth:d1,depth:d3,depth:d5",
            "--seeds",
            "0-5000",
            "--workers",
            "3",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        workers: set[int] = set()
        deadline = time.monotonic() + 120
        while len(workers) < 3 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
            workers = _children(proc.pid)
        assert len(workers) >= 3, "the pool never started"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 30
        while any(_alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [w for w in workers if _alive(w)], "workers outlived their parent"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# ------------------------------------------------------------------ 8: control characters escaped


def test_a_key_with_a_newline_cannot_print_a_second_error_line(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(SMOKE.read_text(encoding="utf-8") + '"x\\nerror: forged\\e[2J": 1\n')
    first = _one_error(cli.invoke(app, ["validate", str(path)]))
    assert first.startswith("error: x\\nerror: forged\\x1b[2J: unknown key")
    assert escape_controls("a\nb\r\x00\x1b\u2028\u202ec\tok é") == (
        "a\\nb\\r\\x00\\x1b\\u2028\\u202ec\\tok é"
    )


# ------------------------------------------------------------------ 9: usage counts that are not counts


@pytest.mark.parametrize(
    "usage",
    [
        {"prompt_tokens": "1000", "completion_tokens": -50},
        {"prompt_tokens": 12.5, "completion_tokens": True},
        {"prompt_tokens": -1, "completion_tokens": 2**60},
        {"prompt_tokens": None, "completion_tokens": [3]},
    ],
)
def test_usage_counts_that_are_not_counts_are_estimated_and_disclosed(
    tmp_path: Path, usage: dict[str, Any]
) -> None:
    def script(seen: Seen, oracle: dict[str, Any]) -> Answer:
        return Answer(200, {**oracle, "usage": usage})

    with serve(script) as double:
        run_preregistration(
            prereg(tmp_path, double.base_url), tmp_path / "run", show_progress=False
        )
    (line,) = lines_of(tmp_path / "run")
    u = line.usage
    assert line.outcome == "passed"
    assert isinstance(u.uncached_input_tokens, int) and 100 < u.uncached_input_tokens < 100_000
    assert isinstance(u.completion_tokens, int) and 0 <= u.completion_tokens < 10_000
    assert u.estimated_tokens == u.uncached_input_tokens + u.completion_tokens
    assert u.first_request_tokens is None  # the server's count was no count
    card = render_document(card_from_run(tmp_path / "run"))
    assert "tokens estimated with the pinned tokenizer" in card and "(100.0% of all tokens)" in card


def test_a_valid_count_is_kept_and_only_the_other_estimated() -> None:
    usage, missing = checked_usage(
        {
            "prompt_tokens": 40,
            "completion_tokens": "7",
            "prompt_tokens_details": {"cached_tokens": 99},
        }
    )
    assert usage == {"prompt_tokens": 40} and missing == ("completion_tokens",)


# ------------------------------------------------------------------ 10: a drip keeps every attempt


def test_a_drip_cut_by_the_episode_clock_keeps_every_attempt(tmp_path: Path) -> None:
    def script(seen: Seen, oracle: dict[str, Any]) -> Answer:
        return Answer(200, oracle, trickle_bps=8)  # never finishes within a request's deadline

    with serve(script) as double:
        path = prereg(
            tmp_path,
            double.base_url,
            execution={"request_timeout_s": 0.3, "max_retries": 50, "episode_timeout_s": 1.5},
        )
        summary = run_preregistration(path, tmp_path / "run", show_progress=False)
    (line,) = lines_of(tmp_path / "run")
    assert line.outcome == "wall_timeout"
    retries = line.transcript["retries"]
    assert retries >= 2 and retries == summary.retries  # the record agrees with the summary
    failed = line.transcript["failed_responses"]
    assert len(failed) >= retries and all(f["kind"] == "timeout" for f in failed)


# ------------------------------------------------------------------ 11: resume checks like card


def test_resume_refuses_a_folder_card_would_refuse_and_writes_nothing(
    tmp_path: Path, small_run: tuple[Path, Path]
) -> None:
    folder = _copy(small_run, tmp_path)
    lines = (folder / EPISODES).read_bytes().splitlines(keepends=True)
    # lines are written as episodes end, so the first depth:d2 line need not be the file's first
    first = next(i for i, raw in enumerate(lines) if b'"depth:d2"' in raw)
    outside = [*lines]
    outside[first] = lines[first].replace(b'"depth:d2"', b'"depth:d9"', 1)
    damaged = {"outside": b"".join(outside), "twice": b"".join(lines) + lines[0]}
    assert load_preregistration(small_run[0]).arms[0] == "depth:d2"
    for name, data in damaged.items():
        (folder / EPISODES).write_bytes(data)
        header = (folder / HEADER).read_bytes()
        card = cli.invoke(app, ["card", str(folder)])
        resume = cli.invoke(app, ["run", "--resume", str(folder), "--quiet"])
        assert card.exit_code == resume.exit_code == 2, name
        card_line, resume_line = _one_error(card), _one_error(resume)
        assert card_line.split(": ", 2)[2] == resume_line.split(": ", 2)[2], name
        assert (folder / HEADER).read_bytes() == header
        assert (folder / EPISODES).read_bytes() == data
        assert len(read_header(folder).sessions) == 1


def test_an_unexpected_error_is_one_line_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(name: str | None) -> str:
        raise ValueError("a bug\nerror: and a forged line")

    monkeypatch.setattr("poisson_tasks.knobtable.render_knobs", broken)
    assert run_cli(["knobs"]) == 70
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: internal error (ValueError: a bug)")
