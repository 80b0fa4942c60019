"""Rows no bundle can carry, read off a run or its trace: N10, N13 (never measured here)."""

from __future__ import annotations

from poisson_tasks.pins.row import PinRow

_NO_SERVER = "no server and no trace exist at generation time: the serving pin is read off the run"
_NO_TRACE = "first-request input tokens are counted by the model's own tokenizer in a run's trace"

ROWS: tuple[PinRow, ...] = (
    PinRow(
        id="N10",
        name="serving",
        who=("at run time",),
        mode="refused",
        holds="the serving pin: model, revision, vLLM version, sampling",
        unmeasured_reason=_NO_SERVER,
    ),
    PinRow(
        id="N13",
        name="first-request tokens",
        who=("at analysis",),
        mode="reported",
        holds="realised first-request input tokens, per model",
        unmeasured_reason=_NO_TRACE,
    ),
)
