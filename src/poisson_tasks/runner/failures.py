"""One failed attempt at a chat completion, sorted: evidence of what the endpoint showed, and a
table from the exception raised to what it means (a retry of a named kind, or an error that ends
the call or the run). endpoint.Endpoint.complete runs the attempts and reads the table.
"""

from __future__ import annotations

import email.utils
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx2
import openai

from poisson_tasks.credentials import redact
from poisson_tasks.errors import (
    CallFailed,
    ContextOverflow,
    EndpointError,
    OutOfCredit,
    UnparsedToolCall,
)
from poisson_tasks.runner.received import EVIDENCE_BYTES, BodyRefused

_CREDENTIAL_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "www-authenticate",
        "cookie",
        "set-cookie",
        "x-api-key",
        "api-key",
        "x-goog-api-key",
        "x-auth-token",
    }
)

# The three wordings of "the conversation no longer fits the model's window": OpenAI's error code,
# vLLM's message, and llama.cpp's message and error type.
_OVERFLOW = re.compile(
    r"context_length_exceeded|maximum context length|exceeds? the available context size"
    r"|exceed_context_size_error",
    re.IGNORECASE,
)
_WINDOW = re.compile(
    r"maximum context length is (\d+)|available context size \((\d+)|n_ctx\D{0,4}(\d+)", re.I
)


# llama.cpp's wording (common/chat.cpp) when a tool call's arguments are not JSON.
_UNPARSED_CALL = re.compile(r"Failed to parse tool call arguments as JSON", re.IGNORECASE)


def _kept_headers(items: Sequence[tuple[str, str]], secret: str | None) -> dict[str, str]:
    """A response's headers as evidence: credentials' headers left out, the key redacted."""
    return {
        redact(k.lower(), secret): redact(v, secret)
        for k, v in items
        if k.lower() not in _CREDENTIAL_HEADERS
    }


def evidence_of(response: httpx2.Response, secret: str | None) -> dict[str, Any]:
    """What a failed response showed: status, headers less credentials, the body's first 4 KB."""
    try:
        raw = response.content
    except httpx2.ResponseNotRead:  # a streamed body cut off before it was read
        raw = b""
    body = raw[:EVIDENCE_BYTES].decode("utf-8", "replace")
    return {
        "status": response.status_code,
        "headers": _kept_headers(list(response.headers.items()), secret),
        "body": redact(body, secret),
        "body_bytes": len(raw),
    }


def refused_evidence(exc: BodyRefused, secret: str | None) -> dict[str, Any]:
    """What a response whose body was refused showed: status, headers, the first 4 KB that
    arrived, and why it was refused (received.BodyRefused)."""
    return {
        "status": exc.status,
        "headers": _kept_headers(exc.headers, secret),
        "body": redact(exc.head.decode("utf-8", "replace"), secret),
        "refused": exc.reason,
    }


def _no_response(kind: str, seconds: float) -> dict[str, Any]:
    """The evidence of an attempt that ended without a response (a timeout, a dropped
    connection): what ended it and after how long."""
    return {"status": None, "kind": kind, "seconds": round(seconds, 6)}


def retry_after_s(headers: httpx2.Headers, now: float | None = None) -> float | None:
    """The wait a server asks for: retry-after-ms, else Retry-After in seconds or as an HTTP date."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def overflow_window(text: str) -> int | None:
    """The context size a context-overflow message states, where it states one."""
    found = _WINDOW.search(text)
    if found is None:
        return None
    return int(next(g for g in found.groups() if g is not None))


@dataclass(slots=True)
class CallLog:
    """One model call's attempts as they happen: its retries, the seconds waited on the endpoint,
    and each failed attempt's evidence. The caller holds it, so a call cut short by the
    episode's wall clock still leaves every attempt it made in the episode record."""

    retries: int = 0
    seconds: float = 0.0
    failures: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Retry:
    """A failed attempt that may be retried: its kind (the progress line's and the counters' word)
    and the wait the server asked for, if it asked."""

    kind: str
    retry_after: float | None = None


@dataclass(frozen=True, slots=True)
class Failed:
    """What a handler needs to word a failure: where the attempt went, the key to keep out of
    every word, when the attempt started (perf_counter) and the call's log so far."""

    base_url: str
    model: str
    secret: str | None
    started: float
    log: CallLog

    def call_failed(self, detail: str) -> CallFailed:
        log = self.log
        return CallFailed(redact(detail, self.secret), log.retries, log.seconds, log.failures)


