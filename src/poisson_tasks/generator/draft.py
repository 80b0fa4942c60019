"""The draft a knob module returns, and the helpers knobs share: climbs, base rows, history."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, NamedTuple

from poisson_tasks.bundle import Goal, ToolCall, canonical_json
from poisson_tasks.domain.engine import chain_token, format_line, read_payload
from poisson_tasks.domain.ledger import FaultPlan, Row, ToolBinding
from poisson_tasks.domain.vocabulary import LADDER
from poisson_tasks.errors import GeneratorFault
from poisson_tasks.generator.prompts import CLIMB
from poisson_tasks.generator.scenario import Scenario
from poisson_tasks.generator.tools import read_tool
from poisson_tasks.tokens import count_tokens
from poisson_tasks.transcript import BAND, exchange, history_tokens


@dataclass
class Draft:
    """Everything that differs between knobs, before assembly turns it into a TaskBundle."""

    bindings: list[ToolBinding]
    rows: list[Row]
    goals: list[Goal]
    reference: list[ToolCall]
    template: str
    slots: dict[str, str]
    knob_slots: list[str]
    bystander: ToolCall
    history: list[dict[str, Any]] = field(default_factory=list)
    system_filler: str = ""
    faults: list[FaultPlan] = field(default_factory=list)


def base_rows(sc: Scenario, ledger: str | None = None) -> list[Row]:
    """The goal record and its bystander, both at stage 0, holding their entry codes."""
    led = ledger or sc.cls
    return [
        Row(led, sc.record_id, 0, sc.entry_code),
        Row(led, sc.sibling_id, 0, sc.sibling_code),
    ]


def token_for(sc: Scenario, ledger: str, record_id: str, code: str, stage: int) -> str:
    """The token a call advancing to `stage` must carry: the entry code, then the chain."""
    return code if stage == 1 else chain_token(sc.key, ledger, record_id, stage - 1)


def climb(
    sc: Scenario,
    tools: dict[int, ToolBinding],
    record_id: str,
    code: str,
    start: int,
    goal: int,
    extra: dict[str, str] | None = None,
) -> list[ToolCall]:
    """The calls that move one record from `start` to `goal`, one stage at a time."""
    calls = []
    for s in range(start + 1, goal + 1):
        b = tools[s]
        args = {"record_id": record_id, "token": token_for(sc, b.ledger, record_id, code, s)}
        if extra:
            args.update(extra)
        calls.append(ToolCall(name=b.name, arguments=args))
    return calls


# --- shared by the seven newer knobs (similarity ... spread) -------------------------------------

BASE_GOAL = 2  # the newer knobs' base task: two chained stage calls, stage 0 -> 2


def climb_slots(sc: Scenario, extra: str = "", goal: int = BASE_GOAL) -> dict[str, str]:
    """The CLIMB template's slots for the base task; `extra` is the knob's sentence, if any."""
    return {
        "ledger": sc.cls,
        "record_id": sc.record_id,
        "goal": f"{goal} ({LADDER[goal - 1]})",
        "entry_code": sc.entry_code,
        "extra": extra,
        "sibling_id": sc.sibling_id,
        "sibling_code": sc.sibling_code,
    }


def lay_out(sc: Scenario, first: list[ToolBinding], rest: list[ToolBinding]) -> list[ToolBinding]:
    """A sixteen-tool block: `first` at the scenario's first layout slots, `rest` in the others."""
    block: list[ToolBinding | None] = [None] * len(sc.layout)
    for slot, b in zip(sc.layout, [*first, *rest], strict=True):
        block[slot] = b
    return [b for b in block if b is not None]


def base_block(
    sc: Scenario, right: dict[int, ToolBinding], reads: list[ToolBinding] | None = None
) -> list[ToolBinding]:
    """The base task's block: the two right stage tools, then fourteen reads (sc.reads[:14])."""
    fill = reads if reads is not None else [read_tool(n) for n in sc.reads[:14]]
    return lay_out(sc, [right[1], right[2]], fill)


