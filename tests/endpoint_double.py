"""A hand-made OpenAI-compatible server for the runner's tests: real sockets on a free loopback port.

By default every chat request is answered as the reference `oracle` policy would answer it (so the
episode can go on); a test's `script` replaces or alters any answer: a tool call written as text in
some dialect, an answer without usage, a 400 in a server's context-overflow wording, a 200 whose
body is not JSON, a trickled body, Retry-After headers. `routes` answers the GET (and other) routes
a preflight reads: /version, /v1/models, /api/version, /api/show, /props. Every request is logged.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from poisson_tasks.reference.app import ReferenceApp

MODEL = "double-model"
CHAT = "/v1/chat/completions"


@dataclass
class Answer:
    """What the double sends: a status, a body (JSON-encoded unless bytes), headers, and an
    optional trickle (bytes per second) for the body."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    trickle_bps: float | None = None
    length: int | None = None  # a Content-Length to announce (a truncated body announces more)
    unannounced: bool = False  # no Content-Length: the body ends when the connection closes


@dataclass
class Seen:
    """One chat request as received."""

    body: dict[str, Any]
    headers: dict[str, str]
    turn: int  # assistant messages already in the conversation: 0 on an episode's first request


# A script sees the request, its turn, and the oracle's answer, and returns what to send.
Script = Callable[[Seen, dict[str, Any]], Answer | None]


def oracle_body(request: dict[str, Any]) -> dict[str, Any]:
    """The reference oracle's completion for this request (whatever model it names)."""
    body = json.dumps({**request, "model": "oracle"}).encode()
    resp = ReferenceApp().handle("POST", CHAT, {}, body)
    out: dict[str, Any] = json.loads(resp.body)
    out["model"] = request.get("model", MODEL)
    return out


def reply_text(oracle: dict[str, Any], text: str, **message: Any) -> dict[str, Any]:
    """The oracle's completion with its message replaced by plain text (no tool calls)."""
    out = json.loads(json.dumps(oracle))
    out["choices"][0]["message"] = {"role": "assistant", "content": text, **message}
    out["choices"][0]["finish_reason"] = "stop"
    return out


class Double:
    def __init__(self, script: Script | None, routes: dict[str, Answer]) -> None:
        self.script = script
        self.routes = routes
        self.requests: list[Seen] = []
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def root(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def base_url(self) -> str:
        return self.root + "/v1"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        double = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _send(self, answer: Answer) -> None:
                raw = (
                    answer.body
                    if isinstance(answer.body, bytes)
                    else json.dumps(answer.body).encode()
                )
                self.send_response(answer.status)
                self.send_header("Content-Type", "application/json")
                if answer.unannounced:
                    self.send_header("Connection", "close")
                    self.close_connection = True
                else:
                    self.send_header("Content-Length", str(answer.length or len(raw)))
                for k, v in answer.headers.items():
                    self.send_header(k, v)
                self.end_headers()
                try:
                    if answer.trickle_bps:
                        step = max(1, int(answer.trickle_bps / 4))
                        for i in range(0, len(raw), step):
                            self.wfile.write(raw[i : i + step])
                            self.wfile.flush()
                            time.sleep(step / answer.trickle_bps)
                    else:
                        self.wfile.write(raw)
                    if answer.length is not None and answer.length > len(raw):
                        self.close_connection = True
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

            def _route(self, method: str) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                data = self.rfile.read(n) if n else b""
                key = f"{method} {self.path}"
                if method == "POST" and self.path == CHAT:
                    request = json.loads(data)
                    turn = sum(1 for m in request["messages"] if m.get("role") == "assistant")
                    seen = Seen(request, {k.lower(): v for k, v in self.headers.items()}, turn)
                    with double.lock:
                        double.requests.append(seen)
                    oracle = oracle_body(request)
                    answer = double.script(seen, oracle) if double.script else None
                    self._send(answer or Answer(200, oracle))
                    return
                answer = double.routes.get(key) or double.routes.get(self.path)
                if answer is None and key == "GET /v1/models":
                    answer = Answer(200, {"object": "list", "data": [{"id": MODEL}]})
                self._send(answer or Answer(404, {"error": {"message": f"no route {key}"}}))

            def do_GET(self) -> None:
                self._route("GET")

            def do_POST(self) -> None:
                self._route("POST")

        return Handler


@contextmanager
def serve(
    script: Script | None = None, routes: dict[str, Answer] | None = None
) -> Iterator[Double]:
    """The double, listening on a free loopback port for the `with` block."""
    double = Double(script, routes or {})
    double.thread.start()
    try:
        yield double
    finally:
        double.server.shutdown()
        double.server.server_close()
