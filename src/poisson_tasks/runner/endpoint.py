"""The model endpoint: one chat completion through the official `openai` client, retries visible.

The client's own retries are off: this module retries 429s (except out-of-credit), 5xx, timeouts and
dropped connections itself, with exponential backoff and jitter that honours Retry-After, so every
retry is counted and shown. What cannot be retried is sorted into three kinds:
`CallFailed` (this episode's call failed: the episode is `api_error`), `OutOfCredit` (the account is
out of credit: the run stops) and `EndpointError` (the endpoint refuses the run: wrong key, unknown
model; the run stops with one line). No message that leaves this module carries the API key.
"""

from __future__ import annotations

import asyncio
import random
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx2
import openai
import orjson

from poisson_tasks.bundle import ToolCall
from poisson_tasks.errors import EndpointError
from poisson_tasks.prereg import Decoding, Execution

CHAT_PATH = "/chat/completions"
# The body is encoded once with orjson and posted through the client's own transport (auth,
# timeouts, error mapping): the client's per-call parameter transform costs milliseconds per call.
_JSON_OPTIONS: Any = {"headers": {"Content-Type": "application/json"}}
_KEYISH = re.compile(r"\b(sk|key|rk)-[A-Za-z0-9_\-*]{4,}")


class CallFailed(Exception):
    """A model call that failed for good: the episode is api_error (an instrument failure)."""

    def __init__(self, detail: str, retries: int, seconds: float = 0.0) -> None:
        super().__init__(detail)
        self.detail = detail
        self.retries = retries
        self.seconds = seconds


class OutOfCredit(EndpointError):
    """The provider says the account is out of credit (OpenAI's insufficient_quota 429)."""


def redact(text: str, secret: str | None) -> str:
    """Remove the API key, and anything shaped like one, from a message before it is kept."""
    if secret:
        text = text.replace(secret, "[redacted]")
    return _KEYISH.sub("[redacted]", text)


@dataclass(slots=True)
class Reply:
    """One response as received: the raw JSON, what the runner reads from it, and what it cost."""

    raw: dict[str, Any]
    content: str | None
    finish_reason: str
    wire_calls: list[dict[str, Any]]
    tool_calls: list[ToolCall]
    usage: dict[str, Any] | None
    fingerprint: str | None
    seconds: float
    retries: int


@dataclass(slots=True)
class Counters:
    """Run-wide counts the progress display reads."""

    retries: int = 0
    calls: int = 0
    last_retry: str = ""
    by_kind: dict[str, int] = field(default_factory=dict)


def parse_tool_call(fn: dict[str, Any]) -> ToolCall:
    """A structured tool call; arguments that are not a JSON object make it a malformed call."""
    name = fn.get("name")
    raw = fn.get("arguments")
    name_s = name if isinstance(name, str) else ""
    if isinstance(raw, dict):
        return ToolCall(name=name_s, arguments=raw)
    if isinstance(raw, str):
        try:
            parsed = orjson.loads(raw) if raw.strip() else {}
        except orjson.JSONDecodeError:
            return ToolCall(name=name_s, arguments=None, raw_arguments=raw)
        if isinstance(parsed, dict):
            return ToolCall(name=name_s, arguments=parsed)
        return ToolCall(name=name_s, arguments=None, raw_arguments=raw)
    return ToolCall(name=name_s, arguments=None, raw_arguments=None if raw is None else str(raw))


def read_reply(body: dict[str, Any], seconds: float, retries: int) -> Reply:
    """Read one chat completion's JSON; a body without a message is the endpoint's fault."""
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise CallFailed("the endpoint answered without choices", retries)
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        raise CallFailed("the endpoint answered a choice without a message", retries)
    content = message.get("content")
    wire: list[dict[str, Any]] = []
    calls: list[ToolCall] = []
    for i, tc in enumerate(message.get("tool_calls") or ()):
        fn = tc.get("function") if isinstance(tc, dict) else None
        if not isinstance(fn, dict):
            continue
        call = parse_tool_call(fn)
        raw_args = fn.get("arguments")
        text_args = raw_args if isinstance(raw_args, str) else orjson.dumps(raw_args).decode()
        wire.append(
            {
                "id": tc.get("id") or f"call_{i}",
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": text_args,
                },
            }
        )
        calls.append(call)
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else None
    fp = body.get("system_fingerprint")
    return Reply(
        raw=body,
        content=content if isinstance(content, str) else None,
        finish_reason=str(choice.get("finish_reason") or ""),
        wire_calls=wire,
        tool_calls=calls,
        usage=usage,
        fingerprint=fp if isinstance(fp, str) else None,
        seconds=seconds,
        retries=retries,
    )


def _retry_after(exc: openai.APIStatusError) -> float | None:
    value = exc.response.headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


