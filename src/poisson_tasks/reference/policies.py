"""The reference policies: each reads one chat request and returns the assistant's reply.

Pure functions of the request (messages, tool block, `seed`, `user`) and the policy's parameters: a
noisy draw is a SHA-256 of (seed, user, the task text's digest, the conversation's turn, purpose),
never the global random, so a test can replay every decision. The one exception is named for it:
`seed-ignoring` makes the noisy policy's choices from the operating system's entropy, so it stands
for a server that ignores the seed it is sent, and a replay of its run is expected to differ.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from poisson_tasks.arms import ArmSpec, levels, parse_arm_id
from poisson_tasks.errors import ArmError
from poisson_tasks.policycatalogue import PolicySpec, graded_rate
from poisson_tasks.reference.planner import (
    Call,
    CallPlan,
    overshoot_call,
    own_call_answered,
    plan,
    wrong_calls,
)
from poisson_tasks.reference.reading import (
    Conversation,
    TaskReading,
    ToolBlock,
    read_block,
    read_conversation,
    read_task,
    task_text,
)

NO_CALL_REPLY = "I need the record id and its entry code before I can start. Could you send them?"
EARLY_STOP_REPLY = "I have done what I can for this record."


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """The parts of a chat-completions request a policy reads."""

    messages: Sequence[Mapping[str, Any]]
    tools_json: str = ""
    seed: int | None = None
    user: str | None = None


@dataclass(frozen=True, slots=True)
class PolicyReply:
    """The assistant message: text, or tool calls as (name, arguments JSON text) pairs."""

    content: str | None = None
    calls: tuple[tuple[str, str], ...] = field(default_factory=tuple)


def draw(*parts: object) -> float:
    """A uniform number in [0, 1) from SHA-256 of the parts: the policies' only randomness."""
    digest = hashlib.sha256("|".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


@dataclass(frozen=True, slots=True)
class _Seen:
    task: TaskReading
    block: ToolBlock
    conv: Conversation

    def key(self, request: ChatRequest, purpose: str) -> float:
        return draw("noisy", request.seed, request.user, self.task.digest, self.conv.turns, purpose)


def _see(request: ChatRequest) -> _Seen:
    block = read_block(request.tools_json)
    task = read_task(task_text(request.messages), request.tools_json)
    return _Seen(task, block, read_conversation(request.messages))


def _calls(calls: Sequence[Call]) -> PolicyReply:
    return PolicyReply(calls=tuple((c.name, json.dumps(c.arguments)) for c in calls))


def _from_plan(call_plan: CallPlan) -> PolicyReply:
    return _calls(call_plan.calls) if call_plan.calls else PolicyReply(content=call_plan.reply)


def _oracle(spec: PolicySpec, request: ChatRequest) -> PolicyReply:
    seen = _see(request)
    return _from_plan(plan(seen.task, seen.block, seen.conv, parallel=spec.get("parallel") >= 1))


def _overshoot(spec: PolicySpec, request: ChatRequest) -> PolicyReply:
    seen = _see(request)
    return _from_plan(plan(seen.task, seen.block, seen.conv, to_top=True))


def _mistakes(spec: PolicySpec, seen: _Seen, chance: Callable[[str], float]) -> PolicyReply:
    """At each step the oracle would call: stop with p_early_stop, else call a harmless wrong tool
    with p_wrong_tool, else make the oracle's call. At the goal: overshoot once with p_overshoot.
    `chance(purpose)` is the uniform draw behind each choice."""
    call_plan = plan(seen.task, seen.block, seen.conv)
    if call_plan.kind in ("read", "stage"):
        if chance("stop") < spec.get("p_early_stop"):
            return PolicyReply(content=EARLY_STOP_REPLY)
        if chance("wrong") < spec.get("p_wrong_tool"):
            wrong = wrong_calls(seen.task, seen.block, seen.conv)
            if wrong:
                return _calls([wrong[int(chance("which") * len(wrong))]])
        return _calls(call_plan.calls[:1])
    if call_plan.kind == "done":
        over = overshoot_call(seen.task, seen.block, seen.conv)
        if over is not None and chance("overshoot") < spec.get("p_overshoot"):
            return _calls([over])
    return PolicyReply(content=call_plan.reply)


def _noisy(spec: PolicySpec, request: ChatRequest) -> PolicyReply:
    """The oracle with seeded mistakes: each draw is keyed by the request (see _Seen.key)."""
    seen = _see(request)
    return _mistakes(spec, seen, lambda purpose: seen.key(request, purpose))


def entropy_draw(purpose: str) -> float:
    """A uniform number in [0, 1) from os.urandom: what no request's seed can repeat."""
    return int.from_bytes(os.urandom(8), "big") / 2.0**64


def _seed_ignoring(spec: PolicySpec, request: ChatRequest) -> PolicyReply:
    """The noisy policy's mistakes at the same rates, drawn from the server's entropy: the request's
    seed and user tag change nothing, so a replay of the same slot is a fresh draw."""
    return _mistakes(spec, _see(request), entropy_draw)


def _arm_of(user: str | None) -> ArmSpec | None:
    """The arm named by the runner's user tag "<arm>|<seed>|<attempt>", or None."""
    try:
        return parse_arm_id((user or "").split("|")[0])
    except ArmError:
        return None


def top_arm_request(user: str | None) -> bool:
    """Whether the user tag names a knob's highest candidate level (not a control arm)."""
    arm = _arm_of(user)
    return arm is not None and arm.control is None and arm.level == levels(arm.knob)[-1]


def _graded(spec: PolicySpec, request: ChatRequest) -> PolicyReply:
    """The oracle, except that with graded_rate's chance (one draw per episode, keyed by the user
    tag) it stops with a reply once its own first call is answered (a seeded history's calls are
    not its own): the episode has a tool call, and reaches the goal only if that call did."""
    seen = _see(request)
    arm = _arm_of(request.user)
    if (
        arm is not None
        and own_call_answered(seen.task, seen.block, seen.conv)
        and draw("graded", request.user) < graded_rate(spec, arm)
    ):
        return PolicyReply(content=EARLY_STOP_REPLY)
    return _from_plan(plan(seen.task, seen.block, seen.conv))


def _no_call(spec: PolicySpec, request: ChatRequest) -> PolicyReply:
    return PolicyReply(content=NO_CALL_REPLY)


def text_call(call: tuple[str, str]) -> str:
    """A tool call written as plain text, in the hermes <tool_call> form a parser would miss."""
    body = json.dumps({"name": call[0], "arguments": json.loads(call[1])})
    return f"<tool_call>\n{body}\n</tool_call>"


def _text_call(spec: PolicySpec, request: ChatRequest) -> PolicyReply:
    reply = _oracle(spec, request)
    return PolicyReply(content=text_call(reply.calls[0])) if reply.calls else reply


def garble(arguments: str) -> str:
    """Arguments JSON cut off mid-object: what a model that returns garbage tool-call JSON sends."""
    return arguments[:-1] + ', "'


def _garbage(spec: PolicySpec, request: ChatRequest) -> PolicyReply:
    seen = _see(request)
    reply = _from_plan(plan(seen.task, seen.block, seen.conv))
    if reply.calls and seen.key(request, "garbage") < spec.get("p_garbage"):
        return PolicyReply(calls=tuple((n, garble(a)) for n, a in reply.calls))
    return reply


_POLICY_FUNCTIONS = {
    "oracle": _oracle,
    "noisy": _noisy,
    "seed-ignoring": _seed_ignoring,
    "overshoot": _overshoot,
    "graded": _graded,
    "no-call": _no_call,
    "text-call": _text_call,
    "garbage": _garbage,
    "flaky": _oracle,  # its faults are the server's: HTTP errors and delays, not the reply
}


def respond(spec: PolicySpec, request: ChatRequest) -> PolicyReply:
    """The reply of policy `spec` to `request`."""
    return _POLICY_FUNCTIONS[spec.name](spec, request)
