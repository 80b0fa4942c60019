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
8-character piece of it. Each failed attempt is sorted by one table, failures.RETRY_KINDS, from
the exception raised to its retry kind or the error it ends in; `complete` runs attempts
(`_attempt`, `_read`) and backs off between them (`_back_off`).
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import random
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
)
from poisson_tasks.prereg import Decoding, Execution
from poisson_tasks.reference.wire import request_tokens
from poisson_tasks.runfolder import PacingRecord
from poisson_tasks.runner.failures import (
    CAUGHT,
    CallLog,
    Failed,
    Retry,
    evidence_of,
    retry_after_s,
    retry_of,
)
from poisson_tasks.runner.pacing import Pacer, Ticket
from poisson_tasks.runner.received import (
    ACCEPT_IDENTITY,
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
RETRY_AFTER_DEFAULT_MAX_S = 300.0


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
        `seed`, when given, is sent as the request's `seed`. `log`, when given (a fresh one), is
        kept up to date attempt by attempt (retries, seconds, failed attempts' evidence).
        """
        log = log if log is not None else CallLog()
        extra: dict[str, Any] = {"seed": seed} if seed is not None else {}
        payload = orjson.dumps(
            {**self._fixed, **extra, "messages": messages, "tools": tools, "user": user}
        )
        limit = self.decoding.max_completion_tokens

        def tokens() -> int:  # the request's charge as the pacer counts it (pacing.py)
            return request_tokens(messages, tools) + limit

        while True:
            outcome = await self._attempt(payload, tokens, log)
            if isinstance(outcome, ModelReply):
                return outcome
            await self._back_off(outcome, log)

    async def _attempt(
        self, payload: bytes, tokens: Callable[[], int], log: CallLog
    ) -> ModelReply | Retry:
        """One POST and its answer read: the reply, or the retry its failure asks for (the
        failure's evidence appended to the log); raises what cannot be retried."""
        started = time.perf_counter()
        self.counters.calls += 1
        failed: BaseException | None = None
        try:
            try:
                resp = await self._post(payload, log.retries, tokens)
            finally:
                log.seconds += time.perf_counter() - started
        except CAUGHT as exc:
            failed = exc
        if failed is not None:  # outside the except clause: what it raises carries no context
            at = Failed(self.base_url, self.model, self._secret, started, log)
            return retry_of(failed, at)
        return self._read(resp, payload, log)

    def _read(self, resp: httpx2.Response, payload: bytes, log: CallLog) -> ModelReply | Retry:
        """A 200's body as a reply, or the retry a body that is not a whole completion asks for."""
        failures = log.failures
        try:
            # the one place a completion enters: read within boundedjson's depth, and the key
            # redacted from every string of it (ids, finish_reason, system_fingerprint,
            # content, unknown fields)
            body = self.scrub(boundedjson.loads(resp.content))
        except boundedjson.TooDeep as exc:
            failures.append({**evidence_of(resp, self._secret), "refused": str(exc)})
            return Retry("too_deep")
        except ValueError:
            failures.append(evidence_of(resp, self._secret))
            return Retry("not_json")
        if isinstance(body, dict) and "error" in body and "choices" not in body:
            failures.append(evidence_of(resp, self._secret))
            return Retry("error_body")
        if not isinstance(body, dict):
            failures.append(evidence_of(resp, self._secret))
            return Retry("not_json")
        try:
            reply = read_reply(body, log.seconds, log.retries)
        except CallFailed as exc:
            failures.append(evidence_of(resp, self._secret))
            exc.seconds, exc.evidence = log.seconds, failures
            raise
        reply.failures = failures
        reply.body_bytes = len(resp.content)
        usage, missing = checked_usage(reply.usage)
        if missing:  # counted with the pinned tokenizer, disclosed on the card
            estimate = estimate_usage(payload, reply)
            usage.update({name: estimate[name] for name in missing})
        reply.usage, reply.estimated = usage, missing
        return reply

    async def _back_off(self, retry: Retry, log: CallLog) -> None:
        """Count the retry and wait before it: exponential backoff with jitter, at least what the
        server asked for up to the ceiling; raises CallFailed when no retry is left."""
        ex = self.execution
        if log.retries >= ex.max_retries:
            raise CallFailed(
                f"{retry.kind} after {log.retries} retries", log.retries, log.seconds, log.failures
            )
        log.retries += 1
        self.counters.retries += 1
        self.counters.last_retry = retry.kind
        self.counters.by_kind[retry.kind] = self.counters.by_kind.get(retry.kind, 0) + 1
        if self._on_retry is not None:
            self._on_retry(retry.kind)
        delay = min(ex.backoff_max_s, ex.backoff_s * 2 ** (log.retries - 1))
        delay *= 0.5 + random.random() / 2  # jitter spreads retries of concurrent episodes
        if retry.retry_after is not None:
            delay = max(delay, min(retry.retry_after, self._ceiling))
        started = time.perf_counter()
        try:
            await asyncio.sleep(delay)
        finally:
            log.seconds += time.perf_counter() - started
