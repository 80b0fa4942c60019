"""The runner against servers as they really answer (tests/endpoint_double.py, a loopback socket):
tool calls written as text in each dialect, reasoning that holds call-shaped text, answers without
usage, failed responses and their evidence, retries and deadlines, context overflow, per-attempt
seeds, and the preflight of vLLM and Ollama. One test per row: outcome, clause, alarm, exit code.
"""

from __future__ import annotations

import email.utils
import json
import time
from pathlib import Path
from typing import Any

import httpx2
import pytest
import yaml
from endpoint_double import MODEL, Answer, Seen, reply_text, serve
from typer.testing import CliRunner

from poisson_tasks.arms import parse_arm_id
from poisson_tasks.calibration import card_from_run, render_document
from poisson_tasks.calibration.cardjson import card_json
from poisson_tasks.cli import app
from poisson_tasks.runfolder import EpisodeLine, iter_episodes, read_header
from poisson_tasks.runner import run_preregistration
from poisson_tasks.runner.endpoint import derived_seed, redact, retry_after_s
from poisson_tasks.runner.textcalls import text_call_dialect

cli = CliRunner()
ARM = "depth:d2"


def prereg(
    tmp_path: Path,
    base_url: str,
    *,
    provider: str = "openai-compatible",
    tasks: int = 1,
    attempts: int = 1,
    revision: str | None = None,
    key_env: str | None = None,
    **sections: dict[str, Any],
) -> Path:
    """A one-arm pre-registration against the double."""
    serving: dict[str, Any] = {"provider": provider, "model": MODEL, "base_url": base_url}
    if revision is not None:
        serving["revision"] = revision
    if key_env is not None:
        serving["api_key_env"] = key_env
    doc: dict[str, Any] = {
        "format": "poisson-tasks/preregistration@1",
        "name": "double",
        "model": serving,
        "decoding": {
            "temperature": 1.0,
            "top_p": 1.0,
            "reasoning_effort": None,
            "max_completion_tokens": 256,
        },
        "design": {
            "arms": [ARM],
            "tasks": tasks,
            "attempts": attempts,
            "seed_string": "double-test",
            "slack": 0,
            "horizon": parse_arm_id(ARM).max_turns(0),
        },
        "budget": {"tokens": 50_000_000, "wall_clock_s": 120},
        "execution": {
            "concurrency": 2,
            "max_retries": 2,
            "backoff_s": 0.001,
            "backoff_max_s": 0.01,
            "request_timeout_s": 10,
        },
    }
    for key, value in sections.items():
        doc[key] = {**doc.get(key, {}), **value}
    path = tmp_path / "double.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def run_cli(path: Path, out: Path) -> Any:
    return cli.invoke(app, ["run", str(path), "--out", str(out), "--quiet"])


def lines_of(folder: Path) -> list[EpisodeLine]:
    return list(iter_episodes(folder))


def first_reply(text: str, **message: Any) -> Any:
    """A script: the episode's first request gets `text` as the model's whole reply."""

    def script(seen: Seen, oracle: dict[str, Any]) -> Answer | None:
        return Answer(200, reply_text(oracle, text, **message)) if seen.turn == 0 else None

    return script


# --------------------------------------------------------------------------- dialects

# Examples written after each format's published description (chat templates, tool parsers).
DIALECT_ROWS = [
    (
        "hermes",
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
    ),
    (
        "hermes",  # Qwen3-Coder's XML inside the Hermes tags
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
        "</function>\n</tool_call>",
    ),
    ("function_tag", '<function=get_weather>{"city": "Paris"}</function>'),
    ("llama3_python_tag", '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}'),
    ("json", '{"name": "get_weather", "parameters": {"city": "Paris"}}'),
    ("mistral", '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}}]'),
    ("mistral", '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}'),
    ("mistral", '[TOOL_CALLS]get_weather[CALL_ID]a1b2c3d4e[ARGS]{"city": "Paris"}'),
    ("pythonic", '[get_weather(city="Paris", unit="celsius"), get_time(tz="CET")]'),
    ("functionary", '>>>get_weather\n{"city": "Paris"}'),
    (
        "harmony",
        "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
        '{"city":"Paris"}<|call|>',
    ),
    ("harmony", 'commentary to=functions.get_weather json{"city": "Paris"}'),
    (
        "deepseek",
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n"
        '```json\n{"city": "Paris"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
    ),
    ("granite", '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris"}}]'),
    ("fenced_json", 'Calling:\n```json\n{"name": "get_weather", "arguments": {"city": "P"}}\n```'),
    ("pythonic", '```python\n[get_weather(city="Paris")]\n```'),
]


