"""One episode: the model sees the task's messages and tool block, nothing else, until it replies.

Each tool call is answered with the engine's 52-byte line (domain.engine.apply on bundle.engine).
The episode ends on a reply without tool calls, on the turn limit (scored turn_limit), when the
conversation outgrows the serving context window (also scored turn_limit, flagged
context_overflow), or on an instrument failure (api_error, wall_timeout).

Context overflow. The spec's outcome vocabulary is closed and has no label for it. A model that
keeps calling tools until its window is full has used up the conversation's budget exactly as one
that reaches the turn limit has: the nearest model outcome is turn_limit ("the turn budget ran
out"), so the episode is scored so and stays in the denominator, with `context_overflow` set on its
line so the card counts it apart. A first request that already overflows is the instrument's
problem (the task alone does not fit the window): it raises ArmDoesNotFit, which stops the run.

A call the server could not parse. llama.cpp answers HTTP 500 ("Failed to parse tool call
arguments as JSON") when a tool call the model wrote has arguments that are not JSON. That is the
model's malformed call, not the instrument's failure: the episode ends there, the server's message
is kept as an unparsed text call, and the verdict is malformed_call (format clause 1). The verdict comes from verifier.verify, and the
runner's own observations are compared with the verdict's replay (a difference is replay_mismatch).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from poisson_tasks.bundle import TaskBundle, ToolCall
from poisson_tasks.domain.engine import apply, initial_state
from poisson_tasks.errors import ArmDoesNotFit, CallFailed, ContextOverflow, UnparsedToolCall
from poisson_tasks.owntools import ToolSet, scored_calls
from poisson_tasks.prereg import Slot
from poisson_tasks.reference.wire import request_tokens
from poisson_tasks.runfolder import EpisodeLine, Timing, Usage
from poisson_tasks.runner.endpoint import Endpoint, ModelReply, derived_seed
from poisson_tasks.runner.failures import CallLog
from poisson_tasks.runner.received import MAX_EPISODE_BYTES
from poisson_tasks.runner.textcalls import text_call_dialect
from poisson_tasks.verifier import EpisodeVerdict, FormatReport, Outcome, verify


def user_tag(slot: Slot) -> str:
    """The request's `user` field: "<arm>|<seed>|<attempt>" (the reference policies seed on it)."""
    return f"{slot.arm_id}|{slot.seed}|{slot.attempt}"


@dataclass(slots=True)
class Trace:
    """What the episode has seen so far; held by the caller so a cut-off episode keeps its spend."""

    messages: list[dict[str, Any]]
    opening: int
    request_sizes: list[int] = field(default_factory=list)
    replies: list[ModelReply] = field(default_factory=list)
    turns: list[list[ToolCall]] = field(default_factory=list)
    observations: list[str] = field(default_factory=list)
    text_calls: list[str] = field(default_factory=list)
    text_call_dialects: list[str] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    retries: int = 0
    model_s: float = 0.0
    call_started: float | None = None
    in_flight: CallLog | None = None  # the call under way: its attempts so far

    @classmethod
    def start(cls, bundle: TaskBundle) -> Trace:
        opening = bundle.messages()
        return cls(messages=opening, opening=len(opening))

    def close_call(self) -> None:
        """Count a call cut short (by the episode's timeout) as time spent waiting on the model,
        and keep every attempt it made: its retries and failed attempts' evidence."""
        if self.call_started is not None:
            self.model_s += time.perf_counter() - self.call_started
            self.call_started = None
        if self.in_flight is not None:
            self.retries += self.in_flight.retries
            self.failures.extend(self.in_flight.failures)
            self.in_flight = None


def _sum(values: Sequence[int | float | None]) -> Any:
    """A total over responses, or None when any response did not report the figure."""
    if not values or any(v is None for v in values):
        return None
    return sum(v for v in values if v is not None)


def _detail(usage: dict[str, Any] | None, part: str, key: str) -> int | None:
    if usage is None:
        return None
    section = usage.get(part)
    value = section.get(key) if isinstance(section, dict) else None
    return value if isinstance(value, int) else None


def _field(usage: dict[str, Any] | None, key: str) -> Any:
    value = usage.get(key) if usage is not None else None
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _uncached(usage: dict[str, Any] | None) -> int | None:
    """The provider's prompt tokens less the cached ones (all of them when none are reported)."""
    prompt = _field(usage, "prompt_tokens")
    cached = _detail(usage, "prompt_tokens_details", "cached_tokens")
    if not isinstance(prompt, int):
        return None
    return prompt - cached if cached is not None else prompt


