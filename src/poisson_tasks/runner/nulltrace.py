"""A verifiers null-harness trace (one line of traces.jsonl, as JSON) read as a verdict.

Pure and free of verifiers: the export's `finalize` calls `verdict_info` on the live trace and the
runner's `verifiers-null` harness calls `episode_from_trace` on traces.jsonl, so both read the same
calls the same way as the native loop (runner.episode) does.

What the trace gives: `nodes` (messages; `parent` links a node to the one before it, `sampled`
marks a model's reply), `calls` (one per model request: usage, time, error), `stop_condition`
(`agent_completed`, `max_turns`, `provider_error`, ...) and `errors`. The turns are the tool calls of
the sampled assistant messages on the path to the last node, their arguments parsed by the same
function as the native loop's. A reply that ends the episode and looks like a tool call written as
text counts as format clause 1, as in the native loop.

Where the two harnesses differ: a call whose arguments are not a JSON object, or that names no
tool in the block, never reaches the tool server on the null harness: the harness answers it with
its own error text and the engine's sequence number does not advance. The verdict is the same
(verify() replays the calls and such a call makes it malformed_call), but the tool answers after it
differ from the native loop's, so the replay check stops at the first such call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from poisson_tasks.bundle import TaskBundle, ToolCall
from poisson_tasks.runner.endpoint import parse_tool_call
from poisson_tasks.runner.textcalls import looks_like_tool_call
from poisson_tasks.verifier import OUTCOMES, FormatReport, Outcome, verify

TRACE_INFO_KEY = "poisson_tasks"
PROVIDER_STOPS = frozenset({"provider_error"})
TIMEOUT_STOPS = frozenset({"timeout", "rollout_timeout", "agent_timeout"})


def _path(nodes: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The nodes from the root to the last node, following `parent` links."""
    if not nodes:
        return []
    out: list[Mapping[str, Any]] = []
    index: int | None = len(nodes) - 1
    seen: set[int] = set()
    while index is not None and index not in seen and 0 <= index < len(nodes):
        seen.add(index)
        node = nodes[index]
        out.append(node)
        parent = node.get("parent")
        index = parent if isinstance(parent, int) else None
    return out[::-1]


