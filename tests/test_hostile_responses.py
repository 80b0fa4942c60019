"""Responses no model or server should send, and what the runner makes of each (issue 33, item 3).

A model's output is data: tool-call arguments nested without end are the model's malformed call;
a completion (or a field of it) nested past boundedjson.MAX_DEPTH, a body past
received.MAX_BODY_BYTES, or one encoded although the runner asked for none, is the server's
envelope: the call is retried and then the episode is an instrument failure (api_error) with at
most 4 KB of its body as evidence. No response ends a run in an internal error, and `run --resume`
finishes the study once the server behaves. A serving-facts answer nested the same way is
recorded as unreadable, and refuses the run in one line where the route is required.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from endpoint_double import Answer, Seen, reply_text, serve
from test_real_endpoints import cli, lines_of, prereg, run_cli

from poisson_tasks.arms import parse_arm_id
from poisson_tasks.boundedjson import MAX_DEPTH, TooDeep, depth_exceeds, loads
from poisson_tasks.cli import app
from poisson_tasks.runner.received import MAX_BODY_BYTES
from poisson_tasks.runner.textcalls import text_call_dialect


def nested(depth: int, leaf: str = "1") -> str:
    return "[" * depth + leaf + "]" * depth


def every_call(arguments: str) -> Any:
    """A script: every tool call the oracle makes carries `arguments` (as text) instead."""

    def script(seen: Seen, oracle: dict[str, Any]) -> Answer:
        for call in oracle["choices"][0]["message"].get("tool_calls") or []:
            call["function"]["arguments"] = arguments
        return Answer(200, oracle)

    return script


def with_field(depth: int) -> Any:
    """The oracle's completion with one unknown field nested `depth` levels."""
    return lambda oracle: (json.dumps(oracle)[:-1] + ', "x_deep": ' + nested(depth) + "}").encode()


# --------------------------------------------------------------------------- the reader


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 300, 1_024, 1_025, 100_000])
def test_loads_refuses_json_past_its_depth(depth: int) -> None:
    with pytest.raises(TooDeep):
        loads(nested(depth).encode())
    with pytest.raises(TooDeep):
        loads('{"a": "\\ud800", "b": ' + nested(depth) + "}")  # the lenient path too


def test_loads_reads_json_within_its_depth_and_surrogates_leniently() -> None:
    assert loads(nested(MAX_DEPTH).encode()) == json.loads(nested(MAX_DEPTH))
    many = "[" + ",".join(["[[1]]"] * 500) + "]"  # many brackets, shallow: the walk says so
    assert loads(many) == json.loads(many)
    assert loads(b'{"a": "\\ud800x"}') == {"a": "\ufffdx"}
    assert not depth_exceeds(json.loads(nested(MAX_DEPTH))) and depth_exceeds([[[]]], 2)
    with pytest.raises(ValueError):
        loads(b"<html>")


@pytest.mark.parametrize(
    "text",
    ["[" * 5_000, '{"name": "f", "arguments": ' + nested(5_000) + "}", nested(3_000)],
)
def test_reply_text_nested_without_end_is_no_text_call(text: str) -> None:
    assert text_call_dialect(text) is None  # was a RecursionError


# --------------------------------------------------------------------------- through a run


@pytest.mark.parametrize("depth", [40, 300, 5_000])
def test_arguments_nested_without_end_are_the_models_malformed_call(
    tmp_path: Path, depth: int
) -> None:
    arguments = '{"record_id": ' + nested(depth) + "}"
    with serve(every_call(arguments)) as double:
        res = run_cli(prereg(tmp_path, double.base_url), tmp_path / "run")
    assert res.exit_code == 1, res.output  # the format alarm: a result, not a crash
    assert "internal error" not in res.output
    (line,) = lines_of(tmp_path / "run")
    assert line.outcome == "malformed_call" and line.malformed_clause is not None
    (call,) = line.transcript["tool_calls"][0]
    assert call["arguments"] is None and call["raw_arguments"] == arguments


@pytest.mark.parametrize(
    "make",
    [with_field(300), with_field(MAX_DEPTH + 1), lambda oracle: nested(3_000).encode()],
    ids=["an unknown field 300 deep", "one level past the bound", "a body 3,000 deep"],
)
def test_a_body_nested_without_end_is_an_instrument_failure_then_resumes(
    tmp_path: Path, make: Any
) -> None:
    hostile = [True]

    def script(seen: Seen, oracle: dict[str, Any]) -> Answer | None:
        return Answer(200, make(oracle)) if hostile[0] else None

    with serve(script) as double:
        res = run_cli(prereg(tmp_path, double.base_url), tmp_path / "run")
        assert res.exit_code == 1 and "instrument" in res.output, res.output
        assert "internal" not in res.output
        (line,) = lines_of(tmp_path / "run")
        assert line.outcome == "api_error"
        failed = line.transcript["failed_responses"]
        assert len(failed) == 3  # the call and its two retries
        assert all(f["refused"] == f"JSON nested deeper than {MAX_DEPTH} levels" for f in failed)
        assert all(len(f["body"]) <= 4096 for f in failed)
        hostile[0] = False  # the server behaves again: the study finishes
        res = cli.invoke(app, ["run", "--resume", str(tmp_path / "run"), "--quiet"])
    assert res.exit_code == 0, res.output
    assert [x.outcome for x in lines_of(tmp_path / "run")] == ["api_error", "passed"]


