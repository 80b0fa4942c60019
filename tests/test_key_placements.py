"""Where a key can be planted, and that it is never written or printed (issue 21, defects 1-3, 12).

The key-placement table: the run's API key (from its environment variable) echoed by a hostile
loopback server (tests/endpoint_double.py) in every field and header of a completion, in error
bodies, in every serving-facts answer (vLLM, Ollama, llama.cpp, openai-compatible, OpenAI, the
reference endpoint), and written by the user in every field of the pre-registration and every part
of its URL. After `run`, `card` and `view`, a search of every file written and of everything
printed finds neither the key nor any 8-character piece of it. The key is shaped like nothing (no
known prefix): it is found by its value. The tests after the table hold one defect each.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from endpoint_double import MODEL, Answer, Seen, serve
from typer.testing import CliRunner

from poisson_tasks.arms import parse_arm_id
from poisson_tasks.cli import app

cli = CliRunner()
ARM = "depth:d2"
ENV = "PLACEMENT_TEST_KEY"
KEY = "Zq7vK2mP9xR4tW8yB3nL6cF1hJ5dG0sA"  # the env key's value: no known prefix
PIECE = KEY[5:15]  # ten characters of it
SNAPSHOT = "0123456789abcdef0123456789abcdef01234567"
DIGEST = "a2af6cc3eb7fa8be8504abaf9b04e88f17a119ec3f04a3addf55f92841195f5a"


def pieces(secret: str) -> list[bytes]:
    return [secret[i : i + 8].encode() for i in range(len(secret) - 7)]


# A character spelled as a JSON escape at any depth (any number of backslashes before the u).
_SPELLED = re.compile(rb"\\+u([0-9a-fA-F]{4})")


def leaks(blob: bytes, secret: str = KEY) -> list[str]:
    """The 8-character pieces of `secret` found in `blob`, as written or with every JSON escape
    read as its character (none: nothing leaked)."""
    readable = _SPELLED.sub(lambda m: chr(int(m[1], 16)).encode("utf-8", "replace"), blob)
    return [piece.decode() for piece in pieces(secret) if piece in blob or piece in readable]


# --------------------------------------------------------------------------- the table

Script = Callable[[Seen, dict[str, Any]], Answer | None]


def every_reply(mutate: Callable[[dict[str, Any]], Any], **headers: str) -> Script:
    """Every completion altered by `mutate` (and sent with `headers`)."""

    def script(seen: Seen, oracle: dict[str, Any]) -> Answer:
        mutate(oracle)
        return Answer(200, oracle, dict(headers))

    return script


def first_attempt(answer: Answer) -> Script:
    """The episode's first request fails with `answer`; its retry and the rest are answered."""

    def script(seen: Seen, oracle: dict[str, Any]) -> Answer | None:
        if seen.turn == 0 and seen.headers.get("x-poisson-attempt", "").endswith(".0"):
            return answer
        return None

    return script


def on_call(mutate: Callable[[dict[str, Any]], Any]) -> Script:
    """The first tool call of every completion that has one altered by `mutate`."""

    def change(body: dict[str, Any]) -> None:
        calls = body["choices"][0]["message"].get("tool_calls") or []
        if calls:
            mutate(calls[0])

    return every_reply(change)


def message(key: str, value: Any) -> Callable[[dict[str, Any]], Any]:
    return lambda body: body["choices"][0]["message"].__setitem__(key, value)


def choice(key: str, value: Any) -> Callable[[dict[str, Any]], Any]:
    return lambda body: body["choices"][0].__setitem__(key, value)


def top(key: str, value: Any) -> Callable[[dict[str, Any]], Any]:
    return lambda body: body.__setitem__(key, value)


def usage(key: str, value: Any) -> Callable[[dict[str, Any]], Any]:
    return lambda body: body.setdefault("usage", {}).__setitem__(key, value)


def arguments(call: dict[str, Any]) -> None:
    args = json.loads(call["function"]["arguments"])
    call["function"]["arguments"] = json.dumps({**args, "note": KEY})


VLLM_ROUTES = {
    "/version": Answer(200, {"version": "0.11.0"}),
    "/v1/models": Answer(
        200,
        {
            "object": "list",
            "data": [
                {
                    "id": MODEL,
                    "root": f"/models/snapshots/{SNAPSHOT}",
                    "max_model_len": 8192,
                }
            ],
        },
    ),
}
OLLAMA_ROUTES = {
    "GET /api/version": Answer(200, {"version": "0.12.3"}),
    "POST /api/show": Answer(
        200,
        {
            "details": {"quantization_level": "Q4_K_M"},
            "model_info": {"qwen2.context_length": 32768},
            "parameters": "temperature 1",
        },
    ),
    "GET /api/tags": Answer(200, {"models": [{"name": MODEL, "digest": DIGEST}]}),
}
LLAMACPP_ROUTES = {
    "/props": Answer(
        200,
        {
            "build_info": "b6000",
            "default_generation_settings": {"n_ctx": 4096},
            "model_path": "/no/such/model.gguf",
            "chat_template": "{{ messages }}",
        },
    ),
}


