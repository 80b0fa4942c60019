"""Seeded episodes for reading every verdict twice: verify() and tests/verdict_oracle.py side by side.

`case(World(bundle), index)` builds episode number `index` of a bundle by named classes: the reference and its
prefixes, the bundle's negative controls, random walks over the ledger, each then mutated by zero to
three named operations (repeated, dropped and swapped calls; a goal record or a bystander carried
further with the chain token the engine gave; lookalike ledgers; fault retries; missing, extra and
wrongly typed arguments; unknown names; arguments that did not parse; reads mixed in), grouped into
turns and given end flags and a FormatReport. The draw is keyed by the task id and the index, so the
same bundle gives the same episodes in every process. Nothing here judges an episode.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from poisson_tasks.bundle import TaskBundle, ToolCall
from poisson_tasks.domain.engine import LedgerState, apply, initial_state, line_status
from poisson_tasks.domain.ledger import ToolBinding
from poisson_tasks.domain.vocabulary import CLASSES, LADDER, READ_NOUNS, READ_VERBS
from poisson_tasks.owntools import ToolSet
from poisson_tasks.verifier import FormatReport

Calls = list[ToolCall]
Key = tuple[str, str]  # (ledger, record_id)


@dataclass(frozen=True)
class Case:
    """One episode as verify() takes it, and the classes that built it (joined by '+')."""

    kind: str
    turns: tuple[tuple[ToolCall, ...], ...]
    ended_with_reply: bool
    turn_limit_hit: bool
    fmt: FormatReport | None


def _call(name: str, arguments: dict[str, Any] | None, raw: str | None = None) -> ToolCall:
    return ToolCall(name=name, arguments=arguments, raw_arguments=raw)


class World:
    """What the episode builder knows of one bundle: its records, its tools, and the engine; and,
    for a bundle with the user's own tools in its block, those tools' schemas."""

    def __init__(self, bundle: TaskBundle, own: ToolSet | None = None) -> None:
        self.bundle = bundle
        self.user: dict[str, dict[str, Any]] = (
            {} if own is None else {t.name: t.parameters for t in own.tools}
        )
        self.config = bundle.engine
        self.stage_tools: dict[tuple[str, int], ToolBinding] = {
            (b.ledger, b.stage): b for b in self.config.bindings if b.kind == "stage"
        }
        self.reads = [
            b for b in self.config.bindings if b.kind == "read" and b.name not in self.user
        ]
        self.block = list(bundle.tool_names)
        self.bound = frozenset(b.name for b in self.config.bindings)
        self.ledgers = sorted({b.ledger for b in self.stage_tools.values()})
        self.goals: list[Key] = [(g.ledger, g.record_id) for g in bundle.goal]
        self.records: list[Key] = [(r.ledger, r.record_id) for r in bundle.initial_state]
        self.others: list[Key] = [k for k in self.records if k not in self.goals]
        self.faulted = sorted({f.tool for f in self.config.faults if f.count > 0})
        self.properties = sorted(
            {
                p
                for t in bundle.tools
                for p in (t["function"].get("parameters") or {}).get("properties", {})
            }
        )

    def replay(self, calls: Sequence[ToolCall]) -> tuple[LedgerState, list[str]]:
        state = initial_state(self.config)
        lines = []
        for c in calls:
            state, line = apply(self.config, state, c.name, c.arguments)
            lines.append(line)
        return state, lines

    def token(self, state: LedgerState, key: Key) -> str:
        for r in state.rows:
            if (r.ledger, r.record_id) == key:
                return r.token
        return "0" * 12

    def stage_name(self, ledger: str, stage: int) -> str:
        """The tool that moves a record of `ledger` to `stage`; a made-up name where none is bound."""
        binding = self.stage_tools.get((ledger, stage))
        if binding is not None:
            return binding.name
        word = LADDER[(stage - 1) % len(LADDER)]
        return f"{word}_{ledger.replace('-', '_')}"

    def stage_call(
        self, state: LedgerState, key: Key, *, ledger: str | None = None, token: str | None = None
    ) -> ToolCall:
        """The next stage call for a record, with the token its last answer gave (or `token`)."""
        stage = state.stage_of(*key)
        target = (stage if stage is not None else 0) + 1
        on = ledger if ledger is not None else key[0]
        binding = self.stage_tools.get((on, target))
        args: dict[str, Any] = {
            "record_id": key[1],
            "token": token if token is not None else self.token(state, key),
        }
        if binding is not None:
            args.update(dict(binding.fixed))
        return _call(self.stage_name(on, target), args)

    def read_call(self, rng: random.Random) -> ToolCall:
        """A read of the block with some query; where the block has no read (distractor r14), a
        well-formed stage call that moves nothing (a wrong token). With the user's tools in the
        block, half the time a well-formed call to one of them."""
        if self.user and rng.random() < 0.5:
            return self.user_call(rng, "valid")
        if not self.reads:
            stage = rng.choice(sorted(self.stage_tools.values(), key=lambda b: b.name))
            args = {"record_id": rng.choice(self.records)[1], "token": "0" * 12}
            return _call(stage.name, {**args, **dict(stage.fixed)})
        read = rng.choice(self.reads)
        query = rng.choice(
            ["", "a", "entry code", hashlib.sha256(str(rng.random()).encode()).hexdigest()]
        )
        return _call(read.name, {"query": query})

    def user_call(self, rng: random.Random, how: str) -> ToolCall:
        """A call to one of the user's tools: `valid` (every required property, some optional ones,
        each of its declared type), or with a required property `missing`, an `extra` name, a
        value of the wrong `type`, a value outside its `enum`, or arguments that did not parse."""
        name = rng.choice(sorted(self.user))
        schema = self.user[name]
        props: dict[str, Any] = schema.get("properties") or {}
        required = list(schema.get("required") or ())
        args = {k: _value(props.get(k, {})) for k in required}
        args.update({k: _value(props[k]) for k in sorted(props) if rng.random() < 0.4})
        if how == "missing" and required:
            args.pop(rng.choice(required), None)
        elif how == "extra":
            args["not_declared"] = "x"
        elif how == "type" and args:
            k = rng.choice(sorted(args))
            args[k] = 7 if isinstance(args[k], str) else "seven"
        elif how == "enum":
            for k in sorted(props):
                if "enum" in props[k]:
                    args[k] = "not-in-the-enum"
                    break
        elif how == "none":
            return _call(name, None, "{")
        return _call(name, args)


_TYPED: dict[str, Any] = {
    "string": "x",
    "integer": 3,
    "number": 2.5,
    "boolean": True,
    "array": [],
    "object": {},
    "null": None,
}


def _value(schema: Mapping[str, Any]) -> Any:
    """A value of the type a property's schema declares (its const or first enum value if any)."""
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type", "string")
    return _TYPED.get(kind[0] if isinstance(kind, list) else kind, "x")