@pytest.mark.parametrize(
    ("answer", "refused"),
    [
        (
            Answer(200, b" " * (MAX_BODY_BYTES + 1), unannounced=True),
            f"a body longer than {MAX_BODY_BYTES:,} bytes",
        ),
        (
            Answer(200, b"{}", length=MAX_BODY_BYTES + 1),
            f"a body of {MAX_BODY_BYTES + 1:,} bytes, more than {MAX_BODY_BYTES:,}",
        ),
        (
            Answer(200, gzip.compress(b"[" * 1_000_000), {"Content-Encoding": "gzip"}),
            "a body encoded as 'gzip', which was not asked for",
        ),
    ],
    ids=["longer than the bound", "announced longer", "gzip not asked for"],
)
def test_a_body_past_its_size_or_encoded_is_refused_as_it_arrives(
    tmp_path: Path, answer: Answer, refused: str
) -> None:
    with serve(lambda seen, oracle: answer) as double:
        res = run_cli(prereg(tmp_path, double.base_url), tmp_path / "run")
        (seen,) = {r.headers.get("accept-encoding") for r in double.requests}
    assert seen == "identity"
    assert res.exit_code == 1 and "internal" not in res.output
    (line,) = lines_of(tmp_path / "run")
    assert line.outcome == "api_error"
    failed = line.transcript["failed_responses"]
    assert failed and all(f["refused"] == refused for f in failed), failed[0]
    assert all(len(f["body"]) <= 4096 for f in failed)


def test_an_episode_past_its_bytes_is_an_instrument_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each reply within the bound, their sum past what one episode keeps."""
    monkeypatch.setattr("poisson_tasks.runner.episode.MAX_EPISODE_BYTES", 150_000)
    pad = "x" * 60_000

    def script(seen: Seen, oracle: dict[str, Any]) -> Answer:
        oracle["choices"][0]["message"]["content"] = pad
        return Answer(200, oracle)

    design = {"arms": ["depth:d5"], "horizon": parse_arm_id("depth:d5").max_turns(0)}
    with serve(script) as double:
        res = run_cli(prereg(tmp_path, double.base_url, design=design), tmp_path / "r")
    assert "internal" not in res.output, res.output
    (line,) = lines_of(tmp_path / "r")
    assert line.outcome == "api_error" and line.model_calls == 3
    assert line.error is not None and "more than the 150,000 an episode keeps" in line.error


def test_a_reply_nested_without_end_is_a_reply(tmp_path: Path) -> None:
    text = '{"name": "f", "arguments": ' + nested(5_000) + "}"

    def script(seen: Seen, oracle: dict[str, Any]) -> Answer:
        return Answer(200, reply_text(oracle, text))

    with serve(script) as double:
        res = run_cli(prereg(tmp_path, double.base_url), tmp_path / "run")
    assert "internal" not in res.output
    (line,) = lines_of(tmp_path / "run")
    assert line.outcome == "wrong_state" and line.unparsed_text_calls == 0


# --------------------------------------------------------------------------- the preflight


def test_a_models_listing_nested_without_end_is_recorded_unreadable(tmp_path: Path) -> None:
    routes = {"/v1/models": Answer(200, ('{"data": ' + nested(300) + "}").encode())}
    with serve(routes=routes) as double:
        res = run_cli(prereg(tmp_path, double.base_url), tmp_path / "run")
    assert res.exit_code == 0, res.output
    header = json.loads((tmp_path / "run" / "run.json").read_text())
    models = header["serving"]["details"]["models"]
    assert models == f"unreadable: JSON nested deeper than {MAX_DEPTH} levels"


def test_a_required_route_nested_without_end_refuses_the_run_in_one_line(tmp_path: Path) -> None:
    routes = {
        "/version": Answer(200, {"version": "0.11.0"}),
        "/v1/models": Answer(200, ('{"data": ' + nested(300) + "}").encode()),
    }
    with serve(routes=routes) as double:
        path = prereg(tmp_path, double.base_url, provider="vllm", revision="0123456789ab")
        res = run_cli(path, tmp_path / "run")
    errors = [x for x in res.output.splitlines() if x.startswith("error:")]
    assert res.exit_code == 2 and len(errors) == 1, res.output
    assert f"answered JSON nested deeper than {MAX_DEPTH} levels: this is not a vLLM" in errors[0]
    assert not (tmp_path / "run").exists()