@pytest.mark.parametrize(("dialect", "text"), DIALECT_ROWS)
def test_each_dialect_is_clause_1_with_the_alarm_and_exit_1(
    tmp_path: Path, dialect: str, text: str
) -> None:
    assert text_call_dialect(text) == dialect
    with serve(first_reply(text)) as double:
        res = run_cli(prereg(tmp_path, double.base_url), tmp_path / "run")
    (line,) = lines_of(tmp_path / "run")
    assert line.outcome == "malformed_call" and line.malformed_clause == 1
    assert line.transcript["text_call_dialects"] == [dialect]
    assert res.exit_code == 1 and "format clause 1" in res.output


@pytest.mark.parametrize(
    "text",
    [
        "Done: the record is at stage 3.",
        'The payload was {"status": "ok"}.',
        "Steps: [1, 2, 3] and see [the docs](https://example.com).",
        ">>>all\nThe weather in Paris is mild.",
        '<think>{"name": "get_weather", "arguments": {"city": "P"}}</think>It is done.',
        'Let me call {"name": "get_weather", "arguments": {}} first.</think>It is done.',
    ],
)
def test_plain_replies_and_reasoning_are_not_text_calls(text: str) -> None:
    assert text_call_dialect(text) is None


def test_a_think_block_holding_a_call_then_a_reply_is_the_models_choice(tmp_path: Path) -> None:
    text = '<think>\n{"name": "get_weather", "arguments": {"city": "P"}}\n</think>\nAll done.'
    with serve(first_reply(text)) as double:
        res = run_cli(prereg(tmp_path, double.base_url), tmp_path / "run")
    (line,) = lines_of(tmp_path / "run")
    assert line.outcome == "wrong_state" and line.malformed_clause is None
    assert line.unparsed_text_calls == 0 and res.exit_code == 0


def test_reasoning_content_holding_a_call_is_not_read(tmp_path: Path) -> None:
    call = '{"name": "get_weather", "arguments": {"city": "P"}}'
    with serve(first_reply("All done.", reasoning_content=call)) as double:
        res = run_cli(prereg(tmp_path, double.base_url), tmp_path / "run")
    (line,) = lines_of(tmp_path / "run")
    assert line.outcome == "wrong_state" and line.unparsed_text_calls == 0
    assert res.exit_code == 0


# --------------------------------------------------------------------------- tokens


def _no_usage(seen: Seen, oracle: dict[str, Any]) -> Answer:
    oracle.pop("usage", None)
    return Answer(200, oracle)


def test_an_answer_without_usage_is_counted_and_marked_estimated(tmp_path: Path) -> None:
    with serve(_no_usage) as double:
        res = run_cli(prereg(tmp_path, double.base_url), tmp_path / "run")
    (line,) = lines_of(tmp_path / "run")
    assert line.outcome == "passed" and res.exit_code == 0
    u = line.usage
    assert u.uncached_input_tokens and u.uncached_input_tokens > 100 and u.completion_tokens
    assert u.estimated_tokens == u.uncached_input_tokens + u.completion_tokens


def test_a_study_without_usage_stops_at_its_token_cap(tmp_path: Path) -> None:
    with serve(_no_usage) as double:
        path = prereg(
            tmp_path,
            double.base_url,
            tasks=10,
            budget={"tokens": 3000},
            execution={"concurrency": 1},
        )
        res = run_cli(path, tmp_path / "run")
    lines = lines_of(tmp_path / "run")
    assert 0 < len(lines) < 10
    assert res.exit_code == 3
    header = read_header(tmp_path / "run")
    assert header.sessions[-1].stop_reason == "token_budget"
    assert all(ln.usage.estimated_tokens for ln in lines)
    card = card_from_run(tmp_path / "run")
    assert card.serving_observed is not None and card.serving_observed.estimated_share == 1.0
    doc = render_document(card)
    assert "(100.0% of all tokens)" in doc
    # the cost section says it too: tokens are estimated only where usage was missing
    doc_lines = doc.splitlines()
    heading = next(i for i, ln in enumerate(doc_lines) if ln.startswith("## Cost: token totals"))
    totals_heading = doc_lines[heading + 2]
    estimated = card.serving_observed.estimated_tokens
    assert f"Estimated, not measured: {estimated:,} tokens (100.0% of all tokens)" in totals_heading