def first_request(trace: Trace, tools: Sequence[Any]) -> dict[str, int | None]:
    """Pin N13's figures for an episode: its first request's input tokens as the server counted
    them (None when no response came or it reported no usage) and the pinned tokenizer's count
    of the same request (its opening messages and the tool block)."""
    first = trace.replies[0] if trace.replies else None
    server = (
        _field(first.usage, "prompt_tokens")
        if first is not None and "prompt_tokens" not in first.estimated
        else None
    )
    return {
        "first_request_tokens": server if isinstance(server, int) else None,
        "first_request_pinned_tokens": request_tokens(trace.messages[: trace.opening], tools),
    }


def episode_usage(replies: Sequence[ModelReply]) -> Usage:
    """Usage as the provider reported it on each response, summed; a response that reported none
    was counted with the pinned tokenizer (endpoint.estimate_usage) and its tokens are summed into
    estimated_tokens as well.

    Run-folder convention: uncached_input_tokens is the uncached input, cached_input_tokens the cached
    input (None where the provider reports no cache figure), completion_tokens holds reasoning.
    """
    us = [r.usage for r in replies]
    costs = [_field(u, "cost") for u in us]
    return Usage(
        uncached_input_tokens=_sum([_uncached(u) for u in us]),
        cached_input_tokens=_sum(
            [_detail(u, "prompt_tokens_details", "cached_tokens") for u in us]
        ),
        completion_tokens=_sum([_field(u, "completion_tokens") for u in us]),
        reasoning_tokens=_sum(
            [_detail(u, "completion_tokens_details", "reasoning_tokens") for u in us]
        ),
        provider_cost_usd=float(sum(c for c in costs if c is not None))
        if any(c is not None for c in costs)
        else None,
        estimated_tokens=sum(_field(r.usage, name) or 0 for r in replies for name in r.estimated)
        if any(r.estimated for r in replies)
        else None,
    )


def _transcript(trace: Trace, user: str) -> dict[str, Any]:
    return {
        "user": user,
        "messages": trace.messages,
        "opening_messages": trace.opening,
        "request_messages": trace.request_sizes,
        "responses": [r.raw for r in trace.replies],
        "response_seconds": [round(r.seconds, 6) for r in trace.replies],
        "response_retries": [r.retries for r in trace.replies],
        "tool_calls": [[c.model_dump() for c in turn] for turn in trace.turns],
        "observations": trace.observations,
        "text_calls": trace.text_calls,
        "text_call_dialects": trace.text_call_dialects,
        "failed_responses": trace.failures,
        "retries": trace.retries,
    }


@dataclass(frozen=True, slots=True)
class EpisodeContext:
    """What every episode of a session shares."""

    endpoint: Endpoint
    turn_limit: int
    timeout_s: float
    session: int
    resumed: bool
    derive_seed: bool = False
    own_tools: ToolSet | None = None


