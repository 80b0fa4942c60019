"""The OpenAI chat-completions wire format of the reference endpoint: completions, usage, errors.

Token counts use the pinned tokenizer (tokens.count_tokens) over a fixed rendering of the request
and the reply, so the same request always reports the same usage:

- prompt_tokens: the tool block as sorted-key JSON, plus each message rendered as "role: text" (its
  tool calls appended as JSON) with 4 tokens of framing each, plus 3 for the reply's priming;
- cached_tokens: the part of that prompt before the conversation's last assistant message, which is
  what a prefix cache holding the previous turn would serve (0 when there is no assistant message);
- completion_tokens: the reply rendered the same way, plus the policy's reasoning_tokens.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

import orjson

from poisson_tasks import __version__
from poisson_tasks.policycatalogue import PolicySpec
from poisson_tasks.reference.policies import PolicyReply
from poisson_tasks.reference.reading import content_text
from poisson_tasks.tokens import count_tokens

SERVER_NAME = "poisson-tasks-reference"
CREATED = 1767225600  # 2026-01-01T00:00:00Z: fixed, so a response is a function of its request
MESSAGE_FRAMING = 4
REPLY_PRIMING = 3


def _count(text: str) -> int:
    try:
        return count_tokens(text)
    except ValueError:  # a special-token look-alike such as <|endoftext|>: count it as plain text
        return count_tokens(text.replace("<|", "< |"))


@lru_cache(maxsize=8192)
def tokens_of(text: str) -> int:
    """Tokens of `text`, counting special-token look-alikes as plain text."""
    return _count(text)


def render_message(message: Mapping[str, Any]) -> str:
    """A message as counted: 'role: text', its tool calls appended as JSON."""
    content = message.get("content")
    text = content if isinstance(content, str) else content_text(content)
    calls = message.get("tool_calls")
    head = f"{message.get('role', '')}: {text}"
    return head + orjson.dumps(calls).decode() if calls else head


@lru_cache(maxsize=256)
def block_tokens(tools_json: str) -> int:
    """Tokens of a tool block's JSON (its own small cache: a 258-tool block is ~80 KB of text)."""
    return _count(tools_json) if tools_json else 0


def prompt_usage(messages: Sequence[Mapping[str, Any]], tools_json: str) -> tuple[int, int]:
    """(prompt_tokens, cached_tokens) of a request."""
    counts = [tokens_of(render_message(m)) + MESSAGE_FRAMING for m in messages]
    head = block_tokens(tools_json)
    last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=None)
    cached = head + sum(counts[:last]) if last is not None else 0
    return head + sum(counts) + REPLY_PRIMING, cached


def request_tokens(messages: Sequence[Mapping[str, Any]], tools: Sequence[Any]) -> int:
    """The pinned tokenizer's count of a chat request (its messages and tool block): the rendering
    this endpoint reports as prompt_tokens, and the count pin N13 sets a server's own beside."""
    tools_json = orjson.dumps(list(tools), option=orjson.OPT_SORT_KEYS).decode() if tools else ""
    return prompt_usage(messages, tools_json)[0]


def render_reply(reply: PolicyReply) -> str:
    if reply.content is not None:
        return reply.content
    return "\n".join(f"{name}({arguments})" for name, arguments in reply.calls)


def _cut(text: str, limit: int) -> str:
    """The longest prefix of `text` within `limit` tokens (by bisection on characters)."""
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if tokens_of(text[:mid]) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]


def completion(
    spec: PolicySpec,
    request: Mapping[str, Any],
    reply: PolicyReply,
    body_digest: str,
    tools_json: str,
) -> dict[str, Any]:
    """The chat.completion object for `reply`, with usage; cut to finish_reason 'length' when the
    request's max_completion_tokens (or max_tokens) is smaller than the reply."""
    reasoning = int(spec.get("reasoning_tokens"))
    text = render_reply(reply)
    produced = reasoning + tokens_of(text)
    limit = request.get("max_completion_tokens") or request.get("max_tokens")
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if isinstance(limit, int) and produced > limit:
        cut = _cut(text, max(0, limit - reasoning))
        reasoning = min(reasoning, limit)
        produced = reasoning + tokens_of(cut)
        message["content"], finish = cut, "length"
    elif reply.calls:
        message["tool_calls"] = [
            {
                "id": f"call_{body_digest[:16]}_{i}",
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }
            for i, (name, arguments) in enumerate(reply.calls)
        ]
        finish = "tool_calls"
    else:
        finish = "stop"
    messages = request.get("messages") or []
    prompt, cached = prompt_usage(messages, tools_json)
    return {
        "id": f"chatcmpl-ref-{body_digest[:24]}",
        "object": "chat.completion",
        "created": CREATED,
        "model": spec.model,
        "system_fingerprint": f"ref-{__version__}-{spec.name}",
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": produced,
            "total_tokens": prompt + produced,
            "prompt_tokens_details": {"cached_tokens": cached},
            "completion_tokens_details": {"reasoning_tokens": reasoning},
        },
    }


def stream_body(out: Mapping[str, Any], include_usage: bool) -> bytes:
    """A completion as the server-sent events of a streamed answer (`stream: true`), all at once:
    one chunk with the whole message, one with the finish reason, one with the usage when
    stream_options.include_usage asks for it, then `[DONE]`. The content is the same as the
    unstreamed answer's; only the framing differs."""
    head = {k: out[k] for k in ("id", "created", "model", "system_fingerprint")}
    head["object"] = "chat.completion.chunk"
    choice = out["choices"][0]
    message = choice["message"]
    delta: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    if message.get("tool_calls"):
        delta["tool_calls"] = [{"index": i, **c} for i, c in enumerate(message["tool_calls"])]
    chunks: list[dict[str, Any]] = [
        {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]},
    ]
    if include_usage:
        chunks.append({**head, "choices": [], "usage": out["usage"]})
    events = [b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks]
    return b"".join(events) + b"data: [DONE]\n\n"


def error_body(message: str, kind: str, code: str | None = None, param: str | None = None) -> bytes:
    """OpenAI's error object: {"error": {"message", "type", "param", "code"}}."""
    return orjson.dumps({"error": {"message": message, "type": kind, "param": param, "code": code}})


def body_digest(body: bytes) -> str:
    """BLAKE2b-128 of the request body's bytes: the response id and the flaky draw's key."""
    return hashlib.blake2b(body, digest_size=16).hexdigest()
