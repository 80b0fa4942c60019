"""serve-local's template refusal, and llama.cpp provenance from /props on a card.

No model is loaded here: the template checks run before any model would load, and the llama.cpp
server is a tiny fake on loopback that answers /props, /v1/models and /apply-template as
llama.cpp does (shapes taken from a real llama.cpp server, values made up). A real server and a
real model run in the CI step scripts/ci/local-model.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from endpoint_double import Answer, Seen, serve
from synthetic_runs import full_run
from test_real_endpoints import lines_of, prereg, run_cli
from typer.testing import CliRunner

from poisson_tasks.calibration import card_from_run, render_document
from poisson_tasks.calibration.cardjson import card_json
from poisson_tasks.cli import app
from poisson_tasks.errors import EndpointError, LocalServeError
from poisson_tasks.local import server as local_server
from poisson_tasks.local.facts import llamacpp_facts
from poisson_tasks.local.templates import (
    PROBE_TOOL,
    check_tool_section,
    load_template,
    probe_conversation,
    render,
    shipped_templates,
)
from poisson_tasks.prereg import Serving
from poisson_tasks.runner.provenance import serving_details

NO_TOOLS = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.fixture
def gguf(tmp_path: Path) -> Path:
    """A stand-in model file: bytes only, never loaded."""
    path = tmp_path / "tiny-model.Q4_1.gguf"
    path.write_bytes(b"GGUF" + bytes(range(256)) * 40)
    return path


@pytest.fixture
def no_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if serve-local gets as far as loading llama.cpp."""

    def _boom() -> Any:
        raise AssertionError("the model would have been loaded")

    monkeypatch.setattr(local_server, "_xllamacpp", _boom)


# --------------------------------------------------------------------------- templates


def test_shipped_template_states_family_and_renders_tools_and_calls() -> None:
    assert "chatml-tools" in shipped_templates()
    tpl = load_template("chatml-tools")
    assert tpl is not None and tpl.family is not None and "ChatML" in tpl.family
    check_tool_section(tpl)
    conv = probe_conversation()
    conv["messages"] += [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c0", "type": "function", "function": {"name": "f", "arguments": '{"q": 1}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c0", "content": "000001 ok"},
    ]
    prompt = render(tpl, conv)
    assert f'"name": "{PROBE_TOOL}"' in prompt
    assert '<tool_call>\n{"name": "f", "arguments": {"q": 1}}\n</tool_call>' in prompt
    assert "<tool_response>\n000001 ok\n</tool_response>" in prompt
    assert prompt.endswith("<|im_start|>assistant\n")


def test_template_without_tool_section_is_refused_before_the_model_loads(
    tmp_path: Path, gguf: Path, no_server: None
) -> None:
    plain = tmp_path / "plain.jinja"
    plain.write_text(NO_TOOLS, encoding="utf-8")
    with pytest.raises(LocalServeError, match="renders no tool section"):
        local_server.start_local_server(gguf, template=str(plain))
    # a template that mentions tools but never renders them is refused too
    silent = tmp_path / "silent.jinja"
    silent.write_text("{% if tools %}{% endif %}" + NO_TOOLS, encoding="utf-8")
    with pytest.raises(LocalServeError, match="tools would never reach the model"):
        local_server.start_local_server(gguf, template=str(silent))


def test_serve_local_cli_refuses_in_one_line(tmp_path: Path, gguf: Path, no_server: None) -> None:
    plain = tmp_path / "plain.jinja"
    plain.write_text(NO_TOOLS, encoding="utf-8")
    result = CliRunner().invoke(app, ["serve-local", str(gguf), "--template", str(plain)])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: chat template plain.jinja:")
    missing = CliRunner().invoke(app, ["serve-local", str(tmp_path / "none.gguf")])
    assert missing.exit_code == 2 and "no such model file" in missing.output
    unknown = CliRunner().invoke(app, ["serve-local", str(gguf), "--template", "nope"])
    assert unknown.exit_code == 2 and "neither a shipped template" in unknown.output


# --------------------------------------------------------------------------- a fake llama.cpp