# --------------------------------------------------------------------------- bases


def _reference(w: World, rng: random.Random) -> Calls:
    return list(w.bundle.reference_calls)


def _prefix(w: World, rng: random.Random) -> Calls:
    ref = list(w.bundle.reference_calls)
    return ref[: rng.randrange(len(ref))] if ref else []


def _empty(w: World, rng: random.Random) -> Calls:
    return []


def _walk(w: World, rng: random.Random) -> Calls:
    """A random walk: valid next calls on any record, reads, stale tokens, repeats."""
    calls: Calls = []
    state = initial_state(w.config)
    for _ in range(rng.randrange(1, 14)):
        roll = rng.random()
        if roll < 0.55:
            key = (
                rng.choice(w.goals) if rng.random() < 0.7 or not w.others else rng.choice(w.others)
            )
            call = w.stage_call(state, key)
        elif roll < 0.7:
            call = w.read_call(rng)
        elif roll < 0.85 and calls:
            call = rng.choice(calls)
        else:
            key = rng.choice(w.records)
            call = w.stage_call(state, key, token=rng.choice(["0" * 12, "deadbeef", key[1]]))
        if call.name not in w.bound and rng.random() < 0.9:
            call = w.read_call(rng)  # past the block's stage tools: mostly a read instead
        state, _ = apply(w.config, state, call.name, call.arguments)
        calls.append(call)
    return calls