# --------------------------------------------------------------------------- failed responses


def test_a_200_carrying_an_error_keeps_its_body_as_evidence(tmp_path: Path) -> None:
    err = {"error": {"message": "upstream model crashed", "type": "server_error"}}
    with serve(lambda seen, oracle: Answer(200, err)) as double:
        res = run_cli(prereg(tmp_path, double.base_url), tmp_path / "run")
    (line,) = lines_of(tmp_path / "run")
    assert line.outcome == "api_error"
    failed = line.transcript["failed_responses"]
    assert len(failed) == 3 and all(f["status"] == 200 for f in failed)  # 1 + 2 retries
    assert "upstream model crashed" in failed[0]["body"]
    assert res.exit_code == 1 and "instrument" in res.output


def test_a_422_keeps_its_detail_and_headers_without_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOUBLE_KEY", "sk-double-0123456789abcdef")
    detail = {"detail": [{"loc": ["body", "tools"], "msg": "field required"}]}
    headers = {"x-request-id": "req-42", "set-cookie": "session=abc"}
    with serve(lambda seen, oracle: Answer(422, detail, headers)) as double:
        run_cli(prereg(tmp_path, double.base_url, key_env="DOUBLE_KEY"), tmp_path / "run")
    (line,) = lines_of(tmp_path / "run")
    (failed,) = line.transcript["failed_responses"]
    assert failed["status"] == 422 and "field required" in failed["body"]
    assert failed["headers"]["x-request-id"] == "req-42" and "set-cookie" not in failed["headers"]


def test_a_lone_surrogate_in_a_body_is_read_leniently(tmp_path: Path) -> None:
    def script(seen: Seen, oracle: dict[str, Any]) -> Answer | None:
        if seen.turn:
            return None
        raw = json.dumps(oracle).replace('"assistant"', '"assistant", "refusal": "\\ud800x"', 1)
        return Answer(200, raw.encode())

    with serve(script) as double:
        run_cli(prereg(tmp_path, double.base_url), tmp_path / "run")
    (line,) = lines_of(tmp_path / "run")
    assert line.outcome == "passed"
    assert line.transcript["responses"][0]["choices"][0]["message"]["refusal"] == "\ufffdx"


# --------------------------------------------------------------------------- retries and deadlines


def _once(answer: Answer) -> Any:
    """A script that sends `answer` to the first request of the run only."""
    sent: list[int] = []

    def script(seen: Seen, oracle: dict[str, Any]) -> Answer | None:
        if not sent:
            sent.append(1)
            return answer
        return None

    return script


@pytest.mark.parametrize(
    ("kind", "answer"),
    [
        ("408", Answer(408, {"error": {"message": "request timeout"}})),
        ("not_json", Answer(200, b"<html>502 Bad Gateway</html>")),
        ("truncated", Answer(200, b'{"choices": [{"mess', length=400)),  # cut off mid-body
    ],
)
def test_transient_answers_are_retried(tmp_path: Path, kind: str, answer: Answer) -> None:
    with serve(_once(answer)) as double:
        res = run_cli(prereg(tmp_path, double.base_url), tmp_path / "run")
        attempts = [s.headers.get("x-poisson-attempt") for s in double.requests[:2]]
    (line,) = lines_of(tmp_path / "run")
    assert line.outcome == "passed" and line.transcript["retries"] == 1
    assert attempts == ["0.0", "0.1"]  # the retry differs from the request it retries
    if kind != "truncated":  # a body cut short is a dropped connection: no response to keep
        assert line.transcript["failed_responses"][0]["status"] in (200, 408)
    assert res.exit_code == 0


def test_retry_after_ms_is_honoured_above_backoff_max(tmp_path: Path) -> None:
    slow = Answer(429, {"error": {"message": "slow down"}}, {"retry-after-ms": "400"})
    with serve(_once(slow)) as double:
        t0 = time.perf_counter()
        run_cli(prereg(tmp_path, double.base_url), tmp_path / "run")
        took = time.perf_counter() - t0
    (line,) = lines_of(tmp_path / "run")
    assert line.outcome == "passed" and took >= 0.4


