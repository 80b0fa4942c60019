"""A bundle's tool block as MCP tools answered by the exact engine (shared by both tool servers).

Every tool of the block is registered with the block's own name, description and JSON schema, in
the block's order, and each call is answered by `domain.engine.apply` on the session's ledger state
with the engine's 52-byte line: the line the native loop sends. Arguments reach the engine as they
arrive; nothing validates them against the schema first, so a call with a missing, extra or
non-string argument gets the engine's `bad_args` line, as in the native loop.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools.base import Tool

from poisson_tasks.bundle import TaskBundle
from poisson_tasks.domain.engine import LedgerState
from poisson_tasks.domain.ledger import EngineConfig

Apply = Callable[
    [EngineConfig, LedgerState, str, Mapping[str, object] | None], tuple[LedgerState, str]
]


@dataclass(slots=True)
class EngineSession:
    """One rollout's ledger: the bundle, its state, and every call answered so far."""

    bundle: TaskBundle
    state: LedgerState
    apply: Apply
    calls: list[tuple[str, dict[str, Any], str]] = field(default_factory=list)

    def answer(self, name: str, arguments: dict[str, Any]) -> str:
        self.state, line = self.apply(self.bundle.engine, self.state, name, arguments)
        self.calls.append((name, arguments, line))
        return line


class _EngineTool(Tool):
    """A tool whose arguments reach the engine unvalidated (see the module docstring)."""

    async def run(  # type: ignore[override]
        self, arguments: dict[str, Any], context: Any, convert_result: bool = False
    ) -> Any:
        line = self.fn(arguments)
        return self.fn_metadata.convert_result(line) if convert_result else line


def _placeholder() -> str:
    """Stands in for the engine while a tool's metadata is built."""
    return ""


def register_engine_tools(mcp: MCPServer, session: EngineSession) -> None:
    """Register the bundle's whole block on `mcp`, each tool answered by `session`."""
    for spec in session.bundle.tools:
        fn = spec["function"]
        name = fn["name"]
        base = Tool.from_function(
            _placeholder, name=name, description=fn.get("description", ""), structured_output=False
        )
        fields = {k: getattr(base, k) for k in Tool.model_fields}

        def call(arguments: dict[str, Any], name: str = name) -> str:
            return session.answer(name, arguments)

        fields.update(fn=call, parameters=fn["parameters"])
        # mcp 2.0.0 has no public call that registers a raw JSON schema; its manager's dict is it.
        mcp._tool_manager._tools[name] = _EngineTool(**fields)
