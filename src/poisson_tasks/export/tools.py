"""The task's tools as a verifiers Toolset: one MCP tool server per rollout (the `verifiers` extra).

`Task.toolsets()` returns a `LedgerTools`; verifiers starts its program once per rollout with
`python -m <the class's module>`. That program is `export.toolserver`, a lean server speaking the
same launch protocol without importing verifiers (see there); the tools themselves are
`engine_tools.register_engine_tools`: the bundle's block, answered by the exact engine.
"""

from __future__ import annotations

from verifiers.v1.mcp import Toolset, ToolsetConfig


class LedgerTools(Toolset[ToolsetConfig]):
    """The bundle's tool block, served bare (no server-name prefix), in the block's order."""

    TOOL_PREFIX = None


# verifiers runs `python -m type(server).__module__`: point it at the lean server.
LedgerTools.__module__ = "poisson_tasks.export.toolserver"