def routes(base: dict[str, Answer], path: str, body: Any, status: int = 200) -> dict[str, Answer]:
    return {**base, path: Answer(status, body)}


def vllm_models(**entry: Any) -> dict[str, Any]:
    listed = {"id": MODEL, "root": f"/models/snapshots/{SNAPSHOT}", "max_model_len": 8192}
    return {"object": "list", "data": [{**listed, **entry}]}


@dataclass(frozen=True)
class Placement:
    """One place the key is put: by the server (script, routes) or by the user (doc)."""

    where: str
    provider: str = "openai-compatible"
    script: Script | None = None
    routes: dict[str, Answer] = field(default_factory=dict)
    doc: Callable[[dict[str, Any]], Any] | None = None
    refused: str | None = None  # the field the one-line refusal names (nothing run)
    cli_base_url: Callable[[str], str] | None = None


def section(name: str, key: str, value: Any) -> Callable[[dict[str, Any]], Any]:
    return lambda doc: doc.setdefault(name, {}).__setitem__(key, value)


def base_url(mutate: Callable[[str], str]) -> Callable[[dict[str, Any]], Any]:
    return lambda doc: doc["model"].__setitem__("base_url", mutate(doc["model"]["base_url"]))


def extra(value: dict[str, Any]) -> Callable[[dict[str, Any]], Any]:
    return lambda doc: doc["decoding"].__setitem__("extra_body", value)


