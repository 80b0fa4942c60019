"""What the runner takes from a server before any of it is parsed: a body of at most
MAX_BODY_BYTES, sent unencoded, and at most MAX_EPISODE_BYTES of bodies in one episode.

Every request the runner makes (chat completions, the preflight's serving facts) asks for an
unencoded body (`Accept-Encoding: identity`), so a compressed body cannot grow past the bound once
decoded; a response encoded anyway, or longer than the bound, is refused as `BodyRefused` while it
arrives, with its status, headers and first EVIDENCE_BYTES kept as evidence. `limit_body` is the
HTTP client's response hook that does it (httpx2, or httpx where openai 2 drives it). An episode
line keeps each body twice (the message in the conversation and the raw response), so the bodies
of one episode are bounded too (runner.episode ends an episode past MAX_EPISODE_BYTES as the
instrument's failure), and every episode line stays readable within runfolder.LINE_MAX_BYTES.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from poisson_tasks.runfolder import LINE_MAX_BYTES

__all__ = [
    "ACCEPT_IDENTITY",
    "EVIDENCE_BYTES",
    "MAX_BODY_BYTES",
    "MAX_EPISODE_BYTES",
    "BodyRefused",
    "limit_body",
]

# 16 MiB: a reply of a million tokens is about 4 MiB of text, so only a broken or hostile server
# sends more. A third of a line's limit for one episode's bodies: kept twice, with room to spare.
MAX_BODY_BYTES = 16 * 1024 * 1024
MAX_EPISODE_BYTES = LINE_MAX_BYTES // 3
EVIDENCE_BYTES = 4096
ACCEPT_IDENTITY = {"Accept-Encoding": "identity"}


class BodyRefused(Exception):
    """A response body the runner does not read: longer than MAX_BODY_BYTES, or encoded."""

    def __init__(self, reason: str, status: int, headers: list[tuple[str, str]], head: bytes):
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.headers = headers
        self.head = head


class _Counted:
    """The body's chunks passed on as they arrive, counted; past the limit, BodyRefused."""

    def __init__(self, stream: Any, response: Any, limit: int) -> None:
        self._stream = stream
        self._response = response
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        head = bytearray()
        async for chunk in self._stream:
            seen += len(chunk)
            if len(head) < EVIDENCE_BYTES:
                head += chunk[: EVIDENCE_BYTES - len(head)]
            if seen > self._limit:
                raise _refused(self._response, f"a body longer than {self._limit:,} bytes", head)
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()


_COUNTED: dict[type, type] = {}


def _counted_type(stream: Any) -> type:
    """_Counted as a subclass of the stream's own AsyncByteStream (httpx2's, or httpx's under
    openai 2), which the client checks the stream against; made once per stream type."""
    kind = type(stream)
    if kind not in _COUNTED:
        base = next(c for c in kind.__mro__ if c.__name__ == "AsyncByteStream")
        _COUNTED[kind] = type("CountedBody", (_Counted, base), {})
    return _COUNTED[kind]


def _refused(response: Any, reason: str, head: bytes | bytearray = b"") -> BodyRefused:
    return BodyRefused(reason, response.status_code, list(response.headers.items()), bytes(head))


async def limit_body(response: Any) -> None:
    """The client's response hook: refuse an encoded body or one announced longer than the bound
    at once, and count the bytes of a body with no length announced (chunked, or ended by the
    connection's close) as they arrive."""
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise _refused(response, f"a body encoded as {encoding!r}, which was not asked for")
    length = response.headers.get("content-length", "").strip()
    if length.isascii() and length.isdigit():
        if int(length) > MAX_BODY_BYTES:
            raise _refused(
                response, f"a body of {int(length):,} bytes, more than {MAX_BODY_BYTES:,}"
            )
        return  # HTTP/1.1 reads no more than an announced length: nothing left to count
    response.stream = _counted_type(response.stream)(response.stream, response, MAX_BODY_BYTES)