class _Overflow(Exception):
    """The conversation outgrew the window after the first request: ends the episode."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


async def _loop(
    bundle: TaskBundle, ctx: EpisodeContext, trace: Trace, user: str, attempt: int
) -> bool:
    """The model-call loop; returns True when it hit the turn limit."""
    state = initial_state(bundle.engine)
    seed = derived_seed(bundle.task_id, attempt) if ctx.derive_seed else None
    for _ in range(ctx.turn_limit):
        trace.request_sizes.append(len(trace.messages))
        trace.call_started = time.perf_counter()
        trace.in_flight = CallLog()
        try:
            reply = await ctx.endpoint.complete(
                trace.messages, bundle.tools, user, seed, trace.in_flight
            )
        except CallFailed as exc:
            trace.in_flight = None
            trace.retries += exc.retries
            trace.model_s += exc.seconds
            trace.failures.extend(exc.evidence)
            trace.call_started = None
            if isinstance(exc, ContextOverflow):
                if not trace.replies:
                    window = f" (window {exc.window} tokens)" if exc.window else ""
                    raise ArmDoesNotFit(
                        f"arm {bundle.arm_id}: the task's first request already exceeds the "
                        f"served model's context window{window}; serve a longer context or "
                        f"drop the arm ({exc.detail})"
                    ) from None
                raise _Overflow(exc.detail) from None
            if isinstance(exc, UnparsedToolCall):  # the model's malformed call: clause 1
                trace.text_calls.append(exc.detail)
                trace.text_call_dialects.append("server-unparsed")
                return False
            raise
        trace.call_started = trace.in_flight = None
        trace.replies.append(reply)
        received = sum(r.body_bytes for r in trace.replies)
        if received > MAX_EPISODE_BYTES:  # the line would outgrow what a run folder reads
            raise CallFailed(
                f"the endpoint sent {received:,} bytes of responses in one episode, more than "
                f"the {MAX_EPISODE_BYTES:,} an episode keeps",
                0,
            )
        trace.retries += reply.retries
        trace.model_s += reply.seconds
        trace.failures.extend(reply.failures)
        if not reply.tool_calls:
            trace.messages.append({"role": "assistant", "content": reply.content})
            dialect = text_call_dialect(reply.content)
            if dialect is not None:
                trace.text_calls.append(reply.content or "")
                trace.text_call_dialects.append(dialect)
            return False
        trace.messages.append(
            {"role": "assistant", "content": reply.content, "tool_calls": reply.wire_calls}
        )
        calls = scored_calls(reply.tool_calls, ctx.own_tools)  # a user tool's call, as scored
        trace.turns.append(calls)
        for wire, call in zip(reply.wire_calls, calls, strict=True):
            state, line = apply(bundle.engine, state, call.name, call.arguments)
            trace.observations.append(line)
            trace.messages.append({"role": "tool", "tool_call_id": wire["id"], "content": line})
    return True


def _judged(
    bundle: TaskBundle,
    trace: Trace,
    hit_limit: bool,
    instrument: Outcome | None,
    error: str | None,
) -> tuple[EpisodeVerdict | None, Outcome, str | None]:
    """An episode's verdict (None after an instrument failure), its outcome and its error: the
    verifier's, unless its replay differs from what the runner observed (replay_mismatch)."""
    if instrument is not None:
        return None, instrument, error
    fmt = FormatReport(unparsed_calls=len(trace.text_calls))
    verdict = verify(
        bundle, trace.turns, ended_with_reply=not hit_limit, turn_limit_hit=hit_limit, fmt=fmt
    )
    if verdict.outcome != "verifier_error" and verdict.observations != trace.observations:
        return (
            verdict,
            "replay_mismatch",
            "the verifier's replay differs from the runner's observations "
            f"(verdict was {verdict.outcome})",
        )
    return verdict, verdict.outcome, verdict.detail or error


async def run_episode(
    bundle: TaskBundle,
    slot: Slot,
    ctx: EpisodeContext,
    setup_s: float,
    trace: Trace | None = None,
) -> EpisodeLine:
    """Run one episode to its end and return its line; OutOfCredit and EndpointError propagate
    (and cancellation), leaving what was spent in `trace`."""
    user = user_tag(slot)
    start = time.perf_counter()
    trace = trace if trace is not None else Trace.start(bundle)
    error: str | None = None
    instrument: Outcome | None = None
    hit_limit = False
    overflow = False
    try:
        async with asyncio.timeout(ctx.timeout_s):
            hit_limit = await _loop(bundle, ctx, trace, user, slot.attempt)
    except _Overflow as exc:
        hit_limit = overflow = True
        error = f"context overflow: {exc.detail}"
    except CallFailed as exc:
        instrument, error = "api_error", exc.detail
    except TimeoutError:
        trace.close_call()
        instrument, error = "wall_timeout", f"the episode ran past {ctx.timeout_s:g} s"
    verdict, outcome, error = _judged(bundle, trace, hit_limit, instrument, error)
    scored = verdict is not None and outcome == verdict.outcome
    episode_s = time.perf_counter() - start
    return EpisodeLine(
        arm_id=slot.arm_id,
        seed=slot.seed,
        attempt=slot.attempt,
        task_id=bundle.task_id,
        session=ctx.session,
        resumed=ctx.resumed,
        outcome=outcome,
        strict_label=verdict.strict_label if scored and verdict is not None else outcome,
        leaky_pass=bool(scored and verdict is not None and verdict.leaky_pass),
        passed=bool(scored and verdict is not None and verdict.passed),
        malformed_clause=verdict.malformed_clause if scored and verdict is not None else None,
        min_calls=bundle.min_calls,
        tool_calls=sum(len(t) for t in trace.turns),
        model_calls=len(trace.replies),
        goal_stages=list(verdict.goal_stages) if verdict is not None else [],
        usage=episode_usage(trace.replies).model_copy(update=first_request(trace, bundle.tools)),
        timing=Timing(
            episode_s=episode_s,
            model_s=trace.model_s,
            harness_s=max(0.0, episode_s - trace.model_s),
            setup_s=setup_s,
        ),
        system_fingerprints=[r.fingerprint for r in trace.replies],
        finish_reasons=[r.finish_reason for r in trace.replies],
        unparsed_text_calls=len(trace.text_calls),
        context_overflow=overflow,
        error=ctx.endpoint.redact(error) if error else None,
        transcript=ctx.endpoint.scrub(_transcript(trace, user)),
    )
