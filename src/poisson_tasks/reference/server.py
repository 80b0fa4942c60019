"""The reference endpoint's HTTP/1.1 server (httptools over asyncio), and a handle to run it in a
thread.

Requests are read by httptools, the Python binding of llhttp (Node.js's HTTP parser), not by
hand: the request line, headers, Content-Length and chunked bodies, keep-alive and pipelining all
follow its rules, and every request it refuses is answered with a 4xx naming what is wrong, the
connection then closed. Nothing a client sends can stop the event loop or another connection. On
top of the parser this module adds the limits (a head of at most MAX_HEAD bytes, else 431; a body
of at most MAX_BODY, else 413; HTTP/1.1 without a Host header, 400), `Expect: 100-continue`, and
pipelined requests answered in order, one at a time: a delayed answer (the flaky policy's) holds
the ones behind it and stops reading from its connection meanwhile. Every response carries
Content-Length. docs/reference-endpoint.md says what the server answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from types import TracebackType

import httptools

from poisson_tasks import __version__
from poisson_tasks.errors import ReferenceServerError
from poisson_tasks.policycatalogue import POLICY_NAMES, check_defaults, parse_param_options
from poisson_tasks.reference.app import ReferenceApp, Response
from poisson_tasks.reference.ratelimit import RateLimit
from poisson_tasks.reference.wire import SERVER_NAME, error_body

_KEY_ENV = "POISSON_REFERENCE_API_KEY"
MAX_HEAD = 64 * 1024
MAX_BODY = 64 * 1024 * 1024
_SERVER = f"server: {SERVER_NAME}/{__version__}"


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Status"


def _head(status: int, length: int, keep: bool, extra: tuple[tuple[str, str], ...]) -> bytes:
    types = [v for k, v in extra if k == "content-type"]
    lines = [
        f"HTTP/1.1 {status} {_reason(status)}",
        f"content-type: {types[0] if types else 'application/json'}",
        f"content-length: {length}",
        _SERVER,
    ]
    lines += [f"{k}: {v}" for k, v in extra if k != "content-type"]
    lines.append("connection: keep-alive" if keep else "connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class _Refused(Exception):
    """A request this server does not take: the 4xx it is answered with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.response = Response(status, error_body(message, "invalid_request_error"))


@dataclass(frozen=True, slots=True)
class _Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    keep: bool