REFUSED_RUN = "refused at run time, by value"
PLACEMENTS = [
    # ---- every field of a completion
    Placement("completion id", script=every_reply(top("id", KEY))),
    Placement("completion object", script=every_reply(top("object", KEY))),
    Placement("completion model", script=every_reply(top("model", KEY))),
    Placement("completion created", script=every_reply(top("created", KEY))),
    Placement("system_fingerprint", script=every_reply(top("system_fingerprint", KEY))),
    Placement("system_fingerprint piece", script=every_reply(top("system_fingerprint", PIECE))),
    Placement("service_tier", script=every_reply(top("service_tier", KEY))),
    Placement("an unknown top-level field", script=every_reply(top("x_echo", {"deep": [KEY]}))),
    Placement("a top-level key named by the key", script=every_reply(top(KEY, 1))),
    Placement("finish_reason", script=every_reply(choice("finish_reason", KEY))),
    Placement("choice index", script=every_reply(choice("index", KEY))),
    Placement("logprobs", script=every_reply(choice("logprobs", {"content": [{"token": KEY}]}))),
    Placement("message role", script=every_reply(message("role", KEY))),
    Placement("message content", script=every_reply(message("content", f"it is {KEY}"))),
    Placement("content, a piece", script=every_reply(message("content", f"<{PIECE}>"))),
    Placement("reasoning_content", script=every_reply(message("reasoning_content", KEY))),
    Placement("reasoning", script=every_reply(message("reasoning", KEY))),
    Placement("refusal", script=every_reply(message("refusal", KEY))),
    Placement("annotations", script=every_reply(message("annotations", [{"url": KEY}]))),
    Placement("tool call id", script=on_call(lambda call: call.__setitem__("id", KEY))),
    Placement("tool call type", script=on_call(lambda call: call.__setitem__("type", KEY))),
    Placement(
        "tool call name",
        script=on_call(lambda call: call["function"].__setitem__("name", KEY)),
    ),
    Placement("tool call arguments", script=on_call(arguments)),
    Placement(
        "tool call arguments spelling the key in \\u escapes",
        script=on_call(
            lambda call: call["function"].__setitem__(
                "arguments",
                call["function"]["arguments"][:-1]
                + ', "note": "'
                + "".join(f"\\u{ord(c):04x}" for c in KEY)
                + '"}',
            )
        ),
    ),
    Placement(
        "content spelling a piece in \\u escapes",
        script=every_reply(message("content", "".join(f"\\u{ord(c):04x}" for c in PIECE))),
    ),
    Placement(
        "tool call arguments not JSON",
        script=on_call(lambda call: call["function"].__setitem__("arguments", "{" + KEY)),
    ),
    Placement("usage.prompt_tokens as text", script=every_reply(usage("prompt_tokens", KEY))),
    Placement("usage, an unknown field", script=every_reply(usage("x_note", KEY))),
    Placement(
        "usage details",
        script=every_reply(usage("completion_tokens_details", {"reasoning_tokens": KEY})),
    ),
    # ---- headers
    Placement("a header's value", script=every_reply(lambda body: None, **{"X-Echo": KEY})),
    Placement("a header's name", script=every_reply(lambda body: None, **{f"X-{KEY}": "1"})),
    Placement(
        "a failed response's header value",
        script=first_attempt(Answer(503, {"error": "busy"}, {"X-Echo": KEY})),
    ),
    Placement(
        "a failed response's header name",
        script=first_attempt(Answer(503, {"error": "busy"}, {f"X-{KEY}": "1"})),
    ),
    Placement(
        "a failed response's Set-Cookie",
        script=first_attempt(Answer(503, {"error": "busy"}, {"Set-Cookie": f"s={KEY}"})),
    ),
    # ---- error bodies
    Placement("a 429 body", script=first_attempt(Answer(429, {"error": {"message": KEY}}))),
    Placement("a 500 text body", script=first_attempt(Answer(500, f"oops {KEY}".encode()))),
    Placement("a 400 body", script=first_attempt(Answer(400, {"error": {"message": KEY}}))),
    Placement("a 200 error body", script=first_attempt(Answer(200, {"error": {"message": KEY}}))),
    Placement("a 200 not JSON", script=first_attempt(Answer(200, f"<html>{KEY}".encode()))),
    Placement(
        "a 200 as JSON escapes",
        script=first_attempt(
            Answer(200, ('{"error": "' + "".join(f"\\u{ord(c):04x}" for c in KEY) + '"}').encode())
        ),
    ),
    Placement(
        "llama.cpp's unparsed call",
        script=first_attempt(
            Answer(
                500, {"error": {"message": f"Failed to parse tool call arguments as JSON {KEY}"}}
            )
        ),
    ),
    Placement("a 401 body", script=first_attempt(Answer(401, {"error": {"message": KEY}}))),
    Placement(
        "a 403 body and header",
        script=first_attempt(Answer(403, {"error": {"message": KEY}}, {"X-Echo": KEY})),
    ),
    Placement("a 404 body", script=first_attempt(Answer(404, {"error": {"message": KEY}}))),
    Placement(
        "a 400 overflow on the first request",
        script=first_attempt(
            Answer(400, {"error": {"message": f"maximum context length is 10 tokens {KEY}"}})
        ),
    ),
    # ---- serving facts: vLLM
    Placement("vLLM /version", "vllm", routes=routes(VLLM_ROUTES, "/version", {"version": KEY})),
    Placement(
        "vLLM /version, another field",
        "vllm",
        routes=routes(VLLM_ROUTES, "/version", {"version": "0.11.0", "build": KEY}),
    ),
    Placement(
        "vLLM /v1/models root",
        "vllm",
        routes=routes(
            VLLM_ROUTES, "/v1/models", vllm_models(root=f"/m/{KEY}/snapshots/{SNAPSHOT}")
        ),
    ),
    Placement(
        "vLLM max_model_len as text",
        "vllm",
        routes=routes(VLLM_ROUTES, "/v1/models", vllm_models(max_model_len=KEY)),
    ),
    Placement(
        "vLLM owned_by", "vllm", routes=routes(VLLM_ROUTES, "/v1/models", vllm_models(owned_by=KEY))
    ),
    Placement(
        "vLLM another model's id",
        "vllm",
        routes=routes(
            VLLM_ROUTES,
            "/v1/models",
            {"data": [{"id": KEY}, vllm_models()["data"][0]]},
        ),
    ),
    Placement(
        "vLLM /v1/models without the model",
        "vllm",
        routes=routes(VLLM_ROUTES, "/v1/models", {"data": [{"id": KEY}]}),
    ),
    Placement(
        "vLLM /server_info",
        "vllm",
        routes=routes(VLLM_ROUTES, "/server_info", {"vllm_config": {"api_key": KEY}}),
    ),
    Placement(
        "vLLM /version 401 body",
        "vllm",
        routes=routes(VLLM_ROUTES, "/version", {"error": KEY}, status=401),
    ),
    Placement(
        "vLLM /version 500 body",
        "vllm",
        routes=routes(VLLM_ROUTES, "/version", {"error": KEY}, status=500),
    ),
    # ---- serving facts: Ollama
    Placement(
        "Ollama /api/version",
        "ollama",
        routes=routes(OLLAMA_ROUTES, "GET /api/version", {"version": KEY}),
    ),
    Placement(
        "Ollama quantisation",
        "ollama",
        routes=routes(OLLAMA_ROUTES, "POST /api/show", {"details": {"quantization_level": KEY}}),
    ),
    Placement(
        "Ollama parameters",
        "ollama",
        routes=routes(OLLAMA_ROUTES, "POST /api/show", {"details": {}, "parameters": KEY}),
    ),
    Placement(
        "Ollama context length as text",
        "ollama",
        routes=routes(OLLAMA_ROUTES, "POST /api/show", {"model_info": {"x.context_length": KEY}}),
    ),
    Placement(
        "Ollama digest",
        "ollama",
        routes=routes(OLLAMA_ROUTES, "GET /api/tags", {"models": [{"name": MODEL, "digest": KEY}]}),
    ),
    # ---- serving facts: llama.cpp, openai-compatible, OpenAI, the reference endpoint
    Placement(
        "llama.cpp build_info",
        "llamacpp",
        routes=routes(LLAMACPP_ROUTES, "/props", {"build_info": KEY}),
    ),
    Placement(
        "llama.cpp model_path",
        "llamacpp",
        routes=routes(LLAMACPP_ROUTES, "/props", {"model_path": f"/m/{KEY}.gguf"}),
    ),
    Placement(
        "llama.cpp chat_template",
        "llamacpp",
        routes=routes(LLAMACPP_ROUTES, "/props", {"chat_template": KEY}),
    ),
    Placement(
        "llama.cpp model tags",
        "llamacpp",
        routes=routes(
            LLAMACPP_ROUTES,
            "/v1/models",
            {"data": [{"id": MODEL, "tags": [f"poisson-tasks.server={KEY}"]}]},
        ),
    ),
    Placement(
        "/props n_ctx as text",
        routes={"/props": Answer(200, {"default_generation_settings": {"n_ctx": KEY}})},
    ),
    Placement("/props build_info", routes={"/props": Answer(200, {"build_info": KEY})}),
    Placement(
        "/v1/models listing another id",
        routes={"/v1/models": Answer(200, {"data": [{"id": MODEL}, {"id": KEY}]})},
    ),
    Placement(
        "/v1/models without the model",
        routes={"/v1/models": Answer(200, {"data": [{"id": KEY}]})},
    ),
    Placement(
        "OpenAI model entry",
        "openai",
        routes={f"/v1/models/{MODEL}": Answer(200, {"id": MODEL, "owned_by": KEY})},
    ),
    Placement("reference /health", "reference", routes={"/health": Answer(200, {"version": KEY})}),
    # ---- the pre-registration, by value (refused when the run reads the key)
    Placement(
        "description",
        doc=lambda doc: doc.__setitem__("description", f"key {KEY}"),
        refused="description",
    ),
    Placement(
        "description, a piece",
        doc=lambda doc: doc.__setitem__("description", PIECE),
        refused="description",
    ),
    Placement("name", doc=lambda doc: doc.__setitem__("name", f"study-{KEY}"), refused="name"),
    Placement("model.model", doc=section("model", "model", KEY), refused="model.model"),
    Placement("model.revision", doc=section("model", "revision", KEY), refused="model.revision"),
    Placement(
        "base_url path",
        doc=base_url(lambda url: url.replace("/v1", f"/{KEY}/v1")),
        refused="model.base_url",
    ),
    Placement(
        "base_url query under another name",
        doc=base_url(lambda url: f"{url}?code={KEY}"),
        refused="model.base_url",
    ),
    Placement(
        "base_url fragment", doc=base_url(lambda url: f"{url}#{KEY}"), refused="model.base_url"
    ),
    Placement(
        "base_url host label",
        doc=base_url(lambda url: url.replace("127.0.0.1", f"{KEY}.localhost")),
        refused="model.base_url",
    ),
    Placement(
        "base_url user name",
        doc=base_url(lambda url: url.replace("//", f"//{KEY}@")),
        refused="model.base_url",
    ),
    Placement(
        "base_url password",
        doc=base_url(lambda url: url.replace("//", f"//u:{KEY}@")),
        refused="model.base_url",
    ),
    Placement(
        "run --base-url", cli_base_url=lambda url: f"{url}?session={KEY}", refused="model.base_url"
    ),
    Placement("extra_body cookie", doc=extra({"cookie": KEY}), refused="decoding.extra_body"),
    Placement("extra_body pass", doc=extra({"pass": KEY}), refused="decoding.extra_body"),
    Placement("extra_body api_keys", doc=extra({"api_keys": KEY}), refused="decoding.extra_body"),
    Placement(
        "extra_body nested note",
        doc=extra({"metadata": {"note": KEY}}),
        refused="decoding.extra_body.metadata.note",
    ),
    Placement(
        "extra_body in a list",
        doc=extra({"stop": ["x", KEY]}),
        refused="decoding.extra_body.stop[1]",
    ),
    Placement(
        "extra_body a key named by the key", doc=extra({KEY: 1}), refused="decoding.extra_body"
    ),
    Placement(
        "design.seed_string",
        doc=section("design", "seed_string", KEY),
        refused="design.seed_string",
    ),
    Placement(
        "api_key_env holding the key itself",
        doc=section("model", "api_key_env", KEY),
        refused="model.api_key_env",
    ),
    Placement(
        "api_key_env given a list",
        doc=section("model", "api_key_env", [KEY]),
        refused="model.api_key_env",
    ),
    Placement("format", doc=lambda doc: doc.__setitem__("format", KEY), refused="format"),
    Placement(
        "an unknown section named by the key",
        doc=lambda doc: doc.__setitem__(KEY, 1),
        refused="(document)",
    ),
    Placement("an unknown model field", doc=section("model", "token_value", KEY), refused="model"),
]