def _content(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(
            str(p.get("text", "")) for p in value if isinstance(p, dict) and p.get("type") == "text"
        )
    return ""


def read_turns(
    wire: Mapping[str, Any],
) -> tuple[list[list[ToolCall]], list[str | None], str | None, int, list[str]]:
    """(turns, the answer each call got or None, the last reply's text, model replies, text calls).

    Only the model's own (sampled) replies count; a seeded history's messages are the prompt.
    """
    nodes = wire.get("nodes") or []
    path = _path(nodes)
    answers: dict[str, str] = {}
    for node in path:
        msg = node.get("message") or {}
        if msg.get("role") == "tool" and isinstance(msg.get("tool_call_id"), str):
            answers.setdefault(msg["tool_call_id"], _content(msg.get("content")))
    turns: list[list[ToolCall]] = []
    seen: list[str | None] = []
    last_text: str | None = None
    replies = 0
    for node in path:
        msg = node.get("message") or {}
        if not node.get("sampled") or msg.get("role") != "assistant":
            continue
        replies += 1
        calls = msg.get("tool_calls") or []
        if not calls:
            content = msg.get("content")
            last_text = content if isinstance(content, str) else None
            continue
        last_text = None
        turn = []
        for call in calls:
            turn.append(
                parse_tool_call({"name": call.get("name"), "arguments": call.get("arguments")})
            )
            seen.append(answers.get(str(call.get("id"))))
        turns.append(turn)
    text_calls = [last_text] if last_text is not None and looks_like_tool_call(last_text) else []
    return turns, seen, last_text, replies, text_calls


def _reaches_engine(call: ToolCall, names: set[str]) -> bool:
    return call.arguments is not None and call.name in names


def replay_differs(
    bundle: TaskBundle,
    turns: Sequence[Sequence[ToolCall]],
    seen: Sequence[str | None],
    replay: Sequence[str],
) -> bool:
    """Whether a tool answer the model saw differs from the verifier's replay, up to the first
    call the harness answers itself (see the module docstring)."""
    names = set(bundle.tool_names)
    flat = [c for t in turns for c in t]
    for call, got, want in zip(flat, seen, replay, strict=False):
        if not _reaches_engine(call, names):
            return False
        if got is not None and got != want:
            return True
    return False


def _instrument(wire: Mapping[str, Any]) -> tuple[Outcome | None, str | None]:
    """An instrument failure the trace records: the provider (api_error) or the run's clock."""
    stop = wire.get("stop_condition")
    errors = [e for e in wire.get("errors") or [] if isinstance(e, dict)]
    call_errors = [
        c.get("error") for c in wire.get("calls") or [] if isinstance(c, dict) and c.get("error")
    ]
    detail = "; ".join(
        f"{e.get('type', 'Error')}: {str(e.get('message', ''))[:300]}"
        for e in [*errors, *[c for c in call_errors if isinstance(c, dict)]]
    )
    if (
        stop in PROVIDER_STOPS
        or call_errors
        or any(e.get("type") == "ProviderError" for e in errors)
    ):
        return "api_error", detail or f"stop condition {stop}"
    if stop in TIMEOUT_STOPS or wire.get("is_timeout"):
        return "wall_timeout", detail or f"stop condition {stop}"
    if errors:
        return "verifier_error", f"the verifiers harness failed: {detail}"
    if stop not in ("agent_completed", "max_turns"):
        return "verifier_error", f"the verifiers rollout stopped on {stop!r}"
    return None, None


def verdict_info(bundle: TaskBundle, wire: Mapping[str, Any]) -> dict[str, Any]:
    """The verdict of one trace, as the JSON the export writes to trace.info."""
    turns, seen, _, replies, text_calls = read_turns(wire)
    instrument, error = _instrument(wire)
    base = {
        "task_id": bundle.task_id,
        "model_calls": replies,
        "tool_calls": sum(len(t) for t in turns),
        "tool_call_sequence": [[c.name, c.arguments, c.raw_arguments] for t in turns for c in t],
        "unparsed_text_calls": len(text_calls),
        "stop_condition": wire.get("stop_condition"),
    }
    if instrument is not None:
        return {
            **base,
            "outcome": instrument,
            "strict_label": instrument,
            "passed": False,
            "leaky_pass": False,
            "malformed_clause": None,
            "goal_stages": [],
            "final_state": [],
            "error": error,
        }
    hit_limit = wire.get("stop_condition") == "max_turns"
    verdict = verify(
        bundle,
        turns,
        ended_with_reply=not hit_limit,
        turn_limit_hit=hit_limit,
        fmt=FormatReport(unparsed_calls=len(text_calls)),
    )
    outcome: Outcome = verdict.outcome
    if outcome != "verifier_error" and replay_differs(bundle, turns, seen, verdict.observations):
        outcome, error = (
            "replay_mismatch",
            (f"a tool answer differs from the verifier's replay (verdict was {verdict.outcome})"),
        )
    else:
        error = verdict.detail or None
    scored = outcome == verdict.outcome
    return {
        **base,
        "outcome": outcome,
        "strict_label": verdict.strict_label if scored else outcome,
        "passed": bool(scored and verdict.passed),
        "leaky_pass": bool(scored and verdict.leaky_pass),
        "malformed_clause": verdict.malformed_clause if scored else None,
        "goal_stages": list(verdict.goal_stages),
        "final_state": [list(r) for r in verdict.final_state],
        "error": error,
    }


def scores(info: Mapping[str, Any]) -> dict[str, float]:
    """The export's reward and metrics from a verdict (`verdict_info`'s JSON).

    `strict` is the strict reading whatever the arm's strictness: 1.0 only when the strict label
    is passed. `arm_pass` is the reading under the arm's own strictness (the verdict's `passed`:
    leaky on a /leaky arm), `leaky_pass` the leaky reading; `outcome` is the label's index in
    verifier.OUTCOMES, -1.0 for a label outside it.
    """
    outcome = info.get("outcome")
    return {
        "strict": 1.0 if info.get("strict_label") == "passed" else 0.0,
        "arm_pass": 1.0 if info.get("passed") else 0.0,
        "leaky_pass": 1.0 if info.get("leaky_pass") else 0.0,
        "model_calls": float(info.get("model_calls", 0)),
        "tool_calls": float(info.get("tool_calls", 0)),
        "outcome": float(OUTCOMES.index(outcome)) if outcome in OUTCOMES else -1.0,
    }
