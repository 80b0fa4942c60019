"""serve-local's template refusals and warnings, and llama.cpp provenance from /props on a card.

No model is loaded here: the template and GGUF checks run before any model would load (the GGUF
files are metadata only, tests/gguf_writer.py), and the llama.cpp server is a tiny fake on
loopback that answers /props, /v1/models, /slots, /apply-template (rendered with Jinja2) and
/v1/chat/completions as llama.cpp does (shapes taken from a real llama.cpp server, values made
up). Whether the real server parses each template's calls is tests/test_local_served.py, with a
real model, in the CI step scripts/ci/local-model.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from endpoint_double import Answer, Seen, serve
from gguf_writer import (
    GEMMA_TOKENS,
    XML_CALL_TEMPLATE,
    chatml_model,
    gemma_model,
    qwen_model,
    write_gguf,
)
from synthetic_runs import full_run
from test_real_endpoints import lines_of, prereg, run_cli
from typer.testing import CliRunner

from poisson_tasks.calibration import card_from_run, render_document
from poisson_tasks.calibration.cardjson import card_json
from poisson_tasks.cli import app
from poisson_tasks.errors import EndpointError, LocalServeError, MissingExtraError
from poisson_tasks.local import server as local_server
from poisson_tasks.local.choice import choose_template
from poisson_tasks.local.defaults import shipped_templates
from poisson_tasks.local.facts import llamacpp_facts
from poisson_tasks.local.templates import (
    PROBE_ARGUMENTS,
    PROBE_TOOL,
    ChatTemplate,
    check_call_format,
    check_tool_section,
    family_warning,
    load_template,
    probe_conversation,
    render,
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


# What each shipped template asks the model to write for the probe call (its instructions' form).
HERMES_CALL = (
    '<tool_call>\n{"name": "' + PROBE_TOOL + '", "arguments": {"q": "probe"}}\n</tool_call>'
)
FENCED_CALL = '```json\n{"name": "' + PROBE_TOOL + '", "arguments": {"q": "probe"}}\n```'
CALL_FORMS = {"chatml-tools": HERMES_CALL, "hermes-tools": HERMES_CALL, "json-tools": FENCED_CALL}


def call_form(template: str, name: str, arguments: str) -> str:
    """The text `template` writes for one call (its CALL_FORMS row, for any name and arguments)."""
    probe = '{"name": "' + PROBE_TOOL + '", "arguments": {"q": "probe"}}'
    return CALL_FORMS[template].replace(
        probe, '{"name": "' + name + '", "arguments": ' + arguments + "}"
    )


def test_every_shipped_template_has_a_call_form_under_test() -> None:
    assert shipped_templates() == sorted(CALL_FORMS)  # a new template needs its row here and in
    # tests/test_local_served.py, which has the real server parse it


@pytest.mark.parametrize("name", sorted(CALL_FORMS))
def test_shipped_template_states_family_and_markers_and_renders_tools_and_calls(name: str) -> None:
    tpl = load_template(name)
    assert tpl is not None and tpl.family is not None and "ChatML" in tpl.family
    assert tpl.markers == ("<|im_start|>", "<|im_end|>")
    check_tool_section(tpl)
    # the form it writes for an assistant's call is the form it asks the model for
    assert check_call_format(tpl) == CALL_FORMS[name]
    asked = render(tpl, probe_conversation())
    assert '{"name": <function-name>, "arguments": <args-json-object>}' in asked or (
        call_form(name, "function_name", '{"argument": "value"}') in asked
    )
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
    assert call_form(name, "f", '{"q": 1}') in prompt
    assert "<tool_response>\n000001 ok\n</tool_response>" in prompt
    assert prompt.endswith("<|im_start|>assistant\n")


def test_hermes_tools_asks_in_qwen_own_words() -> None:
    tpl = load_template("hermes-tools")
    assert tpl is not None
    prompt = render(tpl, probe_conversation())
    assert prompt.startswith(
        "<|im_start|>system\nYou are a careful assistant.\n\n# Tools\n\nYou may call one or more "
        "functions to assist with the user query.\n\nYou are provided with function signatures "
        "within <tools></tools> XML tags:\n<tools>\n"
    )
    assert prompt.endswith(
        "</tools>\n\nFor each function call, return a json object with function name and arguments"
        ' within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, '
        '"arguments": <args-json-object>}\n</tool_call><|im_end|>\n<|im_start|>user\nUse the tool.'
        "<|im_end|>\n<|im_start|>assistant\n"
    )


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
    assert unknown.exit_code == 2 and "neither `auto` (chosen from the GGUF), a shipped" in (
        unknown.output
    )


def test_a_model_path_that_is_not_a_regular_file_is_named_for_what_it_is(
    tmp_path: Path, no_server: None
) -> None:
    """A FIFO, a device or a folder exists: serve-local says what it is, not that it is missing,
    and never opens the FIFO for reading (it would wait for a writer)."""
    fifo = tmp_path / "model.gguf"
    os.mkfifo(fifo)
    for path, what in (
        (fifo, "a FIFO (named pipe)"),
        (Path("/dev/zero"), "a device"),
        (tmp_path, "a directory"),
    ):
        with pytest.raises(LocalServeError) as info:
            local_server.start_local_server(path)
        assert str(info.value) == (
            f"{path}: is {what}, not a file; a model is a regular GGUF file: give the path of a "
            ".gguf file"
        )


NO_CALLS = (  # lists the tools, but an assistant's tool_calls vanish from the prompt
    "{% if tools %}<|im_start|>system\n{% for t in tools %}{{ t | tojson }}\n{% endfor %}"
    "<|im_end|>\n{% endif %}{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
    "{{ m['content'] or '' }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def test_template_that_writes_no_call_is_refused_before_the_model_loads(
    tmp_path: Path, gguf: Path, no_server: None
) -> None:
    path = tmp_path / "no-calls.jinja"
    path.write_text(NO_CALLS, encoding="utf-8")
    tpl = load_template(str(path))
    assert tpl is not None
    check_tool_section(tpl)  # the tools do reach the prompt ...
    with pytest.raises(LocalServeError, match="writes no tool call into an assistant turn"):
        local_server.start_local_server(gguf, template=str(path))  # ... the calls would not


def test_embedded_on_a_gguf_without_a_template_says_the_file_has_none(
    tmp_path: Path, no_server: None
) -> None:
    model = chatml_model(tmp_path / "bare.gguf", template=False)
    result = CliRunner().invoke(app, ["serve-local", str(model), "--template", "embedded"])
    assert result.exit_code == 2
    (line,) = result.output.strip().splitlines()
    assert line.startswith(
        "error: --template embedded: bare.gguf has no chat template of its own (its GGUF metadata "
        "has no tokenizer.chat_template)"
    )
    assert "the GGUF's own" not in line


def test_a_family_template_on_a_gguf_of_another_family_warns_in_one_line(
    tmp_path: Path, no_server: None
) -> None:
    warned: list[str] = []
    with pytest.raises(AssertionError, match="would have been loaded"):
        local_server.start_local_server(chatml_model(tmp_path / "c.gguf"), warn=warned.append)
    assert warned == []  # a ChatML model (SmolLM2's shape) with chatml-tools: nothing to say
    gemma = gemma_model(tmp_path / "gemma.gguf")
    for name in shipped_templates():
        warned.clear()
        with pytest.raises(AssertionError, match="would have been loaded"):
            local_server.start_local_server(gemma, template=name, warn=warned.append)
        (line,) = warned
        assert line.startswith(f"chat template {name} is written for ")
        assert "gemma.gguf (general.architecture gemma3) looks like another family: its " in line
        assert "vocabulary has no <|im_start|> or <|im_end|> token" in line


def test_serve_local_prints_the_family_warning_on_stderr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def _missing() -> Any:
        raise MissingExtraError("serve-local needs the `local` extra")

    monkeypatch.setattr(local_server, "_xllamacpp", _missing)
    gemma = gemma_model(tmp_path / "gemma.gguf")
    result = CliRunner().invoke(app, ["serve-local", str(gemma), "--template", "chatml-tools"])
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 2
    assert lines[0].startswith("warning: chat template chatml-tools is written for ChatML models")
    assert lines[1] == "error: serve-local needs the `local` extra"
    # the GGUF's own template naming other markers is enough, even where the vocabulary is unknown
    tpl = load_template("chatml-tools")
    assert tpl is not None
    meta = local_server.read_gguf_metadata(gemma)
    unknown_vocabulary = type(meta)(meta.architecture, meta.name, meta.chat_template, frozenset())
    line = family_warning(tpl, unknown_vocabulary, "gemma.gguf")
    assert (
        line is not None and "its own chat template writes none of <|im_start|> <|im_end|>" in line
    )


def test_template_file_hash_is_what_sha256sum_prints(tmp_path: Path) -> None:
    path = tmp_path / "crlf.jinja"
    path.write_bytes(b"{{ tools }}\r\n")  # no newline translation between the file and its hash
    tpl = load_template(str(path))
    assert tpl is not None and tpl.text == "{{ tools }}\r\n"
    assert tpl.file_sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    shipped = Path(local_server.__file__).parents[1] / "data" / "templates" / "chatml-tools.jinja"
    loaded = load_template("chatml-tools")
    assert loaded is not None
    assert loaded.file_sha256 == hashlib.sha256(shipped.read_bytes()).hexdigest()


# --------------------------------------------------------------------------- a fake llama.cpp


class _FakeLlamaCpp(BaseHTTPRequestHandler):
    props: ClassVar[dict[str, Any]] = {}
    models: ClassVar[dict[str, Any]] = {}
    applied: ClassVar[str] = ""
    template: ClassVar[ChatTemplate | None] = None  # when set, /apply-template renders with it
    completion: ClassVar[tuple[int, Any]] = (200, {})
    chat_format: ClassVar[str] = "peg-native"
    completions: ClassVar[list[dict[str, Any]]] = []

    def _send(self, body: Any, status: int = 200) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        slots = [{"id": 0, "params": {"chat_format": self.chat_format}}]
        routes = {
            "/props": self.props,
            "/v1/models": self.models,
            "/health": {"status": "ok"},
            "/slots": slots,
        }
        if self.path in routes:
            self._send(routes[self.path])
        else:
            self.send_error(404)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        if self.path == "/apply-template":
            tpl = self.template
            self._send({"prompt": render(tpl, body) if tpl else self.applied})
        elif self.path == "/v1/chat/completions":
            self.completions.append(body)
            self._send(self.completion[1], self.completion[0])
        else:
            self.send_error(404)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _reply(message: dict[str, Any]) -> tuple[int, Any]:
    return 200, {"choices": [{"index": 0, "finish_reason": "length", "message": message}]}


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
    handler = type("Handler", (_FakeLlamaCpp,), {"completions": []})
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


def test_server_side_call_check_hands_back_the_templates_own_call(
    fake_llamacpp: tuple[str, type[_FakeLlamaCpp]],
) -> None:
    root, handler = fake_llamacpp
    handler.template = load_template("chatml-tools")
    parsed = {"name": PROBE_TOOL, "arguments": json.dumps(PROBE_ARGUMENTS)}
    handler.completion = _reply(
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"type": "function", "id": "x", "function": parsed}],
        }
    )
    assert local_server.verify_parsed_call(root, "chatml-tools") == "peg-native"
    (sent,) = handler.completions
    assert sent["max_tokens"] == 0 and sent["tools"] == probe_conversation()["tools"]
    assert sent["messages"][-1] == {"role": "assistant", "content": CALL_FORMS["chatml-tools"]}


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        (_reply({"role": "assistant", "content": "<tool_call>..."}), "HTTP 200, chat format "),
        (
            (500, {"error": {"code": 500, "message": "does not match the expected peg-native"}}),
            "HTTP 500, chat format Content-only; it answered an error (does not match the ",
        ),
    ],
    ids=["left-as-text", "server-error"],
)
def test_server_side_call_check_refuses_calls_the_server_does_not_parse(
    fake_llamacpp: tuple[str, type[_FakeLlamaCpp]], answer: tuple[int, Any], says: str
) -> None:
    root, handler = fake_llamacpp
    handler.template = load_template("hermes-tools")
    handler.completion = answer
    handler.chat_format = "Content-only" if answer[0] == 500 else "peg-native"
    with pytest.raises(LocalServeError) as refused:
        local_server.verify_parsed_call(root, "hermes-tools")
    text = str(refused.value)
    assert text.startswith(
        "chat template hermes-tools: llama.cpp does not parse the template's own tool-call text "
        "back into that call"
    )
    assert says in text and "every call the model makes would arrive as text" in text


def test_server_side_call_check_refuses_a_server_template_that_writes_no_call(
    tmp_path: Path, fake_llamacpp: tuple[str, type[_FakeLlamaCpp]]
) -> None:
    root, handler = fake_llamacpp
    path = tmp_path / "no-calls.jinja"
    path.write_text(NO_CALLS, encoding="utf-8")
    handler.template = load_template(str(path))
    with pytest.raises(LocalServeError, match="/apply-template writes no tool call"):
        local_server.verify_parsed_call(root, "embedded (the GGUF's own)")
    assert handler.completions == []  # refused before any completion is asked for


def test_props_provenance_reaches_the_card(
    tmp_path: Path, gguf: Path, fake_llamacpp: tuple[str, type[_FakeLlamaCpp]]
) -> None:
    root, handler = fake_llamacpp
    file_text = "{{ messages }} {{ tools }}\n"
    file_sha = hashlib.sha256(file_text.encode()).hexdigest()  # what sha256sum of the file prints
    handler.props = _props(str(gguf), file_text.removesuffix("\n"))  # as llama.cpp reports it
    handler.models["data"][0]["tags"].append(f"poisson-tasks.template-file-sha256={file_sha}")
    sha = hashlib.sha256(gguf.read_bytes()).hexdigest()
    serving_decl = Serving(provider="llamacpp", model="tiny", base_url=f"{root}/v1")
    serving = asyncio.run(serving_details(serving_decl, f"{root}/v1", None))
    facts = serving.llamacpp or {}
    assert facts["model_sha256"] == sha and facts["model_bytes"] == gguf.stat().st_size
    assert facts["threads"] == 1 and facts["n_ctx"] == 4096 and facts["quantization"] == "Q4_1"
    assert facts["template_sha256"] == hashlib.sha256(b"{{ messages }} {{ tools }}").hexdigest()
    assert facts["template_file_sha256"] == file_sha != facts["template_sha256"]
    assert serving.weights_revision == f"sha256:{sha}"

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
    assert "- llama.cpp: build b9999-abcdef0 (xllamacpp 2026.10.11549); 1 thread, 1 slot" in text
    assert f"- model file: {gguf.name}, {gguf.stat().st_size:,} bytes, quantisation Q4_1" in text
    assert f"- model file sha256: `{sha}` (computed by the runner from the served file)" in text
    assert (
        f"- chat template: chatml-tools (lists tools); file sha256 `{file_sha}` (`sha256sum` of the "
        f"template file); served sha256 `{facts['template_sha256']}` (of /props `chat_template`: "
        "`curl -s HOST/props | jq -j .chat_template | sha256sum`, the file less one trailing "
        "newline if it ends in one)"
    ) in text
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


def test_a_relative_model_path_is_not_hashed_from_where_the_runner_is(
    gguf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the server reports a path relative to its own working directory; a file of that name where
    # the runner happens to be is not evidence that it is the served one
    monkeypatch.chdir(gguf.parent)
    facts = llamacpp_facts(_props(gguf.name, "t"), _models([]), "http://127.0.0.1:8080/v1")
    assert facts.model_sha256 is None and facts.model_bytes is None
    assert facts.sha256_from.startswith(
        f"not recorded: the server reports a path relative to its own working directory "
        f"({gguf.name})"
    )
    absolute = llamacpp_facts(_props(str(gguf), "t"), _models([]), "http://127.0.0.1:8080/v1")
    assert absolute.model_sha256 == hashlib.sha256(gguf.read_bytes()).hexdigest()
    gone = llamacpp_facts(_props("/no/such/m.gguf", "t"), _models([]), "http://127.0.0.1:1/v1")
    assert gone.sha256_from == "not recorded: /no/such/m.gguf is not a file on this machine"


def test_a_template_file_hash_tag_that_is_not_a_sha256_is_not_recorded(gguf: Path) -> None:
    tags = ["poisson-tasks.template-file-sha256=not-a-hash"]
    facts = llamacpp_facts(_props(str(gguf), "t"), _models(tags), "http://10.1.2.3:8080/v1")
    assert facts.template_file_sha256 is None


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


# --------------------------------------------------------------------------- the choice, the probe


def test_the_template_is_chosen_from_the_ggufs_metadata(tmp_path: Path) -> None:
    # issue 34 item 7: chatml-tools was chosen for every model; Qwen wants hermes-tools, and
    # Qwen2.5-Coder writes its calls as fenced JSON under either tag form
    read = local_server.read_gguf_metadata
    chose = {
        "chatml": choose_template(read(chatml_model(tmp_path / "c.gguf")), "c.gguf"),
        "chatml, no template": choose_template(
            read(chatml_model(tmp_path / "b.gguf", template=False)), "b.gguf"
        ),
        "qwen2.5": choose_template(read(qwen_model(tmp_path / "q.gguf")), "q.gguf"),
        "qwen2.5-coder": choose_template(
            read(
                qwen_model(
                    tmp_path / "qc.gguf",
                    name="Qwen2.5 Coder 0.5B Instruct",
                    basename="Qwen2.5-Coder",
                )
            ),
            "qc.gguf",
        ),
        "qwen3-coder": choose_template(
            read(
                qwen_model(
                    tmp_path / "q3.gguf",
                    name="Qwen3 Coder 30B A3B Instruct",
                    architecture="qwen3moe",
                    template=XML_CALL_TEMPLATE,
                )
            ),
            "q3.gguf",
        ),
        "gemma with tools": choose_template(
            read(
                write_gguf(
                    tmp_path / "gt.gguf",
                    {
                        "general.architecture": "gemma3",
                        "tokenizer.ggml.tokens": GEMMA_TOKENS,
                        "tokenizer.chat_template": "{% if tools %}{{ tools }}{% endif %}",
                    },
                )
            ),
            "gt.gguf",
        ),
    }
    assert {k: v.name for k, v in chose.items()} == {
        "chatml": "chatml-tools",
        "chatml, no template": "chatml-tools",
        "qwen2.5": "hermes-tools",
        "qwen2.5-coder": "json-tools",
        "qwen3-coder": "embedded",
        "gemma with tools": "embedded",
    }
    assert "general.architecture llama" in chose["chatml"].reason
    assert "Qwen2.5 Coder 0.5B Instruct" in chose["qwen2.5-coder"].reason
    assert "<tool_call> tags" in chose["qwen2.5"].reason
    with pytest.raises(LocalServeError, match="no shipped template fits it"):
        choose_template(read(gemma_model(tmp_path / "g.gguf")), "g.gguf")


def test_auto_serves_the_chosen_template_and_a_given_other_one_warns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_server: None
) -> None:
    loaded: list[str] = []
    real = local_server.load_template

    def spy(spec: str) -> ChatTemplate | None:
        loaded.append(spec)
        return real(spec)

    monkeypatch.setattr(local_server, "load_template", spy)
    qwen = qwen_model(tmp_path / "qwen.gguf")
    warned: list[str] = []
    with pytest.raises(AssertionError, match="would have been loaded"):
        local_server.start_local_server(qwen, warn=warned.append)  # --template auto
    assert loaded == ["hermes-tools"] and warned == []
    with pytest.raises(AssertionError, match="would have been loaded"):
        local_server.start_local_server(qwen, template="chatml-tools", warn=warned.append)
    (line,) = warned
    assert line.startswith(
        "--template chatml-tools: the GGUF's metadata points to hermes-tools (its own chat "
        "template asks for calls as JSON inside <tool_call> tags"
    )
    assert line.endswith("; serving chatml-tools as given")


def _calls(*names: str) -> tuple[int, Any]:
    calls = [
        {"type": "function", "id": str(i), "function": {"name": n, "arguments": '{"q": "probe"}'}}
        for i, n in enumerate(names)
    ]
    return _reply({"role": "assistant", "content": "", "tool_calls": calls})


@pytest.mark.parametrize(
    ("answer", "outcome"),
    [
        (_calls(PROBE_TOOL), "native"),
        (_reply({"role": "assistant", "content": FENCED_CALL}), "text"),
        (_reply({"role": "assistant", "content": "I cannot call tools."}), "prose"),
        (
            (500, {"error": {"code": 500, "message": "Failed to parse tool call arguments"}}),
            "error",
        ),
    ],
    ids=["native", "text", "prose", "error"],
)
def test_the_start_up_tool_call_says_what_came_back(
    fake_llamacpp: tuple[str, type[_FakeLlamaCpp]], answer: tuple[int, Any], outcome: str
) -> None:
    # issue 34 item 7: a user learns before a study whether the template and the model agree
    root, handler = fake_llamacpp
    handler.completion = answer
    probe = local_server.probe_tool_call(root)
    assert probe.outcome == outcome and probe.native == (outcome == "native")
    (sent,) = handler.completions
    assert sent["temperature"] == 0.0 and sent["max_tokens"] == local_server.PROBE_MAX_TOKENS
    assert PROBE_TOOL in sent["messages"][-1]["content"] and sent["tools"][0]["function"]["name"]
    report = probe.report("chatml-tools")
    if probe.native:
        assert f"a native tool call (1 call to {PROBE_TOOL};" in report and "agree" in report
    else:
        assert "the template and this model do not agree" in report
        assert "--template hermes-tools or json-tools, or a file" in report


def test_serve_local_announces_its_template_start_up_call_and_address() -> None:
    import dataclasses

    from poisson_tasks.local.server import LocalServer, ToolCallProbe

    probe = ToolCallProbe(outcome="native", said="probe(x=1)", seconds=0.25)
    server = LocalServer(
        base_url="http://127.0.0.1:9/v1",
        alias="tiny",
        model_path=Path("tiny.gguf"),
        template=None,
        threads=1,
        n_ctx=4096,
        chat_format=None,
        handle=None,
        template_note="the GGUF's own",
        probe=probe,
    )
    assert server.announcement() == [
        "template embedded, the GGUF's own",
        f"start-up tool call: {probe.report('embedded')}",
        "serving tiny at http://127.0.0.1:9/v1 (llama.cpp, 1 thread, n_ctx 4096, template "
        "embedded; tool calls parsed by llama.cpp, chat format not reported); Ctrl-C stops",
    ]
    quiet = dataclasses.replace(server, probe=ToolCallProbe("prose", "", 0.1))
    assert len(quiet.announcement()) == 2  # a call that did not come back native: a warning said so