def preregistration(placement: Placement, url: str) -> dict[str, Any]:
    serving: dict[str, Any] = {
        "provider": placement.provider,
        "model": "oracle" if placement.provider == "reference" else MODEL,
        "base_url": url,
        "api_key_env": ENV,
    }
    if placement.provider == "vllm":
        serving["revision"] = SNAPSHOT[:12]
    if placement.provider == "ollama":
        serving["revision"] = DIGEST[:12]
    doc: dict[str, Any] = {
        "format": "poisson-tasks/preregistration@1",
        "name": "placements",
        "model": serving,
        "decoding": {
            "temperature": 1.0,
            "top_p": 1.0,
            "reasoning_effort": None,
            "max_completion_tokens": 256,
        },
        "design": {
            "arms": [ARM],
            "tasks": 1,
            "attempts": 1,
            "seed_string": "placement-test",
            "slack": 0,
            "horizon": parse_arm_id(ARM).max_turns(0),
        },
        "budget": {"tokens": 5_000_000, "wall_clock_s": 120},
        "execution": {
            "concurrency": 1,
            "max_retries": 2,
            "backoff_s": 0.001,
            "backoff_max_s": 0.01,
            "request_timeout_s": 10,
        },
    }
    if placement.doc is not None:
        placement.doc(doc)
    return doc


