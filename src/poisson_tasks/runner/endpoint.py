"""The model endpoint: one chat completion through the official `openai` client, retries visible.

The client's own retries are off: this module retries 408s, 429s (except out-of-credit), 5xx,
timeouts, dropped connections and 200s whose body is not a whole JSON completion itself (or
nests deeper than boundedjson.MAX_DEPTH, or is longer than received.MAX_BODY_BYTES), with
exponential backoff and jitter that honours Retry-After (seconds or an HTTP date) and
retry-after-ms up to `execution.retry_after_max_s`, so every retry is counted and shown. Each
attempt carries its number in the `X-Poisson-Attempt` header, so a server can tell a retry from the
request it failed. `execution.request_timeout_s` bounds the whole request (connect, write and every
read together): a server that trickles its answer cannot stretch it. A 400 saying the conversation
outgrew the model's context window is `ContextOverflow`, the model's failure (see episode.py), and
so is llama.cpp's 500 for a tool call whose arguments are not JSON (`UnparsedToolCall`, scored as
the model's malformed call), and so are tool-call arguments that are not a JSON object or nest
deeper than ARGUMENT_DEPTH. What cannot be retried is sorted into three kinds:
`CallFailed` (this episode's call failed: the episode is `api_error`), `OutOfCredit` (the account is
out of credit: the run stops) and `EndpointError` (the endpoint refuses the run: wrong key, unknown
model; the run stops with one line). Every failed response's status, headers (less credentials) and
first 4 KB of body are kept as evidence. Nothing that leaves this module carries the API key or any
8-character piece of it.
"""

from __future__ import annotations

import asyncio
import email.utils
import hashlib
import math
import random
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import httpx2
import openai
import orjson

from poisson_tasks import boundedjson
from poisson_tasks.bundle import ToolCall
from poisson_tasks.credentials import redact, scrub
from poisson_tasks.errors import (
    CallFailed,
    ContextOverflow,
    EndpointError,
    OutOfCredit,
    UnparsedToolCall,
)
from poisson_tasks.prereg import Decoding, Execution
from poisson_tasks.reference.wire import request_tokens
from poisson_tasks.runfolder import PacingRecord
from poisson_tasks.runner.pacing import Pacer, Ticket
from poisson_tasks.runner.received import (
    ACCEPT_IDENTITY,
    EVIDENCE_BYTES,
    BodyRefused,
    limit_body,
)
from poisson_tasks.tokens import count_tokens

CHAT_PATH = "/chat/completions"
ATTEMPT_HEADER = "X-Poisson-Attempt"
# The body is encoded once with orjson and posted through the client's own transport (auth, error
# mapping): the client's per-call parameter transform costs milliseconds per call.
_JSON = {"Content-Type": "application/json", **ACCEPT_IDENTITY}
# A tool's arguments nest at most owntools.MAX_DEPTH levels in any block a run offers: arguments
# deeper than this cannot be a call of one, and are the model's malformed call.
ARGUMENT_DEPTH = 32
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
RETRY_AFTER_DEFAULT_MAX_S = 300.0
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
class ModelReply:
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
    reasoning: str | None = None
    estimated: tuple[str, ...] = ()  # the usage counts the pinned tokenizer supplied
    body_bytes: int = 0  # the response body's length as received
    failures: list[dict[str, Any]] = field(default_factory=list)


@dataclass(slots=True)
class CallLog:
    """One model call's attempts as they happen: its retries, the seconds waited on the endpoint,
    and each failed attempt's evidence. The caller holds it, so a call cut short by the
    episode's wall clock still leaves every attempt it made in the episode record."""

    retries: int = 0
    seconds: float = 0.0
    failures: list[dict[str, Any]] = field(default_factory=list)


@dataclass(slots=True)
class Counters:
    """Run-wide counts the progress display reads."""

    retries: int = 0
    calls: int = 0
    last_retry: str = ""
    by_kind: dict[str, int] = field(default_factory=dict)


