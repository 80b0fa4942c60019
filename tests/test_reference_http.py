"""Malformed HTTP to the reference endpoint (issue 33, item 4): every request the server does not
take (httptools refuses it, or it breaks a limit) is answered with a 4xx naming what is wrong,
within two seconds, and no request stops it from answering the next client. The server runs in its own process (start_reference_server's
`process=True`), so a request that hung it would fail the test rather than the test process.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import orjson
import pytest

from poisson_tasks.reference import ReferenceServer, start_reference_server
from poisson_tasks.reference.server import MAX_BODY, MAX_HEAD

BODY = orjson.dumps({"model": "no-call", "messages": [{"role": "user", "content": "hi"}]})
POST = b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n"


@pytest.fixture(scope="module")
def server() -> Iterator[ReferenceServer]:
    with start_reference_server("127.0.0.1", 0, process=True) as srv:
        yield srv


def exchange(server: ReferenceServer, payload: bytes, seconds: float = 3.0) -> bytes:
    """Send `payload` on a fresh connection and read until the server closes it (or a whole
    answer has come on a kept connection, or `seconds` pass)."""
    with socket.create_connection((server.host, server.port), timeout=seconds) as sock:
        sock.sendall(payload)
        data = b""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except (TimeoutError, ConnectionResetError):
                break
            if not chunk:
                break
            data += chunk
            head, _, rest = data.partition(b"\r\n\r\n")
            length = [x for x in head.split(b"\r\n") if x.lower().startswith(b"content-length:")]
            if length and len(rest) >= int(length[0].split(b":")[1]):
                break
        return data


def answered(server: ReferenceServer) -> bool:
    """A well-formed request on its own connection is answered 200."""
    return exchange(server, b"GET /health HTTP/1.1\r\nhost: x\r\n\r\n").startswith(b"HTTP/1.1 200 ")


def chunked(*parts: bytes) -> bytes:
    return POST + b"transfer-encoding: chunked\r\n\r\n" + b"".join(parts)


MALFORMED = {
    "a negative chunk size (back to its own line)": chunked(b"-6\r\n", BODY, b"\r\n0\r\n\r\n"),
    "a chunk size of -1": chunked(b"-1\r\n", BODY, b"\r\n0\r\n\r\n"),
    "a chunk size that is not hexadecimal": chunked(b"zz\r\n", BODY, b"\r\n0\r\n\r\n"),
    "a chunk size of non-ASCII digits": chunked("١٢\r\n".encode(), BODY, b"\r\n0\r\n\r\n"),
    "a chunk longer than it said": chunked(b"2\r\nabcdef\r\n0\r\n\r\n"),
    "a Content-Length of non-ASCII digits": POST + "content-length: ١٢\r\n\r\n".encode() + BODY,
    "a Content-Length of a superscript digit": POST + b"content-length: \xb2\r\n\r\n" + BODY,
    "a negative Content-Length": POST + b"content-length: -5\r\n\r\n" + BODY,
    "two different Content-Lengths": POST
    + b"content-length: 3\r\ncontent-length: 4\r\n\r\n"
    + BODY,
    "a Content-Length past the body limit": POST
    + f"content-length: {MAX_BODY + 1}\r\n\r\n".encode(),
    "a transfer coding other than chunked": POST + b"transfer-encoding: gzip\r\n\r\n" + BODY,
    "a request line that is not HTTP": b"NONSENSE\r\n\r\n",
    "an HTTP version that is not one": b"GET /health HTTP/x.y\r\nhost: x\r\n\r\n",
    "a header line without a colon": b"GET /health HTTP/1.1\r\nhost: x\r\nno colon here\r\n\r\n",
    "a header name with a space": b"GET /health HTTP/1.1\r\nhost: x\r\nbad name: 1\r\n\r\n",
    "a NUL in a header value": b"GET /health HTTP/1.1\r\nhost: x\r\nx-a: a\x00b\r\n\r\n",
    "no Host header": b"GET /health HTTP/1.1\r\n\r\n",
    "an upgrade it does not offer": b"GET /health HTTP/1.1\r\nhost: x\r\n"
    b"connection: upgrade\r\nupgrade: websocket\r\n\r\n",
    "a head longer than its limit": b"GET /health HTTP/1.1\r\nhost: x\r\nx-pad: "
    + b"a" * (MAX_HEAD + 10)
    + b"\r\n\r\n",
    "a target with a space": b"GET /he alth HTTP/1.1\r\nhost: x\r\n\r\n",
    "a NUL in the target": b"GET /hea\x00lth HTTP/1.1\r\nhost: x\r\n\r\n",
    "a head that never ends": b"GET /health HTTP/1.1\r\nhost: x\r\nx-pad: "
    + b"a" * (MAX_HEAD + 10),
}


@pytest.mark.parametrize("payload", list(MALFORMED.values()), ids=list(MALFORMED))
def test_a_malformed_request_gets_a_4xx_and_the_server_answers_the_next(
    server: ReferenceServer, payload: bytes
) -> None:
    t0 = time.monotonic()
    data = exchange(server, payload)
    status = data.split(b" ", 2)[1] if data.startswith(b"HTTP/1.1 ") else b""
    assert status.startswith(b"4"), data[:300]
    assert time.monotonic() - t0 < 2.0
    assert b'"invalid_request_error"' in data and b"connection: close" in data.lower()
    assert answered(server)  # nothing hung: the next client is answered


def test_a_chunked_body_and_pipelined_requests_are_still_read(server: ReferenceServer) -> None:
    half = len(BODY) // 2
    body = chunked(
        f"{half:x};ext=1\r\n".encode(),
        BODY[:half],
        f"\r\n{len(BODY) - half:x}\r\n".encode(),
        BODY[half:],
        b"\r\n0\r\nx-trailer: 1\r\n\r\n",
    )
    get = b"GET /health HTTP/1.1\r\nhost: x\r\n\r\n"
    with socket.create_connection((server.host, server.port), timeout=5) as sock:
        sock.sendall(body + get)
        data = b""
        while data.count(b"HTTP/1.1 200 OK") < 2 or not data.endswith(b"}"):
            chunk = sock.recv(65536)
            assert chunk, data
            data += chunk
    assert data.index(b"finish_reason") < data.index(b"policies")  # in order


def test_expect_100_continue_is_answered_before_the_body(server: ReferenceServer) -> None:
    head = POST + f"content-length: {len(BODY)}\r\nexpect: 100-continue\r\n\r\n".encode()
    with socket.create_connection((server.host, server.port), timeout=5) as sock:
        sock.sendall(head)
        assert sock.recv(65536).startswith(b"HTTP/1.1 100 ")
        sock.sendall(BODY)
        data = b""
        while not data.endswith(b"}"):
            data += sock.recv(65536)
    assert data.startswith(b"HTTP/1.1 200 OK")


def test_a_client_that_sends_half_a_request_holds_no_one_else(server: ReferenceServer) -> None:
    with socket.create_connection((server.host, server.port), timeout=5) as slow:
        slow.sendall(POST + b"content-length: 100000\r\n\r\n" + b"{")
        assert answered(server)