def run_placement(placement: Placement, tmp_path: Path) -> tuple[bytes, Any]:
    """Run, card and view one placement; everything written (less the input) and printed."""
    out = tmp_path / "run"
    source = tmp_path / "input" / "prereg.yaml"
    source.parent.mkdir()
    printed: list[str] = []
    with serve(placement.script, placement.routes) as double:
        doc = preregistration(placement, double.base_url)
        source.write_text(yaml.safe_dump(doc, sort_keys=False))
        args = ["run", str(source), "--out", str(out), "--quiet"]
        if placement.cli_base_url is not None:
            args += ["--base-url", placement.cli_base_url(double.base_url)]
        res = cli.invoke(app, args)
        printed.append(res.output)
        result = res
    if (out / "run.json").is_file():
        for args in (
            ["card", str(out), "--out", str(out / "card")],
            ["card", str(out), "--json"],
            ["card", str(out)],
            ["view", str(out), "--out", str(tmp_path / "view.html")],
        ):
            printed.append(cli.invoke(app, args).output)
    written = b"".join(
        path.read_bytes()
        for path in sorted(tmp_path.rglob("*"))
        if path.is_file() and path != source
    )
    return written + "\n".join(printed).encode(), result


def test_the_table_has_at_least_60_placements() -> None:
    assert len(PLACEMENTS) >= 60
    assert len({p.where for p in PLACEMENTS}) == len(PLACEMENTS)
    assert KEY.isalnum()  # no known key prefix: found by value, not by shape


@pytest.mark.slow
@pytest.mark.parametrize("placement", PLACEMENTS, ids=[p.where for p in PLACEMENTS])
def test_a_planted_key_is_never_written_or_printed(
    placement: Placement, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, KEY)
    blob, result = run_placement(placement, tmp_path)
    assert not leaks(blob), placement.where
    assert "Traceback" not in result.output
    if placement.refused is not None:
        errors = [line for line in result.output.splitlines() if line.startswith("error:")]
        assert result.exit_code == 2 and errors, result.output
        assert any(placement.refused in line for line in errors), errors
        assert not (tmp_path / "run").exists()
    else:
        assert result.exit_code in (0, 1, 2), result.output