def parse_tool_call(fn: dict[str, Any]) -> ToolCall:
    """A structured tool call; arguments that are not a JSON object, or nest deeper than
    ARGUMENT_DEPTH, make it a malformed call (the text as sent kept in raw_arguments)."""
    name = fn.get("name")
    raw = fn.get("arguments")
    name_s = name if isinstance(name, str) else ""
    if isinstance(raw, dict):
        if boundedjson.depth_exceeds(raw, ARGUMENT_DEPTH):
            return ToolCall(name=name_s, arguments=None, raw_arguments=orjson.dumps(raw).decode())
        return ToolCall(name=name_s, arguments=raw)
    if isinstance(raw, str):
        try:
            parsed = orjson.loads(raw) if raw.strip() else {}
        except orjson.JSONDecodeError:  # not JSON, or nested past orjson's 1,024 levels
            return ToolCall(name=name_s, arguments=None, raw_arguments=raw)
        if isinstance(parsed, dict) and not boundedjson.depth_exceeds(parsed, ARGUMENT_DEPTH):
            return ToolCall(name=name_s, arguments=parsed)
        return ToolCall(name=name_s, arguments=None, raw_arguments=raw)
    return ToolCall(name=name_s, arguments=None, raw_arguments=None if raw is None else str(raw))


