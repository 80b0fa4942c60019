"""The pre-registration's schema: one pydantic model per section, a description on every field,
and the `Plan` a valid document becomes. What each field means is here; how fields constrain each
other is in checks.py."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from typing import Any, Literal, NamedTuple

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from poisson_tasks.arms import ArmSpec, parse_arm_id
from poisson_tasks.hashes import engine_hash, generator_hash
from poisson_tasks.owntools import ToolSet
from poisson_tasks.providers import PROVIDERS as REGISTRY
from poisson_tasks.providers import Provider
from poisson_tasks.resolution import (
    Resolution,
)

FORMAT = "poisson-tasks/preregistration@1"
PROBE_FORMAT = "poisson-tasks/probe@1"  # a knob-probe registration (probe/design.py reads it)

PROVIDERS: tuple[str, ...] = tuple(REGISTRY)

_STRICT = ConfigDict(extra="forbid", frozen=True, strict=True)

IGNORED_THRESHOLDS: tuple[str, ...] = ("bootstrap_resamples", "bootstrap_seed")


class Thresholds(BaseModel):
    """Every threshold a card uses, declared before the run (IGNORED_THRESHOLDS are dropped on
    reading: older documents, run headers and cards carry them, nothing reads them)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    saturation_low: float = Field(
        0.05,
        description="a cell whose pass rate is at or below it is saturated low, and not compared",
    )
    saturation_high: float = Field(
        0.95,
        description="a cell whose pass rate is at or above it is saturated high, and not compared",
    )
    resolution: float = Field(
        0.15,
        description="the smallest difference in pass rate the design declares it can resolve, in (0, 1)",
    )
    no_call_max: float = Field(
        0.10, description="the largest share of attempts with no tool call before a cell is refused"
    )
    instrument_max: float = Field(
        0.02, description="the largest share of instrument failures before a cell is refused"
    )
    confidence: float = Field(
        0.95, description="the confidence level of every interval on the card, in (0, 1)"
    )

    @model_validator(mode="before")
    @classmethod
    def _drop_ignored(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and any(k in data for k in IGNORED_THRESHOLDS):
            return {k: v for k, v in data.items() if k not in IGNORED_THRESHOLDS}
        return data


BUILD_HASHES: tuple[str, ...] = ("generator_hash", "engine_hash")


class Build(BaseModel):
    """The instrument a pre-registration pins (optional): hashes `poisson-tasks validate` prints."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    generator_hash: str | None = Field(
        None, description="the generator hash this document must run on (64 lowercase hex digits)"
    )
    engine_hash: str | None = Field(
        None, description="the mock engine hash this document must run on (64 lowercase hex digits)"
    )


def build_hashes() -> dict[str, str]:
    """This install's hashes a pre-registration can pin under `build`."""
    return {"generator_hash": generator_hash(), "engine_hash": engine_hash()}


class Slot(NamedTuple):
    """One planned episode of a run: an arm at a seed, and the attempt (numbered from 0)."""

    arm_id: str
    seed: int
    attempt: int


class Rates(BaseModel):
    """What the provider bills, in USD per million tokens, with the date the rates were read."""

    model_config = _STRICT

    input: float = Field(description="USD per million uncached input tokens, 0 or more")
    cached_input: float = Field(description="USD per million cached input tokens, 0 or more")
    output: float = Field(description="USD per million output tokens, 0 or more")
    as_of: date = Field(strict=False, description="the date the rates were read (YYYY-MM-DD)")
    source: str | None = Field(
        None, description="where the rates were read (a price page), printed on the card"
    )


class Serving(BaseModel):
    """The model and where it is served; the API key is named by its variable, never written."""

    model_config = _STRICT

    provider: Provider = Field(
        description="who serves the model (providers/: openai, vllm, ollama, llamacpp, openai-compatible, reference)"
    )
    model: str = Field(
        description="the model id the endpoint serves (a reference policy for provider reference)"
    )
    base_url: str | None = Field(
        None,
        description="the OpenAI-compatible API root, e.g. http://127.0.0.1:8000/v1; no credential in it",
    )
    revision: str | None = Field(
        None,
        description="the weights' exact revision (a Hugging Face commit, an Ollama digest, sha256:...)",
    )
    api_key_env: str | None = Field(
        None,
        description="the environment variable that holds the API key; the key itself never goes here",
    )
    rates: Rates | None = Field(
        None, description="what the provider bills; without it the card gives no dollar figure"
    )

    @property
    def resolved_base_url(self) -> str | None:
        """The base URL the client talks to (the provider's default when none is given: OpenAI's
        own for `openai`)."""
        if self.base_url:
            return self.base_url.rstrip("/")
        return REGISTRY[self.provider].default_base_url


def _drop_unset(
    model: BaseModel, handler: SerializerFunctionWrapHandler, optional: tuple[str, ...]
) -> dict[str, Any]:
    """The model's fields less the optional ones left unset: a document written before those
    fields existed keeps its hash."""
    out: dict[str, Any] = handler(model)
    for name in optional:
        if out.get(name) is None:
            out.pop(name, None)
    return out


class Decoding(BaseModel):
    """The decoding, declared in full; `extra_body` carries provider-specific fields verbatim.

    `seed: derived` sends each attempt its own seed, derived from (task id, attempt) (see
    runner.endpoint.derived_seed); left out, no seed is sent.
    """

    model_config = _STRICT

    temperature: float = Field(
        description="the sampling temperature sent with every request, in [0, 2]"
    )
    top_p: float = Field(description="the nucleus sampling mass sent with every request, in (0, 1]")
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high"] | None = Field(
        description="the reasoning effort sent to models that take one, or null for none"
    )
    max_completion_tokens: int = Field(description="the cap on tokens per model reply, 1 or more")
    extra_body: dict[str, Any] = Field(
        description="provider-specific request fields, sent and hashed verbatim (no credential, no field the runner sets)",
        default_factory=dict,
    )
    seed: Literal["derived"] | None = Field(
        None, description="derived: each attempt is sent its own seed; left out, no seed is sent"
    )

    @model_serializer(mode="wrap")
    def _serialize(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _drop_unset(self, handler, ("seed",))


class ReplayDesign(BaseModel):
    """`design.replay`: after the main run, replay a seeded sample of its scored slots
    (`poisson-tasks replay`, runner/replay.py) into RUN_DIR/replay/, so the card can say how much of
    the run comes out the same when it is run again on the same serving."""

    model_config = _STRICT

    sample: int = Field(description="how many scored slots to run again, drawn across arms")
    seed: int = Field(default=0, description="the seed the sample is drawn with")


class Design(BaseModel):
    """What is measured: arms x seeds x attempts, the split, strictness, turn limit and horizon,
    and the harness that runs each episode: `native` (the runner's own loop, the fast default) or
    `verifiers-null` (the verifiers taskset on the null harness, the `verifiers` extra)."""

    model_config = _STRICT

    arms: list[str] = Field(
        description="the arm ids measured, e.g. depth:d3; a knob swept over two levels needs its control arms"
    )
    tasks: int = Field(description="how many tasks (seeds) each arm runs, 1 or more")
    attempts: int = Field(description="how many attempts each task gets, 1 or more")
    seed_string: str = Field(
        description='the string the seed list is derived from, or "range" for 0 .. tasks-1'
    )
    seeds: list[int] | None = Field(
        None,
        description="the derived seed list, stated to publish it; checked against the derivation",
    )
    seed_list_hash: str | None = Field(
        None,
        description="the seed list's sha256, stated to publish it; checked against the derivation",
    )
    split: Literal["eval", "train"] = Field(
        "eval", description="the task split every arm is drawn from"
    )
    strictness: Literal["strict", "leaky"] = Field(
        "strict", description="whether the verifier is strict or leaky for every arm"
    )
    turn_limit: int = Field(
        32, description="the most model calls an episode may make, at least the horizon"
    )
    slack: int = Field(description="turns allowed beyond each arm's turn budget, 0 or more")
    horizon: int = Field(
        description="the deepest arm's turn budget with the slack, as the arms give it"
    )
    harness: Literal["native", "verifiers-null"] = Field(
        "native",
        description="native (the runner's own loop) or verifiers-null (the verifiers taskset)",
    )
    own_tools: str | None = Field(
        default=None,
        description="a file of the user's own tools (OpenAI function schemas) in place of the "
        "read tools; relative to the pre-registration file",
    )
    own_tools_sha256: str | None = Field(
        default=None, description="the tool file's SHA-256; filled in when not stated"
    )
    replay: ReplayDesign | None = Field(
        None,
        description="a seeded sample of the run replayed after it, for the Reproducibility section",
    )

    @model_serializer(mode="wrap")
    def _omit_defaults(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # The default harness, absent own tools and no replay are left out of the document's JSON,
        # so the hashes of every pre-registration written before those options existed stay.
        out = _drop_unset(self, handler, ("own_tools", "own_tools_sha256", "replay"))
        if out.get("harness") == "native":
            del out["harness"]
        return out


class Budget(BaseModel):
    """When the run stops: tokens and dollars over the whole folder, wall-clock per session."""

    model_config = _STRICT

    tokens: int = Field(description="the token cap over the whole folder, positive")
    wall_clock_s: float = Field(description="the wall-clock cap per session, in seconds, positive")
    dollars: float | None = Field(
        None,
        description="the dollar cap over the whole folder (needs model.rates), positive when given",
    )


class Execution(BaseModel):
    """How the runner drives the endpoint; none of it changes what is measured.

    `pace`: `headers` (the default) paces new requests by the rate-limit headers the endpoint
    sends, where it sends them (runner/pacing.py); `off` sends at the concurrency alone. YAML reads
    an unquoted `off` as false, which is taken as `off`.
    """

    model_config = _STRICT

    concurrency: int = Field(8, description="how many episodes run at once, 1 or more")
    max_retries: int = Field(6, description="how many times a failed request is retried, 0 or more")
    backoff_s: float = Field(
        1.0, description="the first wait before a retry, in seconds, 0 or more"
    )
    backoff_max_s: float = Field(
        60.0, description="the longest wait before a retry, in seconds, 0 or more"
    )
    request_timeout_s: float = Field(
        300.0, description="how long one request may take, in seconds, positive"
    )
    episode_timeout_s: float = Field(
        1800.0, description="how long one episode may take, in seconds, positive"
    )
    retry_after_max_s: float | None = Field(
        None, description="the longest Retry-After honoured, in seconds; unset, the backoff's cap"
    )
    pace: Literal["headers", "off"] = Field(
        "headers",
        description="headers: pace by the rate-limit headers the endpoint sends; off: the concurrency alone",
    )

    @model_validator(mode="before")
    @classmethod
    def _off_as_written(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and data.get("pace") is False:
            return {**data, "pace": "off"}
        return data

    @model_serializer(mode="wrap")
    def _serialize(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # The default pace is left out, so every document written before it keeps its hash.
        out = _drop_unset(self, handler, ("retry_after_max_s",))
        if out.get("pace") == "headers":
            del out["pace"]
        return out


class Preregistration(BaseModel):
    """The whole document; only `budget` and `execution` may change when a run is resumed."""

    model_config = _STRICT

    format: Literal["poisson-tasks/preregistration@1"] = Field(
        description="the document format, poisson-tasks/preregistration@1"
    )
    name: str = Field(
        description="the study's name, a safe folder name (the run folder is runs/<name>-<time>)"
    )
    description: str = Field(
        "", description="free text about the study; a resumed session may change it"
    )
    model: Serving = Field(description="the model and where it is served")
    decoding: Decoding = Field(description="the decoding, declared in full")
    design: Design = Field(description="what is measured")
    budget: Budget = Field(description="when the run stops; a resumed session may change it")
    execution: Execution = Field(
        description="how the runner drives the endpoint; a resumed session may change it",
        default_factory=Execution,
    )
    thresholds: Thresholds = Field(
        description="every threshold the card uses", default_factory=Thresholds
    )
    build: Build | None = Field(
        None, description="the instrument's hashes the document pins, when it pins them"
    )

    @model_serializer(mode="wrap")
    def _serialize(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Left out when not pinned: a document without it keeps the hash it had before.
        out: dict[str, Any] = handler(self)
        if out.get("build") is None:
            out.pop("build", None)
        return out

    def measurement(self) -> dict[str, Any]:
        """The part that defines the measurement: what must match for a folder to be resumed."""
        return measurement_of(self.model_dump(mode="json"))


RESUMABLE_SECTIONS: tuple[str, ...] = ("budget", "execution", "description")


def measurement_of(document: Mapping[str, Any]) -> dict[str, Any]:
    """A pre-registration's JSON form less the sections a resumed session may change (and less
    the ignored thresholds, so a folder whose document still has them resumes)."""
    out = {k: v for k, v in document.items() if k not in RESUMABLE_SECTIONS}
    thresholds = out.get("thresholds")
    if isinstance(thresholds, Mapping):
        out["thresholds"] = {k: v for k, v in thresholds.items() if k not in IGNORED_THRESHOLDS}
    return out


class Plan(BaseModel):
    """A validated pre-registration: arms x seeds x attempts, its hashes, horizon and resolution."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    preregistration: Preregistration
    preregistration_hash: str
    measurement_hash: str
    arms: tuple[str, ...]
    seeds: tuple[int, ...]
    seed_list_hash: str
    attempts: int
    episodes: int
    horizon: int
    resolution: Resolution
    source: str | None = None
    own_tools: ToolSet | None = None
    notes: tuple[str, ...] = ()

    @property
    def specs(self) -> tuple[ArmSpec, ...]:
        return tuple(parse_arm_id(a) for a in self.arms)

    def slots(self) -> list[Slot]:
        """Every planned (arm_id, seed, attempt), attempts numbered from 0, in run order."""
        return [Slot(a, s, k) for a in self.arms for s in self.seeds for k in range(self.attempts)]