def stage_call(
    tool: ToolBinding, record_id: str, token: str, extra: dict[str, str] | None = None
) -> ToolCall:
    """A stage call on `tool` for one record; `extra` adds the arguments knob's stated values."""
    args = {"record_id": record_id, "token": token, **(extra or {})}
    return ToolCall(name=tool.name, arguments=args)


def base_task(
    sc: Scenario,
    bindings: list[ToolBinding],
    right: dict[int, ToolBinding],
    stated: dict[str, str] | None = None,
) -> Draft:
    """The newer knobs' base task: climb 0 -> 2 with the right tools, CLIMB's slots, the bystander.

    Each knob replaces (dataclasses.replace) only the fields it varies; `stated` adds the
    arguments knob's values to every stage call.
    """
    return Draft(
        bindings=bindings,
        rows=base_rows(sc),
        goals=[Goal(ledger=sc.cls, record_id=sc.record_id, stage=BASE_GOAL)],
        reference=climb(sc, right, sc.record_id, sc.entry_code, 0, BASE_GOAL, extra=stated),
        template=CLIMB,
        slots=climb_slots(sc),
        knob_slots=[],
        bystander=stage_call(right[1], sc.sibling_id, sc.sibling_code, stated),
    )


def _padded_query(sc: Scenario, i: int, length: int) -> str:
    """A query of `length` hex digits: the scenario's queries from the i-th on, joined and cut."""
    n = len(sc.queries)
    need = length // len(sc.queries[0]) + 1
    return "".join(sc.queries[(i + j) % n] for j in range(need))[:length]


def _read_exchange(
    sc: Scenario, reads: list[str], i: int, query: str, seq: int
) -> list[dict[str, Any]]:
    name = reads[i % len(reads)]
    line = format_line(seq, "ok", read_payload(sc.key, name, query))
    return exchange(f"call_seed_{i + 1}", name, {"query": query}, line)


def padded_history(
    sc: Scenario, reads: list[str], target: int, first_seq: int = 1
) -> list[dict[str, Any]]:
    """Earlier read calls, each answered ok, whose history_tokens are `target` within BAND.

    Whole pairs with the scenario's queries while another pair still fits; then one last pair
    whose query (hex digits: a length and a starting query) is searched so the total lands in
    the band, exactly where it can. Raises ValueError when no history is that short
    (0 < target < the smallest call/answer pair, 78 to 88 tokens).
    """
    whole, last = _history_plan(sc, tuple(reads), target, first_seq)
    out: list[dict[str, Any]] = []
    for i in range(whole):
        out += _read_exchange(sc, reads, i, sc.queries[i % len(sc.queries)], first_seq + i)
    if last is not None:
        query = _padded_query(sc, whole + last[1], last[0])
        out += _read_exchange(sc, reads, whole, query, first_seq + whole)
    return out


_OFFSETS = 8  # starting queries tried for the last pair at each query length
_WINDOW = 12  # query lengths tried either side of where the last pair's tokens cross the need


@lru_cache(maxsize=4096)
def _history_plan(
    sc: Scenario, reads: tuple[str, ...], target: int, first_seq: int
) -> tuple[int, tuple[int, int] | None]:
    """(whole pairs, the last pair's (query length, offset) or None): the search, once per input."""
    if target <= 0:
        return 0, None
    names = list(reads)
    total = 0
    i = 0
    while True:
        pair = _read_exchange(sc, names, i, sc.queries[i % len(sc.queries)], first_seq + i)
        size = history_tokens(pair)
        smallest_next = history_tokens(_read_exchange(sc, names, i + 1, "", first_seq + i + 1))
        if total + size + smallest_next <= target + BAND:
            total += size
            i += 1
            continue
        return i, _last_query(sc, names, i, first_seq + i, target - total, target)


