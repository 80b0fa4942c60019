"""The oracle's plan: from what the request shows, the next calls toward every goal record's goal.

The plan is recomputed from the whole conversation on every request (no server-side memory), so a
call answered `unavailable` is simply planned again, and a call that failed for another reason is
never repeated: the oracle says it is stuck instead of looping.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from poisson_tasks.reference.reading import (
    Answer,
    Conversation,
    TaskReading,
    ToolBlock,
    ToolSig,
)

_RETRY_LIMIT = 16  # the most times one call answered `unavailable` is made again
_OK = "ok"
_UNAVAILABLE = "unavailable"


@dataclass(frozen=True, slots=True)
class Call:
    """One tool call a policy decides to make."""

    name: str
    arguments: dict[str, str]


@dataclass(frozen=True, slots=True)
class CallPlan:
    """What the oracle does next: read for a hidden code, advance a record, reply, or give up."""

    kind: Literal["read", "stage", "done", "stuck"]
    calls: tuple[Call, ...] = ()
    reply: str = ""


@dataclass(frozen=True, slots=True)
class PlanProgress:
    """Where a goal record stands by the answers so far, and its next stage call's token."""

    stage: int
    token: str | None


def hidden_code(task: TaskReading, conv: Conversation) -> str | None:
    """The entry code joined from part_i_of_n answers of the named reads, once every piece is in."""
    pieces: dict[int, dict[int, str]] = {}
    for answer in conv.answers:
        if answer.name in task.code_reads and (part := answer.part) is not None:
            pieces.setdefault(part[1], {})[part[0]] = answer.payload
    for count, got in sorted(pieces.items()):
        if count > 0 and set(got) == set(range(1, count + 1)):
            size = task.code_hex // count
            return "".join(got[i][:size] for i in range(1, count + 1))
    return None


def progress(task: TaskReading, block: ToolBlock, conv: Conversation) -> dict[str, PlanProgress]:
    """Replay the ok answers of stage calls onto each goal record: its stage and next token."""
    code = hidden_code(task, conv) if task.code_reads else None
    out = {
        g.record_id: PlanProgress(
            g.start, (task.code_of(g.record_id) or code) if g.start == 0 else None
        )
        for g in task.goals
    }
    ledgers = {g.record_id: g.ledger for g in task.goals}
    for answer in conv.answers:
        tool = block.by_name(answer.name)
        rid = (answer.arguments or {}).get("record_id")
        if (
            tool is not None
            and tool.kind == "stage"
            and isinstance(rid, str)
            and ledgers.get(rid) == tool.ledger
            and answer.status == _OK
        ):
            out[rid] = PlanProgress(tool.stage, answer.payload)
    return out


def own_call_answered(task: TaskReading, block: ToolBlock, conv: Conversation) -> bool:
    """Whether a call the plan makes has been answered: a stage call on a goal record, or a read
    the request names for its code. A seeded history's calls are neither (each is a read the task
    does not need), so this tells a policy's own calls from the history it was given."""
    ledgers = {g.record_id: g.ledger for g in task.goals}

    def own(answer: Answer) -> bool:
        tool = block.by_name(answer.name)
        rid = (answer.arguments or {}).get("record_id")
        if tool is not None and tool.kind == "stage" and isinstance(rid, str):
            return ledgers.get(rid) == tool.ledger
        return answer.name in task.code_reads

    return any(own(answer) for answer in conv.answers)


def _fill(tool: ToolSig, task: TaskReading, record_id: str, token: str) -> dict[str, str] | None:
    values = dict(task.values)
    args: dict[str, str] = {}
    for param in tool.params:
        if param == "record_id":
            args[param] = record_id
        elif param == "token":
            args[param] = token
        elif param in values:
            args[param] = values[param]
        else:
            return None
    return args


def _history(conv: Conversation, call: Call) -> tuple[bool, int]:
    """Whether this exact call already failed (not as unavailable); how often it was unavailable."""
    failed, unavailable = False, 0
    for answer in conv.answers:
        if answer.name == call.name and answer.arguments == call.arguments:
            if answer.status == _UNAVAILABLE:
                unavailable += 1
            elif answer.status != _OK and answer.part is None:
                failed = True
    return failed, unavailable


