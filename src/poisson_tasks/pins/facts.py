"""BundleFacts: one bundle and the facts several pin rows' measures share, each computed once."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from poisson_tasks.bundle import TaskBundle
from poisson_tasks.domain.ledger import ToolBinding
from poisson_tasks.pins import views


@dataclass(frozen=True)
class BundleFacts:
    """A bundle and the facts several rows' measures share, each computed once."""

    bundle: TaskBundle

    @cached_property
    def instruction(self) -> str:
        return views.instruction(self.bundle)

    @cached_property
    def tool_texts(self) -> list[str]:
        return views.tool_texts(self.bundle)

    @cached_property
    def block_tokens(self) -> int:
        return views.block_tokens(self.bundle, self.tool_texts)

    @cached_property
    def request_tokens(self) -> int:
        return views.tokens(self.instruction)

    @cached_property
    def seeded_tokens(self) -> int:
        return views.seeded_tokens(self.bundle)

    @cached_property
    def right(self) -> list[str]:
        return views.right_tools(self.bundle)

    @cached_property
    def names(self) -> list[str]:
        return self.bundle.tool_names

    @cached_property
    def system_base(self) -> str:
        """The system prompt less the filler at its end, when it carries the declared one."""
        sp, fill = self.bundle.system_prompt, self.bundle.system_filler
        if fill and sp.endswith(" " + fill):
            return sp[: -len(fill) - 1]
        return sp

    @cached_property
    def filler_tokens(self) -> int:
        """Tokens of the system filler counted alone (0 when there is none)."""
        return views.tokens(self.bundle.system_filler) if self.bundle.system_filler else 0

    @cached_property
    def bindings(self) -> dict[str, ToolBinding]:
        return views.bindings(self.bundle)

    def binding(self, name: str) -> ToolBinding | None:
        return self.bindings.get(name)

    @cached_property
    def schemas(self) -> dict[str, dict[str, Any]]:
        return {t["function"]["name"]: t for t in self.bundle.tools}

    def schema(self, name: str) -> dict[str, Any]:
        return self.schemas[name]