def test_retry_after_is_read_in_seconds_dates_and_ms_and_capped(tmp_path: Path) -> None:
    date = email.utils.formatdate(1_000_030.0, usegmt=True)
    assert retry_after_s(httpx2.Headers({"retry-after": "7"})) == 7.0
    assert retry_after_s(httpx2.Headers({"retry-after": date}), now=1_000_000.0) == 30.0
    assert retry_after_s(httpx2.Headers({"retry-after-ms": "250"})) == 0.25
    assert retry_after_s(httpx2.Headers({"retry-after": "soon"})) is None
    long = Answer(503, {"error": {"message": "busy"}}, {"retry-after": "3600"})
    with serve(_once(long)) as double:
        t0 = time.perf_counter()
        path = prereg(tmp_path, double.base_url, execution={"retry_after_max_s": 0.2})
        run_cli(path, tmp_path / "run")
        took = time.perf_counter() - t0
    assert lines_of(tmp_path / "run")[0].outcome == "passed" and 0.2 <= took < 30


def test_a_trickling_server_cannot_stretch_the_request_deadline(tmp_path: Path) -> None:
    def script(seen: Seen, oracle: dict[str, Any]) -> Answer:
        return Answer(200, oracle, trickle_bps=16)

    with serve(script) as double:
        path = prereg(
            tmp_path, double.base_url, execution={"request_timeout_s": 0.5, "max_retries": 1}
        )
        t0 = time.perf_counter()
        run_cli(path, tmp_path / "run")
        took = time.perf_counter() - t0
    (line,) = lines_of(tmp_path / "run")
    assert line.outcome == "api_error" and "timeout after 1 retries" in (line.error or "")
    assert took < 10  # two half-second deadlines, not a body at 16 bytes/s


# --------------------------------------------------------------------------- seeds


def test_a_derived_seed_is_sent_per_attempt(tmp_path: Path) -> None:
    with serve() as double:
        path = prereg(tmp_path, double.base_url, attempts=2, decoding={"seed": "derived"})
        run_cli(path, tmp_path / "run")
        seeds = {(s.body["user"], s.body["seed"]) for s in double.requests}
    lines = lines_of(tmp_path / "run")
    want = {ln.attempt: derived_seed(ln.task_id, ln.attempt) for ln in lines}
    assert {seed for _, seed in seeds} == set(want.values()) and len(set(want.values())) == 2


def test_no_seed_is_sent_unless_declared(tmp_path: Path) -> None:
    with serve() as double:
        run_cli(prereg(tmp_path, double.base_url), tmp_path / "run")
        assert all("seed" not in s.body for s in double.requests)


# --------------------------------------------------------------------------- context overflow

