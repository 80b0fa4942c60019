"""Fuzzing what a server sends (slow suite, issue 33 item 3): any shape, depth, size and type of
chat completion body, of tool-call arguments, and of /v1/models answer, served by the loopback
double (tests/endpoint_double.py) to a whole run. Every example must end as the run's documented
exits say (0, 1 for an alarm, 2 for a refusal in one line), never 70 and never a traceback; the
slot must have its line (scored, or an instrument failure `--resume` runs again); and `card`
must read what the run wrote.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from endpoint_double import Answer, Double, Seen, serve
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_key_defects import document

from poisson_tasks.cli import run_cli
from poisson_tasks.runfolder import iter_episodes

pytestmark = pytest.mark.slow
RUNS = settings(
    max_examples=int(os.environ.get("POISSON_FUZZ_RESPONSES", "60")),
    deadline=None,  # each example is a whole run: a second or two
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    st.text(max_size=40),
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=12), inner, max_size=5)
    ),
    max_leaves=30,
)


def _nest(depth: int, leaf: Any, kind: str) -> str:
    """`leaf` inside `depth` lists or objects, as JSON text."""
    text = json.dumps(leaf)
    for _ in range(depth):
        text = f"[{text}]" if kind == "list" else f'{{"k": {text}}}'
    return text


DEEP = st.builds(
    _nest, st.integers(min_value=0, max_value=3_000), JSON, st.sampled_from(["list", "dict"])
)
BIG = st.integers(min_value=0, max_value=17 * 1024 * 1024).map(lambda n: json.dumps("x" * n))
TEXT_JSON = st.one_of(JSON.map(json.dumps), DEEP, BIG)  # a JSON value written as text


@st.composite
def bodies(draw: st.DrawFn) -> Any:
    """A completion changed at one place: a field set to any JSON (deep, wide, big), the whole
    body replaced, or bytes that are not JSON."""
    how = draw(st.sampled_from(["field", "choice", "message", "call", "body", "bytes"]))
    value = draw(TEXT_JSON)
    return how, draw(st.text(max_size=12)), value, draw(st.binary(max_size=200))


def mutate(oracle: dict[str, Any], how: str, key: str, value: str, raw: bytes) -> Answer:
    if how == "body":
        return Answer(200, value.encode())
    if how == "bytes":
        return Answer(200, raw)
    text = json.dumps(oracle)
    choice = json.dumps(oracle["choices"][0])
    message = json.dumps(oracle["choices"][0]["message"])
    key = json.dumps(key)
    if how == "field":
        text = text[:-1] + f", {key}: {value}}}"
    elif how == "choice":
        text = text.replace(choice, choice[:-1] + f", {key}: {value}}}", 1)
    elif how == "message":
        text = text.replace(message, message[:-1] + f", {key}: {value}}}", 1)
    else:  # a tool call's arguments (as text, or as the value itself)
        calls = oracle["choices"][0]["message"].get("tool_calls") or []
        if calls:
            calls[0]["function"]["arguments"] = "__ARGS__"
            text = json.dumps(oracle).replace('"__ARGS__"', value, 1)
    return Answer(200, text.encode())


class Live:
    """The answer the double gives now, set by each example."""

    def __init__(self) -> None:
        self.body: tuple[str, str, str, bytes] | None = None
        self.arguments: str | None = None


@pytest.fixture(scope="module")
def live() -> Live:
    return Live()


@pytest.fixture(scope="module")
def double(live: Live) -> Iterator[Double]:
    def script(seen: Seen, oracle: dict[str, Any]) -> Answer | None:
        if live.body is not None:
            return mutate(oracle, *live.body)
        if live.arguments is not None:
            for call in oracle["choices"][0]["message"].get("tool_calls") or []:
                call["function"]["arguments"] = live.arguments
            return Answer(200, oracle)
        return None

    with serve(script) as server:
        yield server


def run_once(tmp: Path, base_url: str) -> None:
    """One task against the double: the run's exit, a line for its slot, and a card that reads."""
    path = tmp / "p.yaml"
    doc = document(base_url)
    doc["design"].update({"arms": ["depth:d1"], "horizon": 2, "turn_limit": 3})
    doc["execution"]["request_timeout_s"] = 30
    path.write_text(yaml.safe_dump(doc))
    folder = tmp / "run"
    rc = run_cli(["run", str(path), "--out", str(folder), "--quiet"])
    assert rc in (0, 1), rc
    (line,) = list(iter_episodes(folder))
    assert line.outcome in ("passed", "malformed_call", "wrong_state", "turn_limit", "api_error")
    assert run_cli(["card", str(folder)]) in (0, 1)  # 1: no scored episode to card


@RUNS
@given(change=bodies())
def test_any_completion_body_ends_in_a_line(
    tmp_path_factory: pytest.TempPathFactory,
    double: Double,
    live: Live,
    change: tuple[str, str, str, bytes],
) -> None:
    live.body, live.arguments = change, None
    run_once(tmp_path_factory.mktemp("body"), double.base_url)


@RUNS
@given(arguments=st.one_of(TEXT_JSON, st.text(max_size=200)))
def test_any_tool_call_arguments_end_in_a_line(
    tmp_path_factory: pytest.TempPathFactory, double: Double, live: Live, arguments: str
) -> None:
    live.body, live.arguments = None, arguments
    run_once(tmp_path_factory.mktemp("args"), double.base_url)


@RUNS
@given(
    listing=st.one_of(
        TEXT_JSON.map(str.encode),
        st.builds(lambda v: json.dumps({"data": v}).encode(), JSON),
        st.binary(max_size=200),
    ),
    provider=st.sampled_from(["openai-compatible", "vllm"]),
)
def test_any_models_listing_ends_in_a_run_or_one_line(
    tmp_path_factory: pytest.TempPathFactory,
    capsys: pytest.CaptureFixture[str],
    listing: bytes,
    provider: str,
) -> None:
    tmp = tmp_path_factory.mktemp("models")
    routes = {"/v1/models": Answer(200, listing), "/version": Answer(200, {"version": "0.11.0"})}
    with serve(routes=routes) as server:
        doc = document(server.base_url, provider)
        if provider == "vllm":
            doc["model"]["revision"] = "0123456789ab"
        path = tmp / "p.yaml"
        path.write_text(yaml.safe_dump(doc))
        rc = run_cli(["run", str(path), "--out", str(tmp / "run"), "--quiet"])
    err = capsys.readouterr().err
    assert rc in (0, 1, 2) and "Traceback" not in err and "internal error" not in err, err
    if rc == 2:
        assert len([x for x in err.splitlines() if x.startswith("error:")]) == 1, err
        assert not (tmp / "run").exists()
