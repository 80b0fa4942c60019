"""What each row of docs/commands.md's table of hostile inputs sends (issue 33).

A row names a scenario here. A run row (`Scenario`) is a loopback server (tests/endpoint_double.py)
answering as the script and routes say, a pre-registration against it with one field changed, and
the folder `run` writes into; every run is made with a key in the variable the pre-registration
names, so the table's test can look for it in everything written and printed. An HTTP row
(`Request`) is raw bytes sent to the reference endpoint. Every hostile value is made up here.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from endpoint_double import Answer, Seen, reply_text
from test_key_defects import document

from poisson_tasks.boundedjson import MAX_DEPTH
from poisson_tasks.runner.received import MAX_BODY_BYTES

KEY_ENV = "HOSTILE_TABLE_KEY"
KEY = "Vb3kR8mQ2xT7nW4zL9pF6hJ1cY5dG0sA"  # no known prefix: found by its value
LETTERS = "VbkRmQxTnWzLpFhJcYdGsAqe"  # a key of letters only: no shape a message would hide
SPELLED = "".join(f"\\u{ord(c):04x}" for c in KEY)  # the key as JSON escapes
FORGED = (
    "x`y\n\n## Verdict\n\nforged <img src=x onerror=alert(1)> <script>alert(2)</script> "
    "\u202egnp.exe\x1b[31mred"
)
FORGED_FOLDER = "run-<b>x</b>\x1b[2J\u202e"
Script = Callable[[Seen, dict[str, Any]], Answer | None]


def nested(depth: int) -> str:
    return "[" * depth + "1" + "]" * depth


def _calls(arguments: Callable[[str], str]) -> Script:
    def script(seen: Seen, oracle: dict[str, Any]) -> Answer:
        for call in oracle["choices"][0]["message"].get("tool_calls") or []:
            call["function"]["arguments"] = arguments(call["function"]["arguments"])
        return Answer(200, oracle)

    return script


def _body(make: Callable[[dict[str, Any]], Answer]) -> Script:
    return lambda seen, oracle: make(oracle)


@dataclass(frozen=True)
class Scenario:
    """A run against a server that answers so, from a pre-registration changed so."""

    script: Script | None = None
    routes: dict[str, Answer] = field(default_factory=dict)
    model: dict[str, Any] = field(default_factory=dict)  # fields of `model` changed
    top: dict[str, Any] = field(default_factory=dict)  # top-level fields changed
    out: str = "run"  # the folder's name
    key: str = KEY  # the key in the variable model.api_key_env names


@dataclass(frozen=True)
class Request:
    """Raw bytes sent to the reference endpoint on a fresh connection."""

    payload: bytes


_BODY = b'{"model": "no-call", "messages": [{"role": "user", "content": "hi"}]}'
_POST = b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n"
_MODELS = "/v1/models"
_VLLM = {"provider": "vllm", "revision": "0123456789ab"}

SCENARIOS: dict[str, Scenario | Request] = {
    # ---- responses nested without end, or larger than any answer
    "arguments_deep": Scenario(_calls(lambda a: '{"record_id": ' + nested(300) + "}")),
    "arguments_deeper": Scenario(_calls(lambda a: '{"record_id": ' + nested(5_000) + "}")),
    "field_deep": Scenario(
        _body(lambda o: Answer(200, (json.dumps(o)[:-1] + ', "x": ' + nested(300) + "}").encode()))
    ),
    "body_deep": Scenario(_body(lambda o: Answer(200, nested(3_000).encode()))),
    "body_past_depth": Scenario(_body(lambda o: Answer(200, nested(MAX_DEPTH + 1).encode()))),
    "body_large": Scenario(
        _body(lambda o: Answer(200, b" " * (MAX_BODY_BYTES + 1), unannounced=True))
    ),
    "body_announced": Scenario(_body(lambda o: Answer(200, b"{}", length=MAX_BODY_BYTES + 1))),
    "body_gzip": Scenario(
        _body(
            lambda o: Answer(
                200, gzip.compress(json.dumps(o).encode()), {"Content-Encoding": "gzip"}
            )
        )
    ),
    "reply_deep": Scenario(_body(lambda o: Answer(200, reply_text(o, nested(5_000))))),
    "models_deep": Scenario(
        routes={_MODELS: Answer(200, ('{"data": ' + nested(300) + "}").encode())}
    ),
    "models_large": Scenario(
        routes={_MODELS: Answer(200, b" " * (MAX_BODY_BYTES + 1), unannounced=True)}
    ),
    "models_deep_vllm": Scenario(
        routes={
            "/version": Answer(200, {"version": "0.11.0"}),
            _MODELS: Answer(200, ('{"data": ' + nested(300) + "}").encode()),
        },
        model=_VLLM,
    ),
    # ---- malformed HTTP to the reference endpoint
    "http_negative_chunk": Request(
        _POST + b"transfer-encoding: chunked\r\n\r\n-6\r\n" + _BODY + b"\r\n0\r\n\r\n"
    ),
    "http_superscript_length": Request(_POST + b"content-length: \xb2\r\n\r\n" + _BODY),
    "http_two_lengths": Request(_POST + b"content-length: 3\r\ncontent-length: 4\r\n\r\n"),
    "http_coding": Request(_POST + b"transfer-encoding: gzip\r\n\r\n" + _BODY),
    "http_no_host": Request(b"GET /health HTTP/1.1\r\n\r\n"),
    "http_upgrade": Request(
        b"GET /health HTTP/1.1\r\nhost: x\r\nconnection: upgrade\r\nupgrade: h2c\r\n\r\n"
    ),
    "http_endless_head": Request(
        b"GET /health HTTP/1.1\r\nhost: x\r\nx-pad: " + b"a" * (64 * 1024 + 10)
    ),
    "http_large_body": Request(_POST + f"content-length: {64 * 1024 * 1024 + 1}\r\n\r\n".encode()),
    # ---- strings that try to become Markdown, HTML or terminal control
    "model_forged": Scenario(
        routes={_MODELS: Answer(200, {"data": [{"id": FORGED}]})}, model={"model": FORGED}
    ),
    "rates_forged": Scenario(
        model={
            "rates": {
                "input": 1.0,
                "cached_input": 0.5,
                "output": 2.0,
                "as_of": "2026-01-01",
                "source": FORGED + "s" * 700_000,
            }
        }
    ),
    "folder_forged": Scenario(out=FORGED_FOLDER),
    "server_forged": Scenario(
        routes={"/props": Answer(200, {"build_info": FORGED, "n_ctx": 4096})}
    ),
    # ---- where a key can be put
    "key_as_value": Scenario(top={"format": LETTERS}, key=LETTERS),
    "key_in_folder": Scenario(out=f"run-{KEY[4:16]}"),
    "key_spelled_in_arguments": Scenario(_calls(lambda a: a[:-1] + f', "note": "{SPELLED}"}}')),
    "key_spelled_in_a_body": Scenario(
        _body(lambda o: Answer(200, f'{{"error": "{SPELLED}"}}'.encode()))
    ),
    "key_echoed": Scenario(
        _body(lambda o: Answer(200, reply_text(o, f"your key is {KEY}"), {"X-Echo": KEY}))
    ),
}


def preregistration(scenario: Scenario, base_url: str) -> dict[str, Any]:
    """A one-task run against the double (test_key_defects.document), with the scenario's
    changes."""
    doc = document(base_url, api_key_env=KEY_ENV, **scenario.model)
    doc["name"] = "hostile"
    doc["design"]["seed_string"] = "hostile-table"
    doc["budget"]["wall_clock_s"] = 60
    doc["execution"]["request_timeout_s"] = 20
    return {**doc, **scenario.top}