class _Connection(asyncio.Protocol):
    """One client connection: httptools reads its requests (the callbacks below), and each
    complete one is answered in order; a refused one is answered after those before it."""

    def __init__(self, app: ReferenceApp, live: set[_Connection]) -> None:
        self._app = app
        self._live = live
        self._parser = httptools.HttpRequestParser(self)
        self._transport: asyncio.Transport | None = None
        self._waiting: asyncio.TimerHandle | None = None
        self._ready: deque[_Request] = deque()
        self._refused: _Refused | None = None
        self._in_head = False
        self._head_bytes = 0  # the request line's target and the headers, as parsed
        self._head_fed = 0  # the bytes fed while the head was incomplete
        self._url = bytearray()
        self._headers: dict[str, str] = {}
        self._body = bytearray()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._live.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._live.discard(self)
        self._transport = None
        if self._waiting is not None:
            self._waiting.cancel()
            self._waiting = None

    def abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()

    # ---------------------------------------------------------------- the parser's callbacks

    def on_message_begin(self) -> None:
        self._in_head, self._head_bytes, self._head_fed = True, 0, 0
        self._url.clear()
        self._headers = {}
        self._body.clear()

    def on_url(self, url: bytes) -> None:
        self._url += url
        self._count(len(url))

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value))
        self._headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def _count(self, size: int) -> None:
        self._head_bytes += size
        if self._head_bytes > MAX_HEAD:
            raise _Refused(431, "the request head is too large")

    def on_headers_complete(self) -> None:
        self._in_head = False
        if self._parser.get_http_version() == "1.1" and "host" not in self._headers:
            raise _Refused(400, "an HTTP/1.1 request needs a Host header")
        length = self._headers.get("content-length", "")
        if length.isdigit() and int(length) > MAX_BODY:  # llhttp has checked its digits
            raise _Refused(413, "the request body is too large")
        if self._headers.get("expect", "").lower() == "100-continue" and not self._busy():
            self._write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def on_body(self, body: bytes) -> None:
        self._body += body
        if len(self._body) > MAX_BODY:
            raise _Refused(413, "the request body is too large")

    def on_message_complete(self) -> None:
        self._ready.append(
            _Request(
                self._parser.get_method().decode("latin-1"),
                self._url.decode("latin-1").split("?", 1)[0],
                self._headers,
                bytes(self._body),
                self._parser.should_keep_alive(),
            )
        )
        self._body.clear()

    # ---------------------------------------------------------------- reading and answering

    def data_received(self, data: bytes) -> None:
        if self._refused is not None:
            return
        try:
            self._parser.feed_data(data)
            if self._in_head:  # a head still incomplete: the bytes fed to it so far, bounded
                self._head_fed += len(data)
                if self._head_fed > MAX_HEAD:
                    raise _Refused(431, "the request head is too large")
        except _Refused as exc:
            self._refused = exc
        except httptools.HttpParserCallbackError as exc:
            cause = exc.__context__
            self._refused = cause if isinstance(cause, _Refused) else _Refused(400, str(exc))
        except httptools.HttpParserUpgrade:  # the request asking for it was read: not answered
            if self._ready:
                self._ready.pop()
            self._refused = _Refused(400, "this server offers no protocol upgrade")
        except httptools.HttpParserError as exc:
            self._refused = _Refused(400, f"malformed HTTP request: {exc}")
        if self._refused is not None and self._transport is not None:
            self._transport.pause_reading()  # nothing more is read from this connection
        if self._waiting is None:
            self._serve()

    def _busy(self) -> bool:
        return self._waiting is not None or bool(self._ready)

    def _serve(self) -> None:
        """Answer the complete requests in order; then a refusal, if one came, and close."""
        while self._ready and self._transport is not None and self._waiting is None:
            request = self._ready.popleft()
            try:
                response = self._app.handle(
                    request.method, request.path, request.headers, request.body
                )
            except Exception as exc:  # answer, never drop the connection on a server bug
                message = f"reference endpoint failed: {type(exc).__name__}: {exc}"
                response = Response(500, error_body(message, "server_error"))
            if response.delay > 0:
                self._transport.pause_reading()  # what arrives behind it waits its turn
                loop = asyncio.get_running_loop()
                self._waiting = loop.call_later(
                    response.delay, self._send_late, response, request.keep
                )
                return
            self._send(response, request.keep)
        if self._refused is not None and not self._ready and self._waiting is None:
            self._send(self._refused.response, False)

    def _send_late(self, response: Response, keep: bool) -> None:
        self._waiting = None
        self._send(response, keep)
        if self._transport is not None and self._refused is None:
            self._transport.resume_reading()
        self._serve()

    def _send(self, response: Response, keep: bool) -> None:
        self._write(
            _head(response.status, len(response.body), keep, response.headers) + response.body
        )
        if not keep and self._transport is not None:
            self._ready.clear()
            self._transport.close()
            self._transport = None

    def _write(self, data: bytes) -> None:
        if self._transport is not None:
            self._transport.write(data)


class ReferenceServer:
    """A running reference endpoint. `base_url` is what an OpenAI client takes (it ends in /v1)."""

    def __init__(
        self, host: str, port: int, stop: Callable[[], None], alive: Callable[[], bool]
    ) -> None:
        self.host = host
        self.port = port
        self.url = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
        self.base_url = f"{self.url}/v1"
        self._stop = stop
        self._alive = alive

    @property
    def serving(self) -> bool:
        return self._alive()

    def close(self) -> None:
        """Stop serving and drop open connections; safe to call twice, from sync or async code."""
        if self._alive():
            self._stop()

    def __enter__(self) -> ReferenceServer:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    async def __aenter__(self) -> ReferenceServer:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _in_thread(app: ReferenceApp, host: str, port: int) -> ReferenceServer:
    ready = threading.Event()
    box: dict[str, object] = {}

    def run() -> None:
        loop = asyncio.new_event_loop()
        live: set[_Connection] = set()
        try:
            server = loop.run_until_complete(
                loop.create_server(lambda: _Connection(app, live), host, port)
            )
        except OSError as exc:
            box["error"] = exc
            loop.close()
            ready.set()
            return
        box["port"] = server.sockets[0].getsockname()[1]
        box["loop"] = loop
        ready.set()
        try:
            loop.run_forever()
        finally:
            server.close()
            for conn in list(live):
                conn.abort()
            loop.run_until_complete(asyncio.sleep(0))
            loop.close()

    thread = threading.Thread(target=run, name="poisson-reference-server", daemon=True)
    thread.start()
    ready.wait()
    error = box.get("error")
    if isinstance(error, OSError):
        raise ReferenceServerError(
            f"cannot serve on {host}:{port}: {error.strerror or error}; "
            "pick another port (0 picks a free one)"
        )
    loop = box["loop"]
    assert isinstance(loop, asyncio.AbstractEventLoop)

    def stop() -> None:
        with contextlib.suppress(RuntimeError):  # the loop already closed
            loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)

    bound = box["port"]
    assert isinstance(bound, int)
    return ReferenceServer(host, bound, stop, thread.is_alive)


