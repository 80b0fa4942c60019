"""The pin ledger's rows, registered once: each module holds the rows for one kind of thing.

scenario (N1, N2, N8, N11, N12), run (N10, N13), prompt (N3, N6, N7), block (N4, N5, N27-N29),
history (N9, N23-N26), lookalike (N19-N22), calls (N30, N31, N33, N35), length (N32, N34).
ROWS is every row in id order; ROW_IDS and BY_ID are derived from it.
"""

from __future__ import annotations

from poisson_tasks.pins.row import PinRow
from poisson_tasks.pins.rows import block, calls, history, length, lookalike, prompt, run, scenario

_MODULES = (scenario, run, prompt, block, history, lookalike, calls, length)


def _registered() -> tuple[PinRow, ...]:
    rows = [row for module in _MODULES for row in module.ROWS]
    ids = [row.id for row in rows]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise ValueError(f"pin rows registered twice: {', '.join(twice)}")
    return tuple(sorted(rows, key=lambda row: int(row.id[1:])))


ROWS: tuple[PinRow, ...] = _registered()
ROW_IDS: tuple[str, ...] = tuple(row.id for row in ROWS)
BY_ID: dict[str, PinRow] = {row.id: row for row in ROWS}