class _PairPieces(NamedTuple):
    """One seeded read call and its ok answer, as history_tokens counts them, cut where a query
    changes them: the call's message is ask_head + query + ask_tail, the answer's message is
    answer_head + " " + payload + answer_tail; `fixed` is the four pieces' tokens."""

    ask_head: str
    ask_tail: str
    answer_head: str
    answer_tail: str
    fixed: int


_QUERY_OPEN = '\\"query\\": \\"'  # the query's opening quote inside the call's arguments


def _pair_pieces(sc: Scenario, names: list[str], i: int, seq: int) -> _PairPieces:
    ask, answer = (canonical_json(m).decode() for m in _read_exchange(sc, names, i, "", seq))
    cut = ask.index(_QUERY_OPEN) + len(_QUERY_OPEN)
    payload = read_payload(sc.key, names[i % len(names)], "")
    at = answer.index(payload)
    if ask.count(_QUERY_OPEN) != 1 or answer.count(payload) != 1 or answer[at - 1] != " ":
        raise GeneratorFault(
            f"seeded read call {i + 1}: its messages cannot be cut around the query"
        )
    pieces = (ask[:cut], ask[cut:], answer[: at - 1], answer[at + len(payload) :])
    return _PairPieces(*pieces, fixed=sum(count_tokens(piece) for piece in pieces))


def _pair_tokens(
    sc: Scenario, names: list[str], i: int, query: str, seq: int, pieces: _PairPieces
) -> int:
    """history_tokens(_read_exchange(sc, names, i, query, seq)) for a non-empty query, counted as
    the pieces' tokens plus the query's and the answer payload's (with its leading space).

    Exact because every cut falls between two of the tokenizer's pre-tokens (its merges never
    cross one): the query and payload are hex digits between punctuation and a run of spaces.
    tests/test_tokens.py checks it against the whole messages' count at every query the full pin
    sweep (45 arms x 60 seeds) tries.
    """
    payload = read_payload(sc.key, names[i % len(names)], query)
    return pieces.fixed + count_tokens(query) + count_tokens(" " + payload)


def _last_query(
    sc: Scenario, names: list[str], i: int, seq: int, need: int, target: int
) -> tuple[int, int]:
    """The (length, offset) of the last query whose pair is `need` tokens (else the closest)."""
    pieces = _pair_pieces(sc, names, i, seq)

    def tokens_at(length: int, offset: int = 0) -> int:
        q = _padded_query(sc, i + offset, length)
        if not q:  # the quotes around an empty query meet in one pre-token: count it whole
            return history_tokens(_read_exchange(sc, names, i, q, seq))
        return _pair_tokens(sc, names, i, q, seq, pieces)

    lo, hi = 0, 64
    while tokens_at(hi) < need:
        hi *= 2
    while lo < hi:  # where the pair's tokens first reach the need (roughly: they are not monotone)
        mid = (lo + hi) // 2
        if tokens_at(mid) >= need:
            hi = mid
        else:
            lo = mid + 1
    best: tuple[int, int, int] | None = None  # (miss, length, offset)
    for length in [0, *range(max(1, lo - _WINDOW), lo + _WINDOW + 1)]:
        for offset in range(_OFFSETS if length else 1):
            miss = abs(tokens_at(length, offset) - need)
            if best is None or miss < best[0]:
                best = (miss, length, offset)
            if miss == 0:
                return length, offset
    assert best is not None
    if best[0] > BAND:
        raise ValueError(
            f"no seeded history of {target} tokens: the smallest read call and answer here is "
            f"{tokens_at(0)} tokens"
        )
    return best[1], best[2]


def check_band(what: str, actual: int, target: int) -> None:
    """Refuse a length match outside BAND: the generator's own fault, never the user's input."""
    if abs(actual - target) > BAND:
        raise GeneratorFault(f"{what}: {actual} tokens where {target} ± {BAND} were needed")