def read_reply(body: dict[str, Any], seconds: float, retries: int) -> ModelReply:
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
    for index, tc in enumerate(message.get("tool_calls") or ()):
        fn = tc.get("function") if isinstance(tc, dict) else None
        if not isinstance(fn, dict):
            continue
        call = parse_tool_call(fn)
        raw_args = fn.get("arguments")
        text_args = raw_args if isinstance(raw_args, str) else orjson.dumps(raw_args).decode()
        wire.append(
            {
                "id": tc.get("id") or f"call_{index}",
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
    reasoning = message.get("reasoning_content", message.get("reasoning"))
    return ModelReply(
        raw=body,
        content=content if isinstance(content, str) else None,
        finish_reason=str(choice.get("finish_reason") or ""),
        wire_calls=wire,
        tool_calls=calls,
        usage=usage,
        fingerprint=fp if isinstance(fp, str) and fp else None,
        seconds=seconds,
        retries=retries,
        reasoning=reasoning if isinstance(reasoning, str) else None,
    )


MAX_COUNT = 2**53  # a token count above this is no count (and no JSON number holds it exactly)
_COUNTS = ("prompt_tokens", "completion_tokens")
_DETAILS = {
    "prompt_tokens_details": "cached_tokens",
    "completion_tokens_details": "reasoning_tokens",
}


def is_count(value: Any) -> bool:
    """A token count as a server may report one: an integer from 0 to MAX_COUNT (not a bool, a
    float, a string or a negative number)."""
    return type(value) is int and 0 <= value <= MAX_COUNT


def checked_usage(usage: dict[str, Any] | None) -> tuple[dict[str, Any], tuple[str, ...]]:
    """A response's usage with every count that is not a count (is_count) left out, and the
    names of the two main counts (prompt_tokens, completion_tokens) so left missing: the runner
    estimates those with the pinned tokenizer and the card discloses them. A detail (cached or
    reasoning tokens) that is not a count, or more than its total, is dropped; a cost that is not
    a finite non-negative number too."""
    out: dict[str, Any] = {}
    source = usage or {}
    for name in _COUNTS:
        if is_count(source.get(name)):
            out[name] = source[name]
    for part, key in _DETAILS.items():
        section = source.get(part)
        value = section.get(key) if isinstance(section, dict) else None
        total = out.get("prompt_tokens" if part.startswith("prompt") else "completion_tokens")
        if is_count(value) and (total is None or value <= total):
            out[part] = {key: value}
    cost: Any = source.get("cost")
    if type(cost) in (int, float) and math.isfinite(cost) and cost >= 0:
        out["cost"] = float(cost)
    return out, tuple(name for name in _COUNTS if name not in out)


def estimate_usage(payload: bytes, reply: ModelReply) -> dict[str, int]:
    """Tokens of a response the server reported none for, counted with the pinned tokenizer: the
    request body as sent (messages and tools) and the reply's text, reasoning and tool calls."""
    out = (reply.content or "") + (reply.reasoning or "")
    out += "".join(c["function"]["name"] + c["function"]["arguments"] for c in reply.wire_calls)
    return {
        "prompt_tokens": count_tokens(payload.decode("utf-8", "replace")),
        "completion_tokens": count_tokens(out),
    }


def _paced(pacer: Pacer, ticket: Ticket, resp: httpx2.Response) -> None:
    """Tell the pacer what a response said (a 429 with its Retry-After)."""
    if resp.status_code == 429:
        pacer.refused(ticket, resp.headers, retry_after_s(resp.headers))
    else:
        pacer.answered(ticket, resp.headers)


def derived_seed(task_id: str, attempt: int) -> int:
    """The per-attempt seed `decoding.seed: derived` sends: sha256("<task id>|<attempt>"), its
    first 8 bytes big-endian, modulo 2**31 (every server that takes a seed takes an int32)."""
    digest = hashlib.sha256(f"{task_id}|{attempt}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % 2**31


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
        session: int = 0,
    ) -> None:
        self.base_url = base_url
        self.model = model
        self.decoding = decoding
        self.execution = execution
        self.counters = counters or Counters()
        self.session = session
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
            # openai 3 sends over httpx2, openai 2 (verifiers 0.4.0's pin) over httpx, whose
            # client reads the same three fields from the limits it is given; the response hook
            # refuses a body past received.MAX_BODY_BYTES as it arrives, on either.
            http_client=cast(Any, openai.DefaultAsyncHttpxClient)(
                limits=limits, event_hooks={"response": [limit_body]}
            ),
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
        self._ceiling = (
            execution.retry_after_max_s
            if execution.retry_after_max_s is not None
            else RETRY_AFTER_DEFAULT_MAX_S
        )
        # pace: headers paces by the rate-limit headers, once the endpoint sends any (pacing.py)
        self.pacer = Pacer(self._ceiling) if execution.pace == "headers" else None

    def pacing_record(self) -> PacingRecord:
        """What the pacing did in this endpoint's session (run.json's session record)."""
        if self.pacer is None:
            return PacingRecord(pace=self.execution.pace, applied=False)
        return self.pacer.record(self.execution.pace)

    async def close(self) -> None:
        await self.client.close()

    def redact(self, text: str) -> str:
        return redact(text, self._secret)

    def scrub(self, obj: Any) -> Any:
        return scrub(obj, self._secret)

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

    async def _post(
        self, payload: bytes, attempt: int, tokens: Callable[[], int] | None = None
    ) -> httpx2.Response:
        """One POST, bounded as a whole by request_timeout_s (connect, write and all reads), sent
        when the pacer lets it go (`tokens`: the request's charge in tokens, counted if needed)."""
        pacer = self.pacer if tokens is not None else None
        ticket = await pacer.acquire(tokens) if pacer is not None and tokens is not None else None
        options: Any = {"headers": {**_JSON, ATTEMPT_HEADER: f"{self.session}.{attempt}"}}
        try:
            async with asyncio.timeout(self.execution.request_timeout_s):
                resp: httpx2.Response = await self.client.post(
                    CHAT_PATH, content=payload, cast_to=httpx2.Response, options=options
                )
                await resp.aread()
        except openai.APIStatusError as exc:
            if pacer is not None and ticket is not None:
                _paced(pacer, ticket, exc.response)
            raise
        except BaseException:
            if pacer is not None and ticket is not None:
                pacer.release(ticket)
            raise
        if pacer is not None and ticket is not None:
            _paced(pacer, ticket, resp)
        return resp

    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        user: str,
        seed: int | None = None,
        log: CallLog | None = None,
    ) -> ModelReply:
        """One chat completion; retries what can be retried and raises what cannot.

        ModelReply.seconds is the time spent waiting on the endpoint: inside the HTTP calls and in the
        backoff between them; encoding the request and reading the answer are the harness's.
        `seed`, when given, is sent as the request's `seed`. `log`, when given, is kept up to date
        attempt by attempt (retries, seconds, failed attempts' evidence).
        """
        ex = self.execution
        log = log if log is not None else CallLog()
        retries = 0
        waited = 0.0
        failures = log.failures
        extra: dict[str, Any] = {"seed": seed} if seed is not None else {}
        payload = orjson.dumps(
            {**self._fixed, **extra, "messages": messages, "tools": tools, "user": user}
        )
        ceiling = self._ceiling
        limit = self.decoding.max_completion_tokens

        def tokens() -> int:  # the request's charge as the pacer counts it (pacing.py)
            return request_tokens(messages, tools) + limit

        while True:
            kind: str
            retry_after: float | None = None
            t0 = time.perf_counter()
            self.counters.calls += 1
            try:
                try:
                    resp = await self._post(payload, retries, tokens)
                finally:
                    waited += time.perf_counter() - t0
                    log.seconds = waited
            except openai.RateLimitError as exc:
                failures.append(evidence_of(exc.response, self._secret))
                if exc.code == "insufficient_quota" or (
                    isinstance(exc.body, dict) and exc.body.get("type") == "insufficient_quota"
                ):
                    raise OutOfCredit(
                        f"{self.base_url} says the account is out of credit (insufficient_quota)"
                    ) from None
                kind, retry_after = "429", retry_after_s(exc.response.headers)
            except (
                openai.AuthenticationError,
                openai.PermissionDeniedError,
                openai.NotFoundError,
            ) as exc:
                raise self._fatal(exc) from None
            except openai.InternalServerError as exc:
                failures.append(evidence_of(exc.response, self._secret))
                text = exc.response.content.decode("utf-8", "replace")
                if exc.status_code == 500 and _UNPARSED_CALL.search(text):
                    detail = self.redact(f"HTTP 500: {exc.message}")
                    raise UnparsedToolCall(detail, retries, waited, failures) from None
                kind, retry_after = str(exc.status_code), retry_after_s(exc.response.headers)
            except openai.APIStatusError as exc:
                failures.append(evidence_of(exc.response, self._secret))
                if exc.status_code == 408:
                    kind, retry_after = "408", retry_after_s(exc.response.headers)
                else:
                    text = exc.response.content.decode("utf-8", "replace")
                    detail = self.redact(f"HTTP {exc.status_code}: {exc.message}")
                    if exc.status_code in (400, 413) and _OVERFLOW.search(text):
                        raise ContextOverflow(
                            detail, retries, waited, failures, overflow_window(text)
                        ) from None
                    raise CallFailed(detail, retries, waited, failures) from None
            except BodyRefused as exc:  # longer than received.MAX_BODY_BYTES, or encoded
                kind = "refused_body"
                failures.append(refused_evidence(exc, self._secret))
            except (openai.APITimeoutError, TimeoutError):
                kind = "timeout"
                failures.append(_no_response(kind, time.perf_counter() - t0))
            except openai.APIConnectionError as exc:
                if isinstance(exc.__cause__, BodyRefused):  # openai 2 wraps what its send raised
                    kind = "refused_body"
                    failures.append(refused_evidence(exc.__cause__, self._secret))
                else:
                    kind = "connection"
                    failures.append(_no_response(kind, time.perf_counter() - t0))
            else:
                try:
                    # the one place a completion enters: read within boundedjson's depth, and
                    # the key redacted from every string of it (ids, finish_reason,
                    # system_fingerprint, content, unknown fields)
                    body = self.scrub(boundedjson.loads(resp.content))
                except boundedjson.TooDeep as exc:
                    failures.append({**evidence_of(resp, self._secret), "refused": str(exc)})
                    kind = "too_deep"
                except ValueError:
                    failures.append(evidence_of(resp, self._secret))
                    kind = "not_json"
                else:
                    if isinstance(body, dict) and "error" in body and "choices" not in body:
                        failures.append(evidence_of(resp, self._secret))
                        kind = "error_body"
                    elif not isinstance(body, dict):
                        failures.append(evidence_of(resp, self._secret))
                        kind = "not_json"
                    else:
                        try:
                            reply = read_reply(body, waited, retries)
                        except CallFailed as exc:
                            failures.append(evidence_of(resp, self._secret))
                            exc.seconds, exc.evidence = waited, failures
                            raise
                        reply.failures = failures
                        reply.body_bytes = len(resp.content)
                        usage, missing = checked_usage(reply.usage)
                        if missing:  # counted with the pinned tokenizer, disclosed on the card
                            estimate = estimate_usage(payload, reply)
                            usage.update({name: estimate[name] for name in missing})
                        reply.usage, reply.estimated = usage, missing
                        return reply
            if retries >= ex.max_retries:
                raise CallFailed(f"{kind} after {retries} retries", retries, waited, failures)
            retries += 1
            log.retries = retries
            self.counters.retries += 1
            self.counters.last_retry = kind
            self.counters.by_kind[kind] = self.counters.by_kind.get(kind, 0) + 1
            if self._on_retry is not None:
                self._on_retry(kind)
            delay = min(ex.backoff_max_s, ex.backoff_s * 2 ** (retries - 1))
            delay *= 0.5 + random.random() / 2  # jitter spreads retries of concurrent episodes
            if retry_after is not None:
                delay = max(delay, min(retry_after, ceiling))
            t0 = time.perf_counter()
            try:
                await asyncio.sleep(delay)
            finally:
                waited += time.perf_counter() - t0
                log.seconds = waited