def _goal_walk(w: World, rng: random.Random) -> Calls:
    """Every goal record carried to a random stage (short, at or past its goal), interleaved."""
    state = initial_state(w.config)
    want = {
        k: max(0, g.stage + rng.choice([-2, -1, 0, 0, 0, 1, 2]))
        for k, g in zip(w.goals, w.bundle.goal, strict=True)
    }
    calls: Calls = []
    while True:
        left = [k for k in w.goals if (state.stage_of(*k) or 0) < min(want[k], 8)]
        if not left:
            return calls
        key = rng.choice(left)
        call = w.stage_call(state, key)
        if call.name not in w.bound and rng.random() < 0.9:
            want[key] = 0  # the block has no tool for that stage: this record stops here
            continue
        state, line = apply(w.config, state, call.name, call.arguments)
        calls.append(call)
        if line_status(line) not in ("ok", "unavailable"):
            want[key] = 0  # that tool is not in the block: this record stops here


BASES: dict[str, Callable[[World, random.Random], Calls]] = {
    "reference": _reference,
    "prefix": _prefix,
    "empty": _empty,
    "walk": _walk,
    "goal_walk": _goal_walk,
}

# --------------------------------------------------------------------------- operations


def _at(rng: random.Random, calls: Calls) -> int:
    return rng.randrange(len(calls) + 1)


def _repeat(w: World, rng: random.Random, calls: Calls) -> Calls:
    if not calls:
        return calls
    i = rng.randrange(len(calls))
    j = rng.randrange(i, len(calls)) + 1
    return [*calls[:j], calls[i], *calls[j:]]


def _drop(w: World, rng: random.Random, calls: Calls) -> Calls:
    if not calls:
        return calls
    i = rng.randrange(len(calls))
    return calls[:i] + calls[i + 1 :]


def _swap(w: World, rng: random.Random, calls: Calls) -> Calls:
    if len(calls) < 2:
        return calls
    i, j = rng.sample(range(len(calls)), 2)
    out = list(calls)
    out[i], out[j] = out[j], out[i]
    return out


def _carry(w: World, rng: random.Random, calls: Calls, keys: list[Key], at_end: bool) -> Calls:
    """One to three further stage calls for a record, made where they land with the engine's token.

    Past the block's last stage tool the call names a tool the block lacks; that is drawn rarely,
    since a malformed call decides the episode before the ledger does.
    """
    if not keys:
        return calls
    key = rng.choice(keys)
    i = len(calls) if at_end else _at(rng, calls)
    state, _ = w.replay(calls[:i])
    added: Calls = []
    for _ in range(rng.choice([1, 1, 2, 3])):
        call = w.stage_call(state, key)
        if call.name not in w.bound and rng.random() < 0.85:
            break
        state, _ = apply(w.config, state, call.name, call.arguments)
        added.append(call)
    return [*calls[:i], *added, *calls[i:]]


def _carry_goal(w: World, rng: random.Random, calls: Calls) -> Calls:
    return _carry(w, rng, calls, w.goals, at_end=rng.random() < 0.8)


def _carry_other(w: World, rng: random.Random, calls: Calls) -> Calls:
    return _carry(w, rng, calls, w.others, at_end=rng.random() < 0.5)


