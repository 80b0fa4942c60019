"""A YAML document a user wrote, read strictly into plain JSON values, its sizes bounded as it is read.

What a pre-registration (or a probe registration) holds is stored in a run folder as JSON, hashed
as JSON and sent to a server as JSON, so the reader makes nothing JSON cannot hold: no aliases (no
expansion bombs), no duplicate keys (no silent last-one-wins), and none of YAML's types beyond
JSON's (`!!binary`, `!!set`, `!!omap`, `!!pairs`, `!!timestamp`); an unquoted date such as
`2025-08-07` is read as the string it looks like. Sizes are bounded while the document is
composed, before any value is built: at most `values` nodes in all, at most `items` entries in
any one list or mapping, and a tighter bound on a few named lists (`paths`), so a file of a
hundred thousand tiny items is refused at the first one over its bound rather than parsed whole.
Each refusal is one line naming where, and the line and column in the file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.nodes import MappingNode, ScalarNode, SequenceNode

from poisson_tasks.credentials import could_be_credential

__all__ = ["NOT_JSON_TAGS", "YamlLimits", "YamlRefused", "load_json_yaml"]

_TAG = "tag:yaml.org,2002:"
# YAML's own types that JSON has no value for, each as the document writes its tag.
NOT_JSON_TAGS: Mapping[str, str] = {
    f"{_TAG}binary": "!!binary (bytes)",
    f"{_TAG}set": "!!set",
    f"{_TAG}omap": "!!omap",
    f"{_TAG}pairs": "!!pairs",
    f"{_TAG}timestamp": "!!timestamp (a date or time)",
}


@dataclass(frozen=True)
class YamlLimits:
    """How large a document may be: nodes in all, entries per list or mapping, and per named
    list (a dotted path such as `design.arms`) its own bound with the name of what it lists."""

    values: int
    items: int
    paths: Mapping[str, tuple[int, str]] = field(default_factory=dict)


class YamlRefused(yaml.YAMLError):
    """A document this reader refuses: the problem in words and where in the file."""

    def __init__(self, problem: str, mark: Any) -> None:
        super().__init__(problem)
        self.problem = problem
        self.mark = mark

    def line(self) -> str:
        """The problem with its line and column in the file."""
        if self.mark is None:
            return self.problem
        return f"{self.problem} (line {self.mark.line + 1}, column {self.mark.column + 1})"


def _without_timestamps() -> dict[Any, list[tuple[str, Any]]]:
    """SafeLoader's implicit resolvers less the timestamp one: a date-shaped scalar stays a str."""
    return {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != f"{_TAG}timestamp"]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }


class _JsonLoader(yaml.SafeLoader):
    """yaml.SafeLoader that composes only what JSON can hold, within `limits` (the module doc)."""

    yaml_implicit_resolvers = _without_timestamps()

    def __init__(self, text: str, limits: YamlLimits) -> None:
        super().__init__(text)
        self.limits = limits
        self.nodes = 0
        self.path: list[str] = []  # the keys and [indices] down to the node being composed

    def where(self) -> str:
        out = ""
        for part in self.path:
            out += part if part.startswith("[") or not out else f".{part}"
        return out or "(document)"

    def compose_node(self, parent: Any, index: Any) -> Any:
        event: Any = self.peek_event()  # type: ignore[no-untyped-call]
        if self.check_event(yaml.AliasEvent):
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"an alias (*{event.anchor}) is refused: write the value out in full",
                event.start_mark,
            )
        self.nodes += 1
        if self.nodes > self.limits.values:
            raise YamlRefused(
                f"holds more than {self.limits.values:,} values; a pre-registration is one page "
                f"(at most {self.limits.items:,} in its longest list)",
                event.start_mark,
            )
        part = self._part(parent, index, event)
        if part is not None:
            self.path.append(part)
        node: Any = super().compose_node(parent, index)
        tag = node.tag
        if isinstance(tag, str) and tag in NOT_JSON_TAGS:
            raise YamlRefused(
                f"{self.where()}: a {NOT_JSON_TAGS[tag]} value is not a JSON value; a "
                "pre-registration holds plain JSON values only (strings, numbers, true, false, "
                "null, lists and mappings): write it as a string or a number",
                node.start_mark,
            )
        if part is not None:
            self.path.pop()
        return node

    def _part(self, parent: Any, index: Any, event: Any) -> str | None:
        """The path part of the node about to be composed, its parent's size checked first."""
        if isinstance(parent, SequenceNode):
            limit, what = self.limits.paths.get(self.where(), (self.limits.items, "items"))
            if index >= limit:
                raise YamlRefused(
                    f"{self.where()}: more than {limit:,} {what}; at most {limit:,}",
                    event.start_mark,
                )
            return f"[{index}]"
        if isinstance(parent, MappingNode):
            if index is None:  # a key: the mapping grows by one entry
                if len(parent.value) >= self.limits.items:
                    raise YamlRefused(
                        f"{self.where()}: more than {self.limits.items:,} keys; at most "
                        f"{self.limits.items:,}",
                        event.start_mark,
                    )
                return None
            key = index.value if isinstance(index, ScalarNode) else "?"
            return "(a key not shown)" if could_be_credential(str(key)) else str(key)[:60]
        return None

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:
                raise yaml.constructor.ConstructorError(
                    None, None, "a mapping key must be a plain value", key_node.start_mark
                ) from None
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"duplicate key {str(key)[:40]!r}: each key may appear once",
                    key_node.start_mark,
                )
        return super().construct_mapping(node, deep=deep)


def load_json_yaml(text: str, limits: YamlLimits) -> Any:
    """The document's value, built from JSON's types only. Raises YamlRefused (a size, a type
    beyond JSON's), yaml.YAMLError (not YAML, an alias, a duplicate key), RecursionError (nested
    past Python's stack) or ValueError (an integer of more digits than Python converts)."""
    loader = _JsonLoader(text, limits)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()