class Endpoint:
    """A chat-completions endpoint driven with the declared decoding and visible retries."""

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str | None,
        model: str,
        decoding: Decoding,
        execution: Execution,
        counters: Counters | None = None,
        on_retry: Callable[[str], None] | None = None,
    ) -> None:
        self.base_url = base_url
        self.model = model
        self.decoding = decoding
        self.execution = execution
        self.counters = counters or Counters()
        self._on_retry = on_retry
        self._secret = api_key
        limits = httpx2.Limits(
            max_connections=max(100, execution.concurrency * 2),
            max_keepalive_connections=max(20, execution.concurrency * 2),
        )
        self.client = openai.AsyncOpenAI(
            api_key=api_key or "no-key",
            base_url=base_url,
            max_retries=0,
            timeout=execution.request_timeout_s,
            http_client=openai.DefaultAsyncHttpxClient(limits=limits),
        )
        # The request body's fixed part; extra_body merges at the top level, as the client does.
        self._fixed: dict[str, Any] = {
            **decoding.extra_body,
            "model": model,
            "temperature": decoding.temperature,
            "top_p": decoding.top_p,
            "max_completion_tokens": decoding.max_completion_tokens,
        }
        if decoding.reasoning_effort is not None:
            self._fixed["reasoning_effort"] = decoding.reasoning_effort

    async def close(self) -> None:
        await self.client.close()

    def redact(self, text: str) -> str:
        return redact(text, self._secret)

    def _fatal(self, exc: openai.APIStatusError) -> EndpointError:
        status = exc.status_code
        what = self.redact(str(getattr(exc, "message", exc)))
        if status == 401:
            return EndpointError(
                f"{self.base_url} refused the API key (401): check the variable model.api_key_env "
                f"names and its value ({what})"
            )
        if status == 403:
            return EndpointError(f"{self.base_url} refused access (403): {what}")
        return EndpointError(
            f"{self.base_url} does not serve model {self.model!r} (404): fix model.model ({what})"
        )

    async def complete(
        self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]], user: str
    ) -> Reply:
        """One chat completion; retries what can be retried and raises what cannot.

        Reply.seconds is the time spent waiting on the endpoint: inside the HTTP calls and in the
        backoff between them; encoding the request and reading the answer are the harness's.
        """
        ex = self.execution
        retries = 0
        waited = 0.0
        payload = orjson.dumps({**self._fixed, "messages": messages, "tools": tools, "user": user})
        while True:
            kind: str
            retry_after: float | None = None
            t0 = time.perf_counter()
            try:
                self.counters.calls += 1
                try:
                    resp = await self.client.post(
                        CHAT_PATH, content=payload, cast_to=httpx2.Response, options=_JSON_OPTIONS
                    )
                finally:
                    waited += time.perf_counter() - t0
                body = orjson.loads(resp.content)
            except openai.RateLimitError as exc:
                if exc.code == "insufficient_quota" or (
                    isinstance(exc.body, dict) and exc.body.get("type") == "insufficient_quota"
                ):
                    raise OutOfCredit(
                        f"{self.base_url} says the account is out of credit (insufficient_quota)"
                    ) from None
                kind, retry_after = "429", _retry_after(exc)
            except (
                openai.AuthenticationError,
                openai.PermissionDeniedError,
                openai.NotFoundError,
            ) as exc:
                raise self._fatal(exc) from None
            except openai.InternalServerError as exc:
                kind, retry_after = str(exc.status_code), _retry_after(exc)
            except openai.APITimeoutError:
                kind = "timeout"
            except openai.APIConnectionError:
                kind = "connection"
            except openai.APIStatusError as exc:
                detail = self.redact(f"HTTP {exc.status_code}: {exc.message}")
                raise CallFailed(detail, retries, waited) from None
            except orjson.JSONDecodeError:
                raise CallFailed("the endpoint's answer is not JSON", retries, waited) from None
            else:
                if not isinstance(body, dict):
                    raise CallFailed("the endpoint's answer is not a JSON object", retries, waited)
                try:
                    return read_reply(body, waited, retries)
                except CallFailed as exc:
                    exc.seconds = waited
                    raise
            if retries >= ex.max_retries:
                raise CallFailed(f"{kind} after {retries} retries", retries, waited)
            retries += 1
            self.counters.retries += 1
            self.counters.last_retry = kind
            self.counters.by_kind[kind] = self.counters.by_kind.get(kind, 0) + 1
            if self._on_retry is not None:
                self._on_retry(kind)
            delay = min(ex.backoff_max_s, ex.backoff_s * 2 ** (retries - 1))
            delay *= 0.5 + random.random() / 2  # jitter spreads retries of concurrent episodes
            if retry_after is not None:
                delay = max(delay, min(retry_after, ex.backoff_max_s))
            t0 = time.perf_counter()
            await asyncio.sleep(delay)
            waited += time.perf_counter() - t0