def _over_and_short(w: World, rng: random.Random, calls: Calls) -> Calls:
    """One goal record's last stage call dropped, another goal record carried past its goal."""
    if len(w.goals) < 2:
        return _carry_goal(w, rng, calls)
    short, over = rng.sample(w.goals, 2)
    mine = [
        i for i, c in enumerate(calls) if c.arguments and c.arguments.get("record_id") == short[1]
    ]
    if mine:
        calls = calls[: mine[-1]] + calls[mine[-1] + 1 :]
    return _carry(w, rng, calls, [over], at_end=True)


def _lookalike(w: World, rng: random.Random, calls: Calls) -> Calls:
    """A goal record's next stage called on another ledger's tool (a lookalike ledger on the
    similarity knob, another class's tool on the distractor knob), with the right token."""
    key = rng.choice(w.goals)
    i = _at(rng, calls)
    state, _ = w.replay(calls[:i])
    target = (state.stage_of(*key) or 0) + 1
    others = [
        ledger for ledger in w.ledgers if ledger != key[0] and (ledger, target) in w.stage_tools
    ]
    if not others:
        if rng.random() < 0.8:
            return calls
        others = [c for c in CLASSES if c != key[0]]
    call = w.stage_call(state, key, ledger=rng.choice(others))
    return [*calls[:i], call, *calls[i:]]


def _bad_token(w: World, rng: random.Random, calls: Calls) -> Calls:
    key = rng.choice(w.records)
    i = _at(rng, calls)
    state, _ = w.replay(calls[:i])
    wrong = rng.choice(
        [w.token(state, other) for other in w.records if other != key] + ["f" * 32, "", key[1]]
    )
    call = w.stage_call(state, key, token=wrong)
    if call.name not in w.bound and rng.random() < 0.9:
        return calls
    return [*calls[:i], call, *calls[i:]]


def _fault(w: World, rng: random.Random, calls: Calls) -> Calls:
    """Fault retries: a retry removed, one added, or a faulted tool called early with any arguments."""
    roll = rng.random()
    _, lines = w.replay(calls)
    failed = [i for i, line in enumerate(lines) if line_status(line) == "unavailable"]
    if roll < 0.35 and failed:
        i = rng.choice(failed)
        return calls[: i + 1] + calls[i + 2 :]  # the retry after an unavailable answer
    if roll < 0.6 and failed:
        i = rng.choice(failed)
        return [*calls[: i + 1], calls[i], *calls[i + 1 :]]
    if not w.faulted and rng.random() < 0.8:
        return calls
    name = rng.choice(w.faulted) if w.faulted else rng.choice(w.block)
    i = _at(rng, calls)
    state, _ = w.replay(calls[:i])
    args = rng.choice(
        [
            None,  # unparsed: malformed, and the fault still answers first
            {"record_id": w.goals[0][1], "token": "0" * 12},  # a wrong token
            {"record_id": w.goals[0][1], "token": w.token(state, w.goals[0])},
            {"record_id": w.goals[0][1], "token": w.token(state, w.goals[0])},
        ]
    )
    binding = w.config.binding(name)
    if args is not None and binding is not None:
        args.update(dict(binding.fixed))
    return [*calls[:i], _call(name, args, "{" if args is None else None), *calls[i:]]


def _reads(w: World, rng: random.Random, calls: Calls) -> Calls:
    out = list(calls)
    for _ in range(rng.randrange(1, 4)):
        out.insert(_at(rng, out), w.read_call(rng))
    return out


# How _mutate_arguments changes a call's arguments ("type" drawn twice as often).
_ARGUMENT_CHANGES = (
    *("drop", "extra", "foreign", "type", "type", "value"),
    *("empty", "none", "rename", "case", "all_typed"),
)


