"""The ledger's static description: rows, tool bindings, planned faults. Data only; the engine acts on it."""

from __future__ import annotations

from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict


class Row(NamedTuple):
    """One ledger row: (ledger, record_id, stage, token). `token` is what the next stage call must carry."""

    ledger: str
    record_id: str
    stage: int
    token: str


class ToolBinding(BaseModel):
    """What one tool name does in the engine: advance a ledger's stage, or answer a catalogue read."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    kind: Literal["stage", "read"]
    ledger: str = ""
    stage: int = 0
    parameters: tuple[str, ...]
    fixed: tuple[tuple[str, str], ...] = ()
    part: str | None = None
    part_status: str = "ok"


class FaultPlan(BaseModel):
    """How many times a tool answers `unavailable` before it works."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tool: str
    count: int


class EngineConfig(BaseModel):
    """Everything the engine needs to replay a task: the hidden key, initial rows, bindings, faults."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str
    rows: tuple[Row, ...]
    bindings: tuple[ToolBinding, ...]
    faults: tuple[FaultPlan, ...] = ()
    start_seq: int = 0

    def binding(self, name: str) -> ToolBinding | None:
        """The binding of a tool name, from a lookup rebuilt whenever `bindings` is another tuple
        (so a model_copy with new bindings never answers from the old ones)."""
        cache = self.__dict__.get("_lookup")
        if cache is None or cache[0] is not self.bindings:
            cache = (self.bindings, {b.name: b for b in self.bindings})
            self.__dict__["_lookup"] = cache
        found: ToolBinding | None = cache[1].get(name)
        return found