OVERFLOWS = [
    {  # OpenAI
        "error": {
            "message": "This model's maximum context length is 8192 tokens. However, your "
            "messages resulted in 8275 tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    },
    {  # vLLM
        "object": "error",
        "message": "This model's maximum context length is 8192 tokens. However, you requested "
        "8275 tokens (8019 in the messages, 256 in the completion). Please reduce the length "
        "of the messages or completion.",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    },
    {  # llama.cpp server
        "error": {
            "code": 400,
            "message": "request (8275 tokens) exceeds the available context size (8192 tokens), "
            "try increasing it",
            "type": "exceed_context_size_error",
        }
    },
]


@pytest.mark.parametrize("body", OVERFLOWS, ids=["openai", "vllm", "llamacpp"])
def test_a_mid_episode_overflow_is_the_models_failure(tmp_path: Path, body: dict[str, Any]) -> None:
    def script(seen: Seen, oracle: dict[str, Any]) -> Answer | None:
        return Answer(400, body) if seen.turn == 1 else None

    with serve(script) as double:
        res = run_cli(prereg(tmp_path, double.base_url, tasks=2), tmp_path / "run")
    lines = lines_of(tmp_path / "run")
    assert [ln.outcome for ln in lines] == ["turn_limit", "turn_limit"]
    assert all(ln.context_overflow and "context" in (ln.error or "") for ln in lines)
    assert res.exit_code == 0
    card = card_from_run(tmp_path / "run")
    (cell,) = card.cells
    assert cell.scored == 2 and cell.instrument.count == 0  # in the denominator
    assert card.serving_observed is not None and card.serving_observed.context_overflow == 2
    assert f"context overflow: 2 episodes (`{ARM}` 2)" in render_document(card)


def test_an_overflow_on_the_first_request_refuses_the_arm(tmp_path: Path) -> None:
    def script(seen: Seen, oracle: dict[str, Any]) -> Answer:
        return Answer(400, OVERFLOWS[2])

    with serve(script) as double:
        res = run_cli(prereg(tmp_path, double.base_url), tmp_path / "run")
    assert res.exit_code == 2
    (err,) = [ln for ln in res.output.splitlines() if ln.startswith("error:")]
    assert ARM in err and "context window (window 8192 tokens)" in err


# --------------------------------------------------------------------------- preflight

VLLM_MODELS = {
    "object": "list",
    "data": [
        {
            "id": MODEL,
            "root": "/root/.cache/huggingface/hub/models--org--m/snapshots/"
            "0123456789abcdef0123456789abcdef01234567",
            "max_model_len": 8192,
        }
    ],
}


def test_a_vllm_run_without_version_is_refused_before_any_folder(tmp_path: Path) -> None:
    with serve() as double:
        path = prereg(tmp_path, double.base_url, provider="vllm", revision="abc123")
        res = run_cli(path, tmp_path / "run")
    assert res.exit_code == 2 and "this is not a vLLM server" in res.output
    assert not (tmp_path / "run").exists()


def test_a_vllm_run_records_what_the_server_says(tmp_path: Path) -> None:
    routes = {
        "/version": Answer(200, {"version": "0.11.0"}),
        "/v1/models": Answer(200, VLLM_MODELS),
    }
    with serve(routes=routes) as double:
        path = prereg(tmp_path, double.base_url, provider="vllm", revision="0123456789abcdef")
        assert run_cli(path, tmp_path / "run").exit_code == 0
        bad = prereg(tmp_path, double.base_url, provider="vllm", revision="fedcba9876543210")
        res = run_cli(bad, tmp_path / "run2")
    serving = read_header(tmp_path / "run").serving
    assert serving.stack_version == "0.11.0" and serving.context_window == 8192
    assert serving.weights_revision.startswith("0123456789abcdef0123") and "verified" in (
        serving.weights_revision
    )
    assert res.exit_code == 2 and "other weights" in res.output
    assert not (tmp_path / "run2").exists()


def test_an_unverifiable_revision_is_declared_not_verified(tmp_path: Path) -> None:
    with serve() as double:
        path = prereg(tmp_path, double.base_url, revision="abc1234")
        assert run_cli(path, tmp_path / "run").exit_code == 0
    serving = read_header(tmp_path / "run").serving
    assert serving.weights_revision == "abc1234 (declared, not verified)"
    assert "abc1234 (declared, not verified)" in render_document(card_from_run(tmp_path / "run"))


def test_ollama_without_v1_is_refused_before_any_folder(tmp_path: Path) -> None:
    with serve() as double:
        path = prereg(tmp_path, double.root, provider="ollama", revision="abc1234")
        res = run_cli(path, tmp_path / "run")
    assert res.exit_code == 2 and "under /v1" in res.output and "model.model" not in res.output
    assert not (tmp_path / "run").exists()


def test_ollama_digest_and_context_are_read_and_checked(tmp_path: Path) -> None:
    digest = "a2af6cc3eb7fa8be8504abaf9b04e88f17a119ec3f04a3addf55f92841195f5a"
    routes = {
        "GET /api/version": Answer(200, {"version": "0.12.3"}),
        "POST /api/show": Answer(
            200,
            {
                "details": {"quantization_level": "Q4_K_M", "family": "qwen2"},
                "model_info": {"qwen2.context_length": 32768},
            },
        ),
        "GET /api/tags": Answer(200, {"models": [{"name": MODEL, "digest": digest}]}),
    }
    with serve(routes=routes) as double:
        ok = prereg(tmp_path, double.base_url, provider="ollama", revision=digest[:12])
        assert run_cli(ok, tmp_path / "run").exit_code == 0
        bad = prereg(tmp_path, double.base_url, provider="ollama", revision="deadbeef0000")
        res = run_cli(bad, tmp_path / "run2")
    serving = read_header(tmp_path / "run").serving
    assert serving.context_window == 32768 and serving.quantization == "Q4_K_M"
    assert serving.weights_revision.startswith(digest)
    assert res.exit_code == 2 and "other weights" in res.output
    assert not (tmp_path / "run2").exists()


def test_gpu_facts_come_from_the_sidecar(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sidecar = tmp_path / "gpu.json"
    sidecar.write_text(json.dumps({"gpu": {"name": "NVIDIA H200", "driver": "570.86"}}))
    monkeypatch.setenv("POISSON_SERVING_SIDECAR", str(sidecar))
    with serve() as double:
        assert run_cli(prereg(tmp_path, double.base_url), tmp_path / "run").exit_code == 0
    assert read_header(tmp_path / "run").serving.gpu == "NVIDIA H200, driver 570.86"


def test_the_serving_facts_file_gives_the_flags_and_must_name_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docker/vllm.Containerfile's server writes this file (docker/serving_facts.py)."""
    flags = ["--enable-auto-tool-choice", "--tool-call-parser", "hermes"]
    facts = tmp_path / "serving-facts.json"
    facts.write_text(json.dumps({"stack": "vllm", "model": MODEL, "flags": flags, "gpu": None}))
    monkeypatch.setenv("POISSON_SERVING_SIDECAR", str(facts))
    with serve() as double:
        assert run_cli(prereg(tmp_path, double.base_url), tmp_path / "run").exit_code == 0
        facts.write_text(json.dumps({"model": "another/model", "flags": flags}))
        res = run_cli(prereg(tmp_path, double.base_url), tmp_path / "run2")
    assert read_header(tmp_path / "run").serving.flags == flags
    assert res.exit_code == 2 and "another/model" in res.output
    assert not (tmp_path / "run2").exists()


# --------------------------------------------------------------------------- secrets

KEY = "sk-planted-9f8e7d6c5b4a3928abcd"


def _written(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in folder.rglob("*") if p.is_file())


def _assert_clean(blob: bytes) -> None:
    assert KEY.encode() not in blob
    for i in range(len(KEY) - 7):
        assert KEY[i : i + 8].encode() not in blob, KEY[i : i + 8]


@pytest.mark.parametrize(
    ("where", "mutate"),
    [
        ("base_url userinfo", lambda url: url.replace("http://", f"http://user:{KEY}@")),
        ("query", lambda url: url + f"?api_key={KEY}"),
    ],
)
def test_a_key_in_the_base_url_is_refused_and_never_printed(
    tmp_path: Path, where: str, mutate: Any
) -> None:
    with serve() as double:
        res = run_cli(prereg(tmp_path, mutate(double.base_url)), tmp_path / "run")
    assert res.exit_code == 2 and "model.base_url" in res.output
    _assert_clean(res.output.encode())
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "extra", [{"api_key": KEY}, {"extra_headers": {"Authorization": f"Bearer {KEY}"}}]
)
def test_a_key_in_extra_body_is_refused(tmp_path: Path, extra: dict[str, Any]) -> None:
    with serve() as double:
        path = prereg(tmp_path, double.base_url, decoding={"extra_body": extra})
        res = run_cli(path, tmp_path / "run")
    assert res.exit_code == 2 and "carries a credential" in res.output
    _assert_clean(res.output.encode())
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("echo", [KEY, KEY[3:15], "prefix" + KEY[-9:] + "suffix"])
def test_a_key_echoed_whole_or_in_part_never_reaches_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, echo: str
) -> None:
    monkeypatch.setenv("DOUBLE_KEY", KEY)

    def script(seen: Seen, oracle: dict[str, Any]) -> Answer:
        if seen.turn == 0 and seen.headers.get("x-poisson-attempt") == "0.0":
            return Answer(500, {"error": {"message": f"bad key {echo}"}}, {"x-echo": echo})
        oracle["choices"][0]["message"]["content"] = f"I saw the key {echo} in my prompt."
        return Answer(200, oracle)

    with serve(script) as double:
        res = run_cli(prereg(tmp_path, double.base_url, key_env="DOUBLE_KEY"), tmp_path / "run")
    (line,) = lines_of(tmp_path / "run")
    assert line.transcript["failed_responses"][0]["status"] == 500
    card = cli.invoke(app, ["card", str(tmp_path / "run"), "--out", str(tmp_path / "run" / "c")])
    assert (tmp_path / "run" / "c" / "card.json").is_file()
    _assert_clean(_written(tmp_path / "run") + res.output.encode() + card.output.encode())
    said = [m["content"] for m in line.transcript["messages"] if m["role"] == "assistant"]
    assert said and all("[redacted]" in m for m in said)


def test_redaction_covers_every_eight_character_piece() -> None:
    out = redact(f"a {KEY[2:12]} b {KEY[-8:]} c {KEY[5:12]}", KEY)
    assert out == f"a [redacted] b [redacted] c {KEY[5:12]}"  # 7 characters are not a piece


def test_fingerprints_are_counted_on_the_card_and_null_when_absent(tmp_path: Path) -> None:
    def script(seen: Seen, oracle: dict[str, Any]) -> Answer:
        if seen.turn == 0:
            oracle["system_fingerprint"] = "fp_a"
        else:
            oracle.pop("system_fingerprint", None)
        return Answer(200, oracle)

    with serve(script) as double:
        run_cli(prereg(tmp_path, double.base_url, tasks=2), tmp_path / "run")
    lines = lines_of(tmp_path / "run")
    assert all(ln.system_fingerprints[0] == "fp_a" for ln in lines)
    assert all(fp is None for ln in lines for fp in ln.system_fingerprints[1:])
    observed = card_from_run(tmp_path / "run").serving_observed
    assert observed is not None and observed.system_fingerprints == {"fp_a": 2}
    assert observed.responses_without_fingerprint == observed.responses - 2 > 0


def test_no_fingerprint_at_all_is_null_on_the_card(tmp_path: Path) -> None:
    def script(seen: Seen, oracle: dict[str, Any]) -> Answer:
        oracle.pop("system_fingerprint", None)
        return Answer(200, oracle)

    with serve(script) as double:
        run_cli(prereg(tmp_path, double.base_url), tmp_path / "run")
    card = card_from_run(tmp_path / "run")
    assert card.serving_observed is not None and card.serving_observed.system_fingerprints is None
    assert "system_fingerprint over" in render_document(card)
    assert "null (none of" in render_document(card)
    assert '"system_fingerprints": null' in card_json(card).decode()


# --------------------------------------------------------------------------- resumes meet fresh faults


def test_a_resumed_session_is_not_dealt_the_faults_that_failed_the_last(tmp_path: Path) -> None:
    path = tmp_path / "flaky.yaml"
    doc = yaml.safe_load(prereg(tmp_path, "http://unused/v1").read_text())
    doc["model"] = {"provider": "reference", "model": "flaky?p_500=0.2&p_429=0&p_slow=0"}
    doc["design"]["tasks"] = 10
    doc["execution"]["max_retries"] = 0
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    out = tmp_path / "run"
    first = run_preregistration(path, out, show_progress=False)
    failed = {(ln.arm_id, ln.seed, ln.attempt) for ln in lines_of(out) if ln.outcome == "api_error"}
    assert failed and first.instrument == len(failed)
    run_preregistration(path, out, resume=True, show_progress=False)
    second = [ln for ln in lines_of(out) if ln.session == 1]
    assert {(ln.arm_id, ln.seed, ln.attempt) for ln in second} == failed
    assert any(ln.outcome != "api_error" for ln in second)  # fresh draws, not the same faults


def test_a_few_instrument_failures_below_the_limit_exit_0_and_agree_with_the_card(
    tmp_path: Path,
) -> None:
    def script(seen: Seen, oracle: dict[str, Any]) -> Answer | None:
        if seen.body["user"].endswith("|0") and seen.turn == 0:  # attempt 0 of every task
            return Answer(400, {"error": {"message": "invalid request"}})
        return None

    with serve(script) as double:
        path = prereg(tmp_path, double.base_url, tasks=2, attempts=2)
        doc = yaml.safe_load(path.read_text())
        doc["thresholds"] = {"instrument_max": 0.6}
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        res = run_cli(path, tmp_path / "run")
    assert res.exit_code == 0, res.output
    assert "incomplete" not in res.output and "unscored   depth:d2" in res.output
    (cell,) = card_from_run(tmp_path / "run").cells
    assert not cell.incomplete and cell.instrument.count == 2


@pytest.mark.parametrize(
    "text",
    [
        "<think>" * 5000 + "a" * 100_000,
        "```json\n" * 20_000,
        "[" + ", ".join(f"f(a={i})" for i in range(5000)) + " and more",
        "{" * 50_000 + "[" * 50_000,
        ">>>" * 30_000,
        "to=functions" * 10_000,
    ],
    ids=["think", "fences", "pythonic", "braces", "functionary", "harmony"],
)
def test_detection_is_linear_on_hostile_text(text: str) -> None:
    # A hang guard, not a speed target: each text is read in well under a second on a quiet
    # machine, while a backtracking pattern would take minutes; the margin survives a loaded CI.
    t0 = time.perf_counter()
    text_call_dialect(text)
    assert time.perf_counter() - t0 < 20
