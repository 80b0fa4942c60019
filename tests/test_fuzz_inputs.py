"""Fuzzing every user input (slow suite): only the project's typed error or success, each fast.

Over the pre-registration loader (random bytes and YAML-shaped edits of the smoke file),
parse_arm_id, seed ranges, CLI flags, base URLs (one validate accepts is one the HTTP client
takes), tool files, and damaged episode lines read by `card` and by `run --resume`'s check;
2,500 examples each (400 for the run folders), every example under 2 s (hypothesis's deadline).
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import shlex
from pathlib import Path

import httpx2
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from poisson_tasks.arms import parse_arm_id
from poisson_tasks.cli import run_cli
from poisson_tasks.errors import PoissonError, PreregistrationError, RunFolderError, ToolFileError
from poisson_tasks.owntools import load_tool_file
from poisson_tasks.pins.plan import parse_seeds
from poisson_tasks.prereg import Plan, load_preregistration, validate_preregistration
from poisson_tasks.runfolder import EPISODES, EpisodeLine
from poisson_tasks.runner.folder import RunFolder

pytestmark = pytest.mark.slow
SMOKE = Path(__file__).resolve().parents[1] / "preregistrations" / "smoke.yaml"
DOC = yaml.safe_load(SMOKE.read_text(encoding="utf-8"))
FAST = settings(
    max_examples=int(os.environ.get("POISSON_FUZZ_EXAMPLES", "2500")),
    deadline=2000,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
VALUES = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.none(),
    st.booleans(),
    st.lists(st.integers(), max_size=4),
)
FIELDS = [(s, k) for s, sec in DOC.items() if isinstance(sec, dict) for k in sec]


@FAST
@given(data=st.one_of(st.binary(max_size=2000), st.text(max_size=2000).map(str.encode)))
def test_loader_on_random_bytes(tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    path = tmp_path_factory.mktemp("f") / "p.yaml"
    path.write_bytes(data)
    with contextlib.suppress(PoissonError):
        load_preregistration(path)


@FAST
@given(edits=st.lists(st.tuples(st.sampled_from(FIELDS), VALUES), min_size=1, max_size=4))
def test_loader_on_edited_fields(
    tmp_path_factory: pytest.TempPathFactory, edits: list[tuple[tuple[str, str], object]]
) -> None:
    doc = yaml.safe_load(SMOKE.read_text(encoding="utf-8"))
    for (section, key), value in edits:
        doc[section][key] = value
    path = tmp_path_factory.mktemp("f") / "p.yaml"
    path.write_text(yaml.safe_dump(doc))
    with contextlib.suppress(PoissonError):
        load_preregistration(path)


@FAST
@given(
    text=st.one_of(
        st.text(max_size=80),
        st.from_regex(
            r"[a-z]{2,10}:[a-z][0-9]{1,15}(\+h[0-9]{1,4}|\+len\([a-z][0-9]{1,6}\))?(@k[0-9]{1,3})?(/train)?(/leaky)?",
            fullmatch=True,
        ),
    )
)
def test_parse_arm_id(text: str) -> None:
    with contextlib.suppress(PoissonError):
        parse_arm_id(text)


@FAST
@given(
    text=st.one_of(
        st.text(max_size=40),
        st.from_regex(r"[0-9]{1,25}(-[0-9]{1,25})?(,[0-9]{1,6})*", fullmatch=True),
    )
)
def test_seed_ranges(text: str) -> None:
    with contextlib.suppress(PoissonError):
        parse_seeds(text)


FLAGS = [
    "--seed",
    "--seeds",
    "--arms",
    "--workers",
    "--port",
    "--bogus",
    "--json",
    "--out",
    "--resume",
]


@FAST
@given(
    verb=st.sampled_from(["generate", "knobs", "validate", "nope", "run"]),
    args=st.lists(st.one_of(st.sampled_from(FLAGS), st.text(max_size=12)), max_size=4),
)
def test_cli_flags(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    verb: str,
    args: list[str],
) -> None:
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))
    if verb == "run" and not any(a.startswith("-") for a in args) and args:
        return  # a run with a file argument would run a study: flags and bad values only
    rc = run_cli([verb, *args])
    assert isinstance(rc, int), shlex.join([verb, *args])


# ------------------------------------------------------------------ URLs, tool files, episode lines

URL_PARTS = st.builds(
    lambda scheme, host, port, path: f"{scheme}{host}{port}{path}",
    st.sampled_from(["http://", "https://", "http:/", "ftp://", ""]),
    st.one_of(
        st.sampled_from(
            ["127.0.0.1", "localhost", "[::1]", "[zz]", "[::1", "a:b", "", "münchen.de"]
        ),
        st.text(max_size=12),
    ),
    st.one_of(
        st.just(""),
        st.integers(-5, 10**6).map(lambda p: f":{p}"),
        st.text(max_size=6).map(":".__add__),
    ),
    st.one_of(st.just("/v1"), st.text(max_size=12)),
)


@FAST
@given(url=st.one_of(URL_PARTS, st.text(max_size=80)))
def test_base_urls(url: str) -> None:
    """A base URL validate accepts is one the HTTP client takes; any other is one line."""
    doc = copy.deepcopy(DOC)
    doc["model"] = {"provider": "openai-compatible", "model": "m", "base_url": url}
    try:
        validate_preregistration(doc)
    except PreregistrationError as exc:
        assert all("\n" not in p and "\r" not in p for p in exc.problems)
        return
    parsed = httpx2.URL(url)
    assert parsed.host and parsed.scheme in ("http", "https")
    assert parsed.port is None or 1 <= parsed.port <= 65535


TOOL_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=10)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
TOOL_SHAPED = st.lists(
    st.fixed_dictionaries(
        {"type": st.just("function")},
        optional={
            "function": st.fixed_dictionaries(
                {"name": st.text(max_size=10)},
                optional={"description": TOOL_VALUES, "parameters": TOOL_VALUES},
            )
        },
    ),
    max_size=4,
)


@FAST
@given(
    data=st.one_of(
        st.binary(max_size=500),
        TOOL_VALUES.map(lambda v: json.dumps(v).encode()),
        TOOL_SHAPED.map(lambda v: json.dumps(v).encode()),
    )
)
def test_tool_files(tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    path = tmp_path_factory.mktemp("t") / "tools.json"
    path.write_bytes(data)
    with contextlib.suppress(ToolFileError):
        load_tool_file(path)


@pytest.fixture(scope="module")
def folder_lines(tmp_path_factory: pytest.TempPathFactory) -> tuple[Plan, list[bytes]]:
    """The smoke plan and eight real episode lines of it (2 tasks x 1 attempt), to be damaged."""
    d = tmp_path_factory.mktemp("lines")
    doc = copy.deepcopy(DOC)
    doc["design"].update(tasks=2, attempts=1)
    path = d / "small.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert run_cli(["run", str(path), "--out", str(d / "run"), "--quiet"]) == 0
    lines = (d / "run" / EPISODES).read_bytes().splitlines(keepends=True)
    return load_preregistration(path), lines


FIELD_NAMES = sorted(EpisodeLine.model_fields)


@settings(FAST, max_examples=min(FAST.max_examples, 400))
@given(
    keep=st.integers(0, 8),
    damage=st.one_of(
        st.binary(max_size=200).map(lambda b: b.replace(b"\n", b"") + b"\n"),
        st.tuples(st.sampled_from(FIELD_NAMES), VALUES),
        st.sampled_from(["repeat", "torn"]),
    ),
)
def test_episode_lines_for_card_and_resume(
    tmp_path_factory: pytest.TempPathFactory,
    folder_lines: tuple[Plan, list[bytes]],
    keep: int,
    damage: object,
) -> None:
    """A folder with one damaged episode line: card and resume's check each end in a result or
    one typed refusal (never a traceback), and a folder resume refuses, card refuses too."""
    plan, lines = folder_lines
    folder = tmp_path_factory.mktemp("f") / "run"
    RunFolder.create(folder, plan, {}).close("interrupted", "made by the test")
    body = lines[:keep]
    if isinstance(damage, bytes):
        body.append(damage)
    elif isinstance(damage, tuple):
        doc = json.loads(lines[keep % len(lines)])
        doc[damage[0]] = damage[1]
        body.append(json.dumps(doc).encode() + b"\n")
    elif damage == "repeat" and body:
        body.append(body[0])
    else:
        body.append(lines[-1][:-5])
    (folder / EPISODES).write_bytes(b"".join(body))
    resume_refused = False
    try:
        RunFolder.check_resumable(folder, plan)
    except RunFolderError:
        resume_refused = True
    rc = run_cli(["card", str(folder)])
    assert rc in (0, 1, 2, 3)
    if resume_refused:
        assert rc != 0