def _guarded(kind: Literal["read", "stage"], calls: list[Call], conv: Conversation) -> CallPlan:
    for call in calls:
        failed, unavailable = _history(conv, call)
        if failed:
            return CallPlan(
                "stuck", reply=f"I cannot finish: {call.name} refused the call I would make."
            )
        if unavailable >= _RETRY_LIMIT:
            return CallPlan("stuck", reply=f"I cannot finish: {call.name} stays unavailable.")
    return CallPlan(kind, tuple(calls))


def _read_call(tool: ToolSig, record_id: str) -> Call:
    return Call(tool.name, {p: f"entry code of {record_id}" for p in tool.params})


def _top(block: ToolBlock, ledger: tuple[str, ...], stage: int) -> int:
    while block.stage_tool(ledger, stage + 1) is not None:
        stage += 1
    return stage


def plan(
    task: TaskReading,
    block: ToolBlock,
    conv: Conversation,
    *,
    parallel: bool = False,
    to_top: bool = False,
) -> CallPlan:
    """The next calls: reads for a hidden code first, then each goal record's next stage call.

    One call at a time unless `parallel` (then every call that does not wait on another);
    `to_top` keeps climbing past the goal while the block offers the next stage.
    """
    if not task.goals:
        return CallPlan("stuck", reply="I cannot find a record to move in the request.")
    state = progress(task, block, conv)
    if task.code_reads:  # the request names reads for a code it does not state: call every one
        answered = {a.name for a in conv.answers if a.status != _UNAVAILABLE}
        todo = [n for n in task.code_reads if n not in answered]
        if todo:
            rid = task.goals[0].record_id
            reads = [
                _read_call(found, rid) for n in todo if (found := block.by_name(n)) is not None
            ]
            return _guarded("read", reads if parallel else reads[:1], conv)
    calls: list[Call] = []
    for goal in task.goals:
        now = state[goal.record_id]
        target = _top(block, goal.ledger, max(now.stage, goal.stage)) if to_top else goal.stage
        if now.stage >= target:
            continue
        tool = block.stage_tool(goal.ledger, now.stage + 1)
        if tool is None:
            return CallPlan(
                "stuck", reply=f"I cannot finish: no tool moves {goal.record_id} further."
            )
        if now.token is None:
            return CallPlan(
                "stuck", reply=f"I cannot finish: I do not know the token for {goal.record_id}."
            )
        args = _fill(tool, task, goal.record_id, now.token)
        if args is None:
            return CallPlan(
                "stuck",
                reply=f"I cannot finish: the request leaves a value of {tool.name} unstated.",
            )
        calls.append(Call(tool.name, args))
        if not parallel:
            break
    if calls:
        return _guarded("stage", calls, conv)
    done = ", ".join(f"{g.record_id} at stage {state[g.record_id].stage}" for g in task.goals)
    return CallPlan("done", reply=f"Done: record {done}.")


def overshoot_call(task: TaskReading, block: ToolBlock, conv: Conversation) -> Call | None:
    """One stage past the goal for the first goal record the block lets climb, when all stand
    exactly at their goals (so an overshoot is made at most once)."""
    state = progress(task, block, conv)
    if any(state[g.record_id].stage != g.stage for g in task.goals):
        return None
    for goal in task.goals:
        tool = block.stage_tool(goal.ledger, goal.stage + 1)
        token = state[goal.record_id].token
        if tool is not None and token is not None:
            args = _fill(tool, task, goal.record_id, token)
            if args is not None:
                return Call(tool.name, args)
    return None


def wrong_calls(task: TaskReading, block: ToolBlock, conv: Conversation) -> list[Call]:
    """Harmless wrong calls, in block order: reads the task does not need, and other ledgers'
    stage tools (their ledger holds no goal record: the engine answers no_record, moves nothing)."""
    goal_ledgers = {g.ledger for g in task.goals}
    rid = task.goals[0].record_id if task.goals else "record"
    token = (
        next(iter(progress(task, block, conv).values()), PlanProgress(0, None)).token or "0" * 12
    )
    values = dict(task.values)
    out = []
    for tool in block.tools:
        if (tool.kind == "read" and tool.name not in task.code_reads) or (
            tool.kind == "stage" and tool.ledger not in goal_ledgers
        ):
            args = {
                p: rid
                if p in ("record_id", "query")
                else token
                if p == "token"
                else values.get(p, "none")
                for p in tool.params
            }
            out.append(Call(tool.name, args))
    return out
