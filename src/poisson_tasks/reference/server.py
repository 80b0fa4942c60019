"""A lean asyncio HTTP/1.1 server for the reference endpoint, and a handle to run it in a thread.

Keep-alive, pipelining (answered in order), Content-Length and chunked request bodies, and
`Expect: 100-continue` are supported; every response carries Content-Length. It is written for
loopback benchmarks and tests, where per-request server cost is what a runner's overhead is
measured against.
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
from collections.abc import Callable, Mapping
from types import TracebackType

from poisson_tasks import __version__
from poisson_tasks.errors import ReferenceServerError
from poisson_tasks.policycatalogue import check_defaults
from poisson_tasks.reference.app import ReferenceApp, Response
from poisson_tasks.reference.ratelimit import RateLimit
from poisson_tasks.reference.wire import SERVER_NAME, error_body

_KEY_ENV = "POISSON_REFERENCE_API_KEY"
MAX_HEAD = 64 * 1024
MAX_BODY = 64 * 1024 * 1024
_REASONS = {
    100: "Continue",
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Payload Too Large",
    429: "Too Many Requests",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
}


class _BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _dechunk(buf: bytearray, pos: int) -> tuple[bytes, int] | None:
    """A chunked body starting at `pos`: (body, end) once complete, else None."""
    out = bytearray()
    while True:
        nl = buf.find(b"\r\n", pos)
        if nl < 0:
            return None
        try:
            size = int(bytes(buf[pos:nl]).split(b";")[0].strip(), 16)
        except ValueError:
            raise _BadRequest(400, "a chunk size is not hexadecimal") from None
        pos = nl + 2
        if size == 0:
            if buf[pos : pos + 2] == b"\r\n":
                return bytes(out), pos + 2
            end = buf.find(b"\r\n\r\n", pos)
            return None if end < 0 else (bytes(out), end + 4)
        if len(out) + size > MAX_BODY:
            raise _BadRequest(413, "the request body is too large")
        if len(buf) < pos + size + 2:
            return None
        out += buf[pos : pos + size]
        pos += size + 2


def _head(status: int, length: int, keep: bool, extra: tuple[tuple[str, str], ...]) -> bytes:
    types = [v for k, v in extra if k == "content-type"]
    extra = tuple((k, v) for k, v in extra if k != "content-type")
    lines = [
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}",
        f"content-type: {types[0] if types else 'application/json'}",
        f"content-length: {length}",
        f"server: {SERVER_NAME}/{__version__}",
    ]
    lines += [f"{k}: {v}" for k, v in extra]
    lines.append("connection: keep-alive" if keep else "connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class _Connection(asyncio.Protocol):
    """One client connection: parse requests from the buffer and answer them in order."""

    def __init__(self, app: ReferenceApp, live: set[_Connection]) -> None:
        self._app = app
        self._live = live
        self._buf = bytearray()
        self._transport: asyncio.Transport | None = None
        self._waiting: asyncio.TimerHandle | None = None
        self._continued = False

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

    def data_received(self, data: bytes) -> None:
        self._buf += data
        if self._waiting is None:
            self._serve()

    def _serve(self) -> None:
        while self._transport is not None and self._waiting is None:
            try:
                parsed = self._parse()
            except _BadRequest as exc:
                self._send(
                    Response(exc.status, error_body(str(exc), "invalid_request_error")), False
                )
                return
            if parsed is None:
                return
            method, path, headers, body, keep = parsed
            try:
                response = self._app.handle(method, path, headers, body)
            except Exception as exc:  # answer, never drop the connection on a server bug
                message = f"reference endpoint failed: {type(exc).__name__}: {exc}"
                response = Response(500, error_body(message, "server_error"))
            if response.delay > 0:
                loop = asyncio.get_running_loop()
                self._waiting = loop.call_later(response.delay, self._send_late, response, keep)
                return
            self._send(response, keep)

    def _send_late(self, response: Response, keep: bool) -> None:
        self._waiting = None
        self._send(response, keep)
        self._serve()

    def _send(self, response: Response, keep: bool) -> None:
        if self._transport is None:
            return
        self._transport.write(
            _head(response.status, len(response.body), keep, response.headers) + response.body
        )
        if not keep:
            self._transport.close()
            self._transport = None

    def _parse(self) -> tuple[str, str, dict[str, str], bytes, bool] | None:
        buf = self._buf
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            if len(buf) > MAX_HEAD:
                raise _BadRequest(431, "the request head is too large")
            return None
        lines = bytes(buf[:end]).decode("latin-1").split("\r\n")
        first = lines[0].split(" ")
        if len(first) != 3 or not first[2].startswith("HTTP/1."):
            raise _BadRequest(400, "the request line is not HTTP/1.x")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                raise _BadRequest(400, "a header line has no colon")
            headers[name.strip().lower()] = value.strip()
        start = end + 4
        if "chunked" in headers.get("transfer-encoding", "").lower():
            got = _dechunk(buf, start)
            if got is None:
                self._maybe_continue(headers)
                return None
            body, stop = got
        else:
            raw = headers.get("content-length", "0")
            if not raw.isdigit():
                raise _BadRequest(400, "content-length is not a number")
            length = int(raw)
            if length > MAX_BODY:
                raise _BadRequest(413, "the request body is too large")
            if len(buf) - start < length:
                self._maybe_continue(headers)
                return None
            body, stop = bytes(buf[start : start + length]), start + length
        del buf[:stop]
        self._continued = False
        conn = headers.get("connection", "").lower()
        keep = "close" not in conn if first[2] == "HTTP/1.1" else "keep-alive" in conn
        return first[0], first[1].split("?", 1)[0], headers, body, keep

    def _maybe_continue(self, headers: Mapping[str, str]) -> None:
        if headers.get("expect", "").lower() == "100-continue" and not self._continued:
            self._continued = True
            if self._transport is not None:
                self._transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")


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
    policy_defaults: Mapping[str, Mapping[str, object]] | None = None,
    announce: Callable[[ReferenceServer], None] | None = None,
    rate_limit: RateLimit | None = None,
) -> None:
    """Serve in the foreground until interrupted or terminated (the CLI's serve-reference)."""
    server = start_reference_server(
        host, port, api_key=api_key, policy_defaults=policy_defaults, rate_limit=rate_limit
    )
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _interrupt) if main else None
    if announce is not None:
        announce(server)
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