def _mutate_arguments(w: World, rng: random.Random, calls: Calls) -> Calls:
    """Missing, extra, renamed, wrongly typed, wrongly valued or unparsed arguments on one call."""
    if not calls:
        calls = [w.read_call(rng)]
    i = rng.randrange(len(calls))
    call = calls[i]
    args = dict(call.arguments or {})
    how = rng.choice(_ARGUMENT_CHANGES)
    raw: str | None = None
    new: dict[str, Any] | None = args
    if how == "drop" and args:
        args.pop(rng.choice(sorted(args)))
    elif how == "extra":
        args[rng.choice(["note", "reason", "stage", "entry_code", "id"])] = "x"
    elif how == "foreign":
        choices = [p for p in w.properties if p not in args] or ["query"]
        args[rng.choice(choices)] = "y"
    elif how in ("type", "all_typed") and args:
        keys = sorted(args) if how == "all_typed" else [rng.choice(sorted(args))]
        for k in keys:
            args[k] = rng.choice([0, 17, 1.5, True, None, [], ["a"], {}, {"v": args[k]}])
    elif how == "value" and args:
        k = rng.choice(sorted(args))  # a stated value changed: the engine's answer, not a format
        args[k] = rng.choice(["", "0", str(args[k])[::-1], str(args[k]).upper(), "CO-0000"])
    elif how == "empty":
        new = {}
    elif how == "none":
        new, raw = None, rng.choice(['{"record_id": ', "not json", "", "{'a': 1}", "[1, 2]"])
    elif how == "rename" and args:
        k = rng.choice(sorted(args))
        args[k + "_"] = args.pop(k)
    elif how == "case" and args:
        k = rng.choice(sorted(args))
        args[k.upper()] = args.pop(k)
    out = list(calls)
    out[i] = _call(call.name, new, raw)
    return out


def _mutate_name(w: World, rng: random.Random, calls: Calls) -> Calls:
    """A call to a name outside the block: made up, another class's stage tool, a near miss."""
    i = _at(rng, calls) if not calls or rng.random() < 0.5 else rng.randrange(len(calls))
    base = calls[i] if i < len(calls) else w.read_call(rng)
    ledger = rng.choice(CLASSES)
    name = rng.choice(
        [
            "",
            "no_such_tool",
            f"{rng.choice(LADDER)}_{ledger}",
            f"{rng.choice(READ_VERBS)}_{rng.choice(READ_NOUNS)}",
            base.name.upper(),
            base.name + " ",
            base.name + "_2",
            f"functions.{base.name}",
        ]
    )
    new = _call(name, base.arguments, base.raw_arguments)
    if i < len(calls):
        return [*calls[:i], new, *calls[i + 1 :]]
    return [*calls[:i], new, *calls[i:]]


OPERATIONS: dict[str, Callable[[World, random.Random, Calls], Calls]] = {
    "repeat": _repeat,
    "drop": _drop,
    "swap": _swap,
    "carry_goal": _carry_goal,
    "carry_other": _carry_other,
    "over_and_short": _over_and_short,
    "lookalike": _lookalike,
    "bad_token": _bad_token,
    "fault": _fault,
    "reads": _reads,
    "arguments": _mutate_arguments,
    "name": _mutate_name,
}
# How often each operation is drawn: malformed calls end every order question at malformed_call, so
# the operations that make one are drawn less often than those that move the ledger.
_WEIGHTS: dict[str, int] = {
    "repeat": 6,
    "drop": 6,
    "swap": 5,
    "carry_goal": 9,
    "carry_other": 7,
    "over_and_short": 5,
    "lookalike": 4,
    "bad_token": 4,
    "fault": 4,
    "reads": 5,
    "arguments": 3,
    "name": 2,
}
_OPS = list(_WEIGHTS)
_OP_WEIGHTS = [_WEIGHTS[k] for k in _OPS]


def _own_tool(w: World, rng: random.Random, calls: Calls) -> Calls:
    """A call to one of the user's tools, well formed or not, anywhere in the episode."""
    how = rng.choice(["valid", "valid", "missing", "extra", "type", "enum", "none"])
    out = list(calls)
    out.insert(_at(rng, out), w.user_call(rng, how))
    return out


