"""The TaskBundle and the small records it carries: tool calls, episodes, goals, prompt parts."""

from __future__ import annotations

import hashlib
from typing import Any, Literal, TypeVar

import orjson
from pydantic import BaseModel, ConfigDict, Field

from poisson_tasks.domain.ledger import EngineConfig, Row


def canonical_json(obj: Any) -> bytes:
    """The one byte form every digest is taken over: sorted keys, no spaces, UTF-8, no floats.

    orjson gives the same bytes as json.dumps(sort_keys=True, separators=(",", ":"),
    ensure_ascii=False) for this data (tests hold it), about ten times faster.
    """
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)


def _plain(obj: Any) -> Any:
    """orjson's fallback: rows (named tuples) as lists, models as their declared fields."""
    if isinstance(obj, tuple):
        return list(obj)
    if isinstance(obj, BaseModel):
        # A model's field values live in its __dict__; cached properties (leading "_") are not fields.
        return {k: v for k, v in obj.__dict__.items() if k[0] != "_"}
    raise TypeError(f"{type(obj).__name__} has no canonical JSON form")


def canonical_model(obj: Any) -> bytes:
    """Canonical JSON of values that may hold models and rows; equal to dumping their JSON mode."""
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS, default=_plain)


def digest(obj: Any) -> str:
    return hashlib.sha256(canonical_model(obj)).hexdigest()


ModelT = TypeVar("ModelT", bound=BaseModel)


def assembled(cls: type[ModelT], values: dict[str, Any]) -> ModelT:
    """`cls.model_construct(**values)` for values that give every field, already typed, in the
    order the fields are declared: the same object (fields, fields set, no extra, no private
    state) without model_construct's walk over the fields. For the frozen, closed models of this
    package only (no aliases, no post-init, extra forbidden); tests hold the two equal.
    """
    made = cls.__new__(cls)
    object.__setattr__(made, "__dict__", values)
    object.__setattr__(made, "__pydantic_fields_set__", set(values))
    object.__setattr__(made, "__pydantic_extra__", None)
    object.__setattr__(made, "__pydantic_private__", None)
    return made


class ToolCall(BaseModel):
    """One call a model made: a tool name and its parsed arguments (None when they did not parse)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    arguments: dict[str, Any] | None
    raw_arguments: str | None = None


class Episode(BaseModel):
    """What verify() judges: the calls of each model turn and how the episode ended."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    turns: list[list[ToolCall]]
    ended_with_reply: bool = True
    turn_limit_hit: bool = False


class Goal(BaseModel):
    """What counts as done for one record: this ledger, this record, this stage."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ledger: str
    record_id: str
    stage: int


class PromptParts(BaseModel):
    """The user prompt as a template and its slots, so the pin ledger can hold each part."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    template: str
    slots: dict[str, str]
    knob_slots: list[str] = Field(default_factory=list)


class TaskBundle(BaseModel):
    """One generated task: what the model sees, how it is judged, and what produced it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    task_id: str
    arm_id: str
    seed: int
    split: Literal["eval", "train"]
    system_prompt: str
    prompt: str | list[dict[str, Any]]
    tools: list[dict[str, Any]]
    goal: list[Goal]
    reference_calls: list[ToolCall]
    reference_observations: list[str]
    negative_controls: dict[str, Episode]
    verifier: Literal["strict", "leaky"]
    pins: dict[str, Any] = Field(default_factory=dict)
    engine_hash: str
    generator_hash: str
    vocabulary_hash: str
    initial_state: list[Row]
    expected_final_state: list[Row]
    min_calls: int
    reference_turns: int
    prompt_parts: PromptParts
    system_filler: str = ""
    engine: EngineConfig

    def canonical(self) -> bytes:
        """The bundle's canonical JSON bytes (what byte-determinism is checked on)."""
        return canonical_model(self)

    @property
    def tool_names(self) -> list[str]:
        return [t["function"]["name"] for t in self.tools]

    def messages(self) -> list[dict[str, Any]]:
        """The opening request's messages: system prompt, then the prompt or the seeded history."""
        head: list[dict[str, Any]] = [{"role": "system", "content": self.system_prompt}]
        if isinstance(self.prompt, str):
            return [*head, {"role": "user", "content": self.prompt}]
        return [*head, *self.prompt]