class _FakeLlamaCpp(BaseHTTPRequestHandler):
    props: ClassVar[dict[str, Any]] = {}
    models: ClassVar[dict[str, Any]] = {}
    applied: ClassVar[str] = ""

    def _send(self, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        routes = {"/props": self.props, "/v1/models": self.models, "/health": {"status": "ok"}}
        if self.path in routes:
            self._send(routes[self.path])
        else:
            self.send_error(404)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path == "/apply-template":
            self._send({"prompt": self.applied})
        else:
            self.send_error(404)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _props(model_path: str, template: str) -> dict[str, Any]:
    return {
        "default_generation_settings": {"params": {"chat_format": "Content-only"}, "n_ctx": 4096},
        "total_slots": 1,
        "model_alias": "tiny",
        "model_ftype": "Q4_1",
        "model_path": model_path,
        "chat_template": template,
        "chat_template_caps": {"supports_tools": True, "supports_tool_calls": True},
        "build_info": "b9999-abcdef0",
    }


def _models(tags: list[str]) -> dict[str, Any]:
    meta = {"n_params": 134515008, "n_ctx": 4096, "size": 96576768, "ftype": "Q4_1"}
    return {"object": "list", "data": [{"id": "tiny", "tags": tags, "meta": meta}]}


@pytest.fixture
def fake_llamacpp(gguf: Path) -> Iterator[tuple[str, type[_FakeLlamaCpp]]]:
    handler = type("Handler", (_FakeLlamaCpp,), {})
    handler.props = _props(str(gguf), "{{ messages }} {{ tools }}")
    handler.models = _models(
        [
            "poisson-tasks.threads=1",
            "poisson-tasks.template=chatml-tools",
            "poisson-tasks.server=xllamacpp 2026.10.11549",
            "poisson-tasks.started-by=serve-local",
        ]
    )
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", handler
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_server_side_template_check(fake_llamacpp: tuple[str, type[_FakeLlamaCpp]]) -> None:
    root, handler = fake_llamacpp
    handler.applied = f"<|im_start|>system\n<tools>{PROBE_TOOL}</tools>"
    local_server.verify_applied_template(root, "chatml-tools")
    handler.applied = "<|im_start|>system\nYou are a careful assistant.<|im_end|>"
    with pytest.raises(LocalServeError, match="server's /apply-template renders no tool section"):
        local_server.verify_applied_template(root, "embedded (the GGUF's own)")


def test_props_provenance_reaches_the_card(
    tmp_path: Path, gguf: Path, fake_llamacpp: tuple[str, type[_FakeLlamaCpp]]
) -> None:
    root, _ = fake_llamacpp
    sha = hashlib.sha256(gguf.read_bytes()).hexdigest()
    serving_decl = Serving(provider="llamacpp", model="tiny", base_url=f"{root}/v1")
    serving = asyncio.run(serving_details(serving_decl, f"{root}/v1", None))
    facts = serving["llamacpp"]
    assert facts["model_sha256"] == sha and facts["model_bytes"] == gguf.stat().st_size
    assert facts["threads"] == 1 and facts["n_ctx"] == 4096 and facts["quantization"] == "Q4_1"
    assert facts["template_sha256"] == hashlib.sha256(b"{{ messages }} {{ tools }}").hexdigest()
    assert serving["weights_revision"] == f"sha256:{sha}"

    arms = ["depth:d1", "depth:d2"]
    folder = full_run(
        tmp_path / "run",
        arms,
        range(10),
        1,
        lambda a, s, k: "passed",
        provider="llamacpp",
        model="tiny",
        serving=serving,
    )
    artifact = card_from_run(folder)
    text = render_document(artifact)
    assert "- served: self-served (llamacpp)" in text
    assert "- serving stack: llama.cpp b9999-abcdef0" in text
    assert (
        "- llama.cpp: build b9999-abcdef0 (xllamacpp 2026.10.11549); 1 thread(s), 1 slot(s)" in text
    )
    assert f"- model file: {gguf.name}, {gguf.stat().st_size:,} bytes, quantisation Q4_1" in text
    assert f"- model file sha256: `{sha}` (computed by the runner from the served file)" in text
    assert f"chat template: chatml-tools, sha256 `{facts['template_sha256']}`" in text
    assert json.loads(card_json(artifact))["provenance"]["serving"]["llamacpp"]["threads"] == 1


def test_declared_revision_is_checked_against_the_served_file(
    fake_llamacpp: tuple[str, type[_FakeLlamaCpp]],
) -> None:
    root, _ = fake_llamacpp
    wrong = Serving(provider="llamacpp", model="tiny", base_url=f"{root}/v1", revision="sha256:00")
    with pytest.raises(EndpointError, match=r"fix model\.revision or serve the declared revision"):
        asyncio.run(serving_details(wrong, f"{root}/v1", None))


def test_remote_server_file_is_not_hashed(gguf: Path) -> None:
    facts = llamacpp_facts(_props(str(gguf), "t"), _models([]), "http://10.1.2.3:8080/v1")
    assert facts.model_sha256 is None and facts.model_file == gguf.name
    assert facts.sha256_from == "not recorded: the server is not on this machine"
    assert facts.threads is None and facts.template is None


# --------------------------------------------------------------------------- llama.cpp's 500

LLAMACPP_UNPARSED = {
    "error": {
        "code": 500,
        "message": "Failed to parse tool call arguments as JSON: [json.exception.parse_error.101] "
        "parse error at line 1, column 12: syntax error while parsing value - invalid literal",
        "type": "server_error",
    }
}


@pytest.mark.parametrize("turn", [0, 1], ids=["on-the-reply", "on-the-history"])
def test_llamacpp_500_for_unparsed_arguments_is_the_models_malformed_call(
    tmp_path: Path, turn: int
) -> None:
    def script(seen: Seen, oracle: dict[str, Any]) -> Answer | None:
        return Answer(500, LLAMACPP_UNPARSED) if seen.turn == turn else None

    with serve(script) as double:
        res = run_cli(prereg(tmp_path, double.base_url, tasks=2), tmp_path / "run")
        requests = len(double.requests)
    lines = lines_of(tmp_path / "run")
    assert [ln.outcome for ln in lines] == ["malformed_call", "malformed_call"]
    assert all(ln.malformed_clause == 1 and ln.unparsed_text_calls == 1 for ln in lines)
    assert all(
        "Failed to parse tool call arguments" in ln.transcript["text_calls"][0] for ln in lines
    )
    assert requests == 2 * (turn + 1)  # not retried: the same call would fail the same way
    assert res.exit_code == 1  # the format alarm: recorded, and said loudly
    if turn == 1:  # the structured call made before it counts: the card is not a no-call one
        (cell,) = card_from_run(tmp_path / "run").cells
        assert cell.scored == 2 and cell.instrument.count == 0
