"""The reference endpoint's streamed answer (stream: true), which the verifiers null harness asks for.

The streamed answer carries the same message, finish reason and usage as the unstreamed one; the
official client's stream reader rebuilds it.
"""

from __future__ import annotations

from typing import Any

import openai
import orjson
import pytest

from poisson_tasks.generator import generate
from poisson_tasks.reference import start_reference_server
from poisson_tasks.reference.app import ReferenceApp


def _request(model: str, streamed: bool, **extra: Any) -> bytes:
    bundle = generate("depth:d3", 1)
    body = {"model": model, "messages": bundle.messages(), "tools": bundle.tools, **extra}
    if streamed:
        body["stream"] = True
    return orjson.dumps(body)


def _events(body: bytes) -> list[Any]:
    assert body.endswith(b"data: [DONE]\n\n")
    frames = [f for f in body.split(b"\n\n") if f]
    assert all(f.startswith(b"data: ") for f in frames)
    return [orjson.loads(f[6:]) for f in frames[:-1]]


@pytest.mark.parametrize("model", ["oracle", "no-call", "garbage"])
def test_streamed_answer_holds_the_unstreamed_message(model: str) -> None:
    app = ReferenceApp()
    plain = orjson.loads(
        app.handle("POST", "/v1/chat/completions", {}, _request(model, False)).body
    )
    resp = app.handle(
        "POST",
        "/v1/chat/completions",
        {},
        _request(model, True, stream_options={"include_usage": True}),
    )
    assert resp.status == 200
    assert ("content-type", "text/event-stream") in resp.headers
    first, last, usage = _events(resp.body)
    delta = first["choices"][0]["delta"]
    message = plain["choices"][0]["message"]
    assert delta["content"] == message["content"]
    calls = [{k: v for k, v in c.items() if k != "index"} for c in delta.get("tool_calls", [])]
    got = [c["function"] for c in calls]
    want = [c["function"] for c in message.get("tool_calls", [])]
    assert got == want
    assert last["choices"][0]["finish_reason"] == plain["choices"][0]["finish_reason"]
    assert usage["usage"] == plain["usage"] and usage["choices"] == []


def test_stream_without_usage_option_sends_no_usage_chunk() -> None:
    resp = ReferenceApp().handle("POST", "/v1/chat/completions", {}, _request("oracle", True))
    assert len(_events(resp.body)) == 2


def test_stream_must_be_a_boolean() -> None:
    resp = ReferenceApp().handle(
        "POST", "/v1/chat/completions", {}, _request("oracle", False, stream="yes")
    )
    assert resp.status == 400 and b"'stream' must be true or false" in resp.body


def test_the_openai_client_reads_the_stream() -> None:
    bundle = generate("depth:d3", 1)
    with start_reference_server() as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
        plain = client.chat.completions.create(
            model="oracle", messages=bundle.messages(), tools=bundle.tools
        )
        with client.chat.completions.stream(
            model="oracle",
            messages=bundle.messages(),
            tools=bundle.tools,
            stream_options={"include_usage": True},
        ) as stream:
            final = stream.get_final_completion()
    assert final.choices[0].finish_reason == plain.choices[0].finish_reason
    got = [
        (c.function.name, c.function.arguments) for c in final.choices[0].message.tool_calls or []
    ]
    want = [
        (c.function.name, c.function.arguments) for c in plain.choices[0].message.tool_calls or []
    ]
    assert got == want and got
    assert final.usage == plain.usage