def _rate_limited(exc: openai.RateLimitError, at: Failed) -> Retry:
    at.log.failures.append(evidence_of(exc.response, at.secret))
    if exc.code == "insufficient_quota" or (
        isinstance(exc.body, dict) and exc.body.get("type") == "insufficient_quota"
    ):
        raise OutOfCredit(f"{at.base_url} says the account is out of credit (insufficient_quota)")
    return Retry("429", retry_after_s(exc.response.headers))


def _refused_run(exc: openai.APIStatusError, at: Failed) -> Retry:
    """401, 403, 404: the endpoint refuses the run, not this call."""
    status = exc.status_code
    what = redact(str(getattr(exc, "message", exc)), at.secret)
    if status == 401:
        raise EndpointError(
            f"{at.base_url} refused the API key (401): check the variable model.api_key_env "
            f"names and its value ({what})"
        )
    if status == 403:
        raise EndpointError(f"{at.base_url} refused access (403): {what}")
    raise EndpointError(
        f"{at.base_url} does not serve model {at.model!r} (404): fix model.model ({what})"
    )


def _server_error(exc: openai.InternalServerError, at: Failed) -> Retry:
    at.log.failures.append(evidence_of(exc.response, at.secret))
    text = exc.response.content.decode("utf-8", "replace")
    if exc.status_code == 500 and _UNPARSED_CALL.search(text):
        log = at.log
        detail = redact(f"HTTP 500: {exc.message}", at.secret)
        raise UnparsedToolCall(detail, log.retries, log.seconds, log.failures)
    return Retry(str(exc.status_code), retry_after_s(exc.response.headers))


def _other_status(exc: openai.APIStatusError, at: Failed) -> Retry:
    """408 is retried; any other status fails the call (a context overflow is the model's)."""
    at.log.failures.append(evidence_of(exc.response, at.secret))
    if exc.status_code == 408:
        return Retry("408", retry_after_s(exc.response.headers))
    text = exc.response.content.decode("utf-8", "replace")
    if exc.status_code in (400, 413) and _OVERFLOW.search(text):
        log = at.log
        detail = redact(f"HTTP {exc.status_code}: {exc.message}", at.secret)
        raise ContextOverflow(detail, log.retries, log.seconds, log.failures, overflow_window(text))
    raise at.call_failed(f"HTTP {exc.status_code}: {exc.message}")


def _refused_body(exc: BodyRefused, at: Failed) -> Retry:
    """A body longer than received.MAX_BODY_BYTES, or encoded."""
    at.log.failures.append(refused_evidence(exc, at.secret))
    return Retry("refused_body")


def _timed_out(exc: Exception, at: Failed) -> Retry:
    at.log.failures.append(_no_response("timeout", time.perf_counter() - at.started))
    return Retry("timeout")


def _connection(exc: openai.APIConnectionError, at: Failed) -> Retry:
    if isinstance(exc.__cause__, BodyRefused):  # openai 2 wraps what its send raised
        return _refused_body(exc.__cause__, at)
    at.log.failures.append(_no_response("connection", time.perf_counter() - at.started))
    return Retry("connection")


Handler = Callable[[Any, Failed], Retry]
# What each exception a POST can raise means, checked in order (a subclass before its base:
# RateLimitError and InternalServerError are APIStatusErrors, APITimeoutError an
# APIConnectionError). A handler returns the retry or raises what ends the call or the run.
RETRY_KINDS: tuple[tuple[tuple[type[BaseException], ...], Handler], ...] = (
    ((openai.RateLimitError,), _rate_limited),
    (
        (openai.AuthenticationError, openai.PermissionDeniedError, openai.NotFoundError),
        _refused_run,
    ),
    ((openai.InternalServerError,), _server_error),
    ((openai.APIStatusError,), _other_status),
    ((BodyRefused,), _refused_body),
    ((openai.APITimeoutError, TimeoutError), _timed_out),
    ((openai.APIConnectionError,), _connection),
)
CAUGHT: tuple[type[BaseException], ...] = tuple(t for types, _ in RETRY_KINDS for t in types)


def retry_of(exc: BaseException, at: Failed) -> Retry:
    """The retry a failed POST asks for, by RETRY_KINDS; raises what cannot be retried."""
    for types, handler in RETRY_KINDS:
        if isinstance(exc, types):
            return handler(exc, at)
    raise exc