_ANNOUNCED = re.compile(r"at http://(?:\[[^\]]+\]|[^:/\s]+):(\d+)/v1 ")


def _in_process(
    host: str,
    port: int,
    api_key: str | None,
    defaults: Mapping[str, Mapping[str, float]],
    rate_limit: RateLimit | None = None,
) -> ReferenceServer:
    """`poisson-tasks serve-reference` as a child process (the key travels in its environment;
    a rate limit as --rpm/--tpm, the only parts of one the command takes)."""
    params = [f"--param={p}.{k}={v!r}" for p, kv in defaults.items() for k, v in kv.items()]
    if rate_limit is not None:
        if rate_limit != RateLimit(rate_limit.rpm, rate_limit.tpm):
            raise ReferenceServerError(
                "a rate limit with changes, late resets, no Retry-After or drained buckets is "
                "served in-process "
                "only: start it with process=False"
            )
        params += [f"--{name}={value}" for name, value in _limits(rate_limit)]
    env = {k: v for k, v in os.environ.items() if k != _KEY_ENV}
    if api_key:
        env[_KEY_ENV] = api_key
    cmd = [
        sys.executable,
        "-m",
        "poisson_tasks.cli",
        "serve-reference",
        "--host",
        host,
        "--port",
        str(port),
        *params,
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    found = _ANNOUNCED.search(proc.stdout.readline())
    if found is None:
        proc.wait(timeout=30)
        raise ReferenceServerError(
            proc.stderr.read().strip().removeprefix("error: ")
            or "serve-reference exited before it announced its address"
        )

    def stop() -> None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    return ReferenceServer(host, int(found.group(1)), stop, lambda: proc.poll() is None)


def _limits(rate_limit: RateLimit) -> list[tuple[str, int]]:
    return [(n, v) for n, v in (("rpm", rate_limit.rpm), ("tpm", rate_limit.tpm)) if v is not None]


def start_reference_server(
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    api_key: str | None = None,
    policy_defaults: Mapping[str, Mapping[str, object]] | None = None,
    process: bool = False,
    rate_limit: RateLimit | None = None,
) -> ReferenceServer:
    """Serve the reference policies on host:port (0: a free port); returns once it accepts.

    By default it serves from a background thread of this process. `process=True` runs it as a
    child process instead, so its work does not share this interpreter's lock with the caller (a
    runner measuring its own overhead wants that); the handle is the same.
    `api_key`: when set, /v1/ routes answer 401 without `Authorization: Bearer <key>`.
    `policy_defaults`: {policy: {parameter: value}}, the defaults a model string's own parameters
    override, e.g. {"noisy": {"p_wrong_tool": 0.2}}. `rate_limit`: requests and tokens per
    minute enforced with OpenAI's headers and 429s (reference/ratelimit.py); none by default, and
    then no rate-limit header is sent. Raises PolicyError or ReferenceServerError.
    """
    defaults = check_defaults(policy_defaults or {})
    if process:
        return _in_process(host, port, api_key, defaults, rate_limit)
    return _in_thread(ReferenceApp(api_key, defaults, rate_limit), host, port)


def serve_reference(
    host: str = "127.0.0.1",
    port: int = 8765,
    *,
    api_key: str | None = None,
    params: Sequence[str] = (),
    rpm: int | None = None,
    tpm: int | None = None,
    announce: Callable[[str], None] | None = None,
) -> None:
    """Serve in the foreground until interrupted or terminated (the CLI's serve-reference): the
    policies' defaults from `policy.param=value` options, OpenAI's limits when `rpm` or `tpm` is
    given; `announce` gets the one line that says where it serves, once it does."""
    defaults = parse_param_options(list(params))
    rate_limit = RateLimit(rpm, tpm) if rpm is not None or tpm is not None else None
    server = start_reference_server(
        host, port, api_key=api_key, policy_defaults=defaults, rate_limit=rate_limit
    )
    limits = (("requests", rpm), ("tokens", tpm))
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _interrupt) if main else None
    if announce is not None:
        announce(
            f"serving reference policies at {server.base_url} ({', '.join(POLICY_NAMES)})"
            + "".join(f"; {v:,} {n} a minute" for n, v in limits if v)
            + "; Ctrl-C stops"
        )
    try:
        while server.serving:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
        if main:
            signal.signal(signal.SIGTERM, previous)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
