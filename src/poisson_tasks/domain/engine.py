"""The mock ledger's engine: apply one call to a ledger state, return the new state and a 52-byte line.

Pure and total: any name and any arguments give a state and a line; a wrong call changes nothing and
no call is half-applied.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import NamedTuple

from poisson_tasks.domain.ledger import EngineConfig, Row, ToolBinding

LINE_BYTES = 52
STATUS_WIDTH = 12
PAYLOAD_HEX = 32
ZERO_PAYLOAD = "0" * PAYLOAD_HEX

# The closed status vocabulary of the engine's answers.
STATUSES: tuple[str, ...] = (
    "ok",
    "unknown_tool",
    "no_record",
    "bad_token",
    "not_ready",
    "already_done",
    "bad_args",
    "unavailable",
    "part",
)


def chain_token(key: str, ledger: str, record_id: str, stage: int) -> str:
    """The token a stage call returns: a keyed hash of (ledger, record, stage)."""
    msg = f"chain|{key}|{ledger}|{record_id}|{stage}".encode()
    return hashlib.sha256(msg).hexdigest()[:PAYLOAD_HEX]


def read_payload(key: str, tool: str, query: str) -> str:
    """A read tool's deterministic catalogue answer for a query."""
    return hashlib.sha256(f"read|{key}|{tool}|{query}".encode()).hexdigest()[:PAYLOAD_HEX]


def format_line(seq: int, status: str, payload: str) -> str:
    """The fixed-width answer `SSSSSS status______ payload32hex` (52 bytes)."""
    line = f"{seq % 1_000_000:06d} {status:<{STATUS_WIDTH}} {payload}"
    assert len(line) == LINE_BYTES, line
    return line


_STATUS_START = 7  # after the six-digit sequence number and one space


def line_status(line: str) -> str:
    """The status word of an answer line (`ok`, `unavailable`, `part_1_of_2`, ...)."""
    return line[_STATUS_START : _STATUS_START + STATUS_WIDTH].strip()


class LedgerState(NamedTuple):
    """The ledger's rows (sorted), the planned faults still to answer, and the call counter."""

    rows: tuple[Row, ...]
    faults: tuple[tuple[str, int], ...] = ()
    seq: int = 0

    def stage_of(self, ledger: str, record_id: str) -> int | None:
        for r in self.rows:
            if r.ledger == ledger and r.record_id == record_id:
                return r.stage
        return None


def initial_state(config: EngineConfig) -> LedgerState:
    """The ledger before any call, as the bundle's config declares it."""
    return LedgerState(
        tuple(sorted(config.rows)),
        tuple(sorted((f.tool, f.count) for f in config.faults if f.count > 0)),
        config.start_seq,
    )


def _check_args(binding: ToolBinding, arguments: Mapping[str, object]) -> bool:
    allowed = binding.parameters
    if set(arguments) != set(allowed):
        return False
    return all(isinstance(v, str) for v in arguments.values())


def apply(
    config: EngineConfig, state: LedgerState, name: str, arguments: Mapping[str, object] | None
) -> tuple[LedgerState, str]:
    """Apply one tool call; return the next state and the engine's 52-byte line."""
    seq = state.seq + 1
    binding = config.binding(name)
    if binding is None:
        return LedgerState(state.rows, state.faults, seq), format_line(
            seq, "unknown_tool", ZERO_PAYLOAD
        )
    faults = dict(state.faults)
    if faults.get(name, 0) > 0:
        faults[name] -= 1
        left = tuple(sorted((t, c) for t, c in faults.items() if c > 0))
        return LedgerState(state.rows, left, seq), format_line(seq, "unavailable", ZERO_PAYLOAD)
    if arguments is None or not _check_args(binding, arguments):
        return LedgerState(state.rows, state.faults, seq), format_line(
            seq, "bad_args", ZERO_PAYLOAD
        )
    if binding.kind == "read":
        if binding.part is not None:
            status, payload = binding.part_status, binding.part.ljust(PAYLOAD_HEX, "0")
        else:
            status, payload = "ok", read_payload(config.key, name, str(arguments.get("query", "")))
        return LedgerState(state.rows, state.faults, seq), format_line(seq, status, payload)
    for field_name, value in binding.fixed:
        if arguments.get(field_name) != value:
            return LedgerState(state.rows, state.faults, seq), format_line(
                seq, "bad_args", ZERO_PAYLOAD
            )
    record_id = arguments.get("record_id")
    token = arguments.get("token")
    rows = list(state.rows)
    i = next(
        (j for j, r in enumerate(rows) if r.ledger == binding.ledger and r.record_id == record_id),
        -1,
    )
    if i < 0:
        return LedgerState(state.rows, state.faults, seq), format_line(
            seq, "no_record", ZERO_PAYLOAD
        )
    row = rows[i]
    target = binding.stage
    if row.stage >= target:
        return LedgerState(state.rows, state.faults, seq), format_line(
            seq, "already_done", ZERO_PAYLOAD
        )
    if row.stage < target - 1:
        return LedgerState(state.rows, state.faults, seq), format_line(
            seq, "not_ready", ZERO_PAYLOAD
        )
    if token != row.token:
        return LedgerState(state.rows, state.faults, seq), format_line(
            seq, "bad_token", ZERO_PAYLOAD
        )
    new_token = chain_token(config.key, row.ledger, row.record_id, target)
    rows[i] = Row(ledger=row.ledger, record_id=row.record_id, stage=target, token=new_token)
    return LedgerState(tuple(rows), state.faults, seq), format_line(seq, "ok", new_token)