# A bundle with the user's tools in its block draws this operation too.
_OWN_OPS = [*_OPS, "own_tool"]
_OWN_OP_WEIGHTS = [*_OP_WEIGHTS, 8]
OPERATIONS["own_tool"] = _own_tool

# --------------------------------------------------------------------------- turns, flags, fmt


def _turns(rng: random.Random, calls: Calls) -> tuple[str, tuple[tuple[ToolCall, ...], ...]]:
    roll = rng.random()
    if roll < 0.5 or not calls:
        return "single", tuple((c,) for c in calls)
    if roll < 0.9:
        out: list[tuple[ToolCall, ...]] = []
        i = 0
        while i < len(calls):
            n = rng.randrange(1, 4)
            out.append(tuple(calls[i : i + n]))
            i += n
        return "grouped", tuple(out)
    if roll < 0.95:
        return "one_turn", (tuple(calls),)
    k = rng.randrange(len(calls) + 1)
    return "empty_turn", (*((c,) for c in calls[:k]), (), *((c,) for c in calls[k:]))


_FLAGS: tuple[tuple[str, bool, bool, float], ...] = (
    ("reply", True, False, 0.72),
    ("limit", False, True, 0.18),
    ("neither", False, False, 0.05),
    ("both", True, True, 0.05),
)


def _flags(rng: random.Random) -> tuple[str, bool, bool]:
    roll = rng.random()
    for name, reply, limit, p in _FLAGS:
        if roll < p:
            return name, reply, limit
        roll -= p
    return "reply", True, False


def _fmt(rng: random.Random) -> tuple[str, FormatReport | None]:
    roll = rng.random()
    if roll < 0.4:
        return "fmt_none", None
    if roll < 0.7:
        return "fmt_default", FormatReport()
    if roll < 0.76:
        return "fmt_text_call", FormatReport(unparsed_calls=rng.randrange(1, 4))
    if roll < 0.92:
        return "fmt_text_call_uncounted", FormatReport(
            unparsed_calls=rng.randrange(1, 4), clause1_counts=False
        )
    return "fmt_uncounted", FormatReport(unparsed_calls=0, clause1_counts=False)


# --------------------------------------------------------------------------- cases


def _rng(bundle: TaskBundle, index: int) -> random.Random:
    seed = hashlib.sha256(f"verdict-episodes|{bundle.task_id}|{index}".encode()).digest()
    return random.Random(int.from_bytes(seed[:8], "big"))


def case(world: World, index: int) -> Case:
    """Episode number `index` of a bundle: a base, zero to three operations, turns, flags, fmt."""
    rng = _rng(world.bundle, index)
    controls = sorted(world.bundle.negative_controls)
    if rng.random() < 0.12 and controls:
        key = rng.choice(controls)
        control = world.bundle.negative_controls[key]
        calls = [c for t in control.turns for c in t]
        kinds = [f"control:{key}"]
        reply, limit = control.ended_with_reply, control.turn_limit_hit
        if rng.random() < 0.5:
            return Case(kinds[0], tuple(tuple(t) for t in control.turns), reply, limit, None)
    else:
        base = rng.choice(list(BASES))
        calls = BASES[base](world, rng)
        kinds = [base]
        flag_kind, reply, limit = _flags(rng)
        kinds.append(flag_kind)
    for _ in range(rng.choice([0, 1, 1, 2, 2, 3])):
        op = (
            rng.choices(_OWN_OPS, _OWN_OP_WEIGHTS)[0]
            if world.user
            else rng.choices(_OPS, _OP_WEIGHTS)[0]
        )
        calls = OPERATIONS[op](world, rng, calls)
        kinds.append(op)
    turn_kind, turns = _turns(rng, calls)
    fmt_kind, fmt = _fmt(rng)
    return Case("+".join([*kinds, turn_kind, fmt_kind]), turns, reply, limit, fmt)
