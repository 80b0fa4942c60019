"""Provenance: everything a card's numbers depend on, read from the run folder's header.

What the card reads from the header's free-form parts, as the runner writes them:

- `preregistration` (the pre-registration as declared, prereg.Preregistration's JSON form):
  `model.provider`, `model.model`, `model.revision`, `model.rates` (USD per million tokens:
  `input`, `cached_input`, `output`, `as_of`, the date they were read, and `source`),
  `decoding`, `design.turn_limit` and `budget`. A model without `rates` gets no dollar figure.
- `serving` (what the endpoint reported about itself, typed once as runfolder.ServingRecord):
  `provider`, `model`, `revision`, and under `details` the server's version (`details.version`,
  from vLLM or Ollama). Optional keys a serving stack may add and the card prints: `stack`,
  `stack_version`, `flags`, `gpu`, `weights_revision`, `context_window`, and `kind` (`api`,
  `self-served`, `reference`), which otherwise follows from the provider's registered kind (providers/: openai is an API, reference is this package's
  reference policies, vllm, ollama, llamacpp and openai-compatible are served by the user).
  For llama.cpp the runner also writes `llamacpp` (local.facts.LlamaCppFacts: build, model
  file, size, sha256, quantisation, n_ctx, threads, chat template and its sha256), which the card
  prints in full.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, cast, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
)

from poisson_tasks.arms import parse_arm_id
from poisson_tasks.errors import RunFolderError
from poisson_tasks.local.facts import LlamaCppFacts
from poisson_tasks.prereg import Rates, Thresholds
from poisson_tasks.providers import ServingKind as RegisteredKind
from poisson_tasks.providers import provider_def
from poisson_tasks.runfolder import (
    MergeRecord,
    OwnToolsRecord,
    PacingRecord,
    RunHeader,
    ServingRecord,
    StopReason,
    open_run,
)
from poisson_tasks.servingpin import (
    compare_serving,
    readable_version,
    session_facts,
)

ServingKind = Literal[RegisteredKind, "unknown"]


__all__ = [
    "Provenance",
    "ServingInfo",
    "SessionInfo",
    "provenance_from_header",
    "provenance_from_run",
]


class ServingInfo(BaseModel):
    """Where and how the model was served, as far as the server reported it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: ServingKind
    provider: str | None = None
    stack: str | None = None
    stack_version: str | None = None
    flags: list[str] = Field(default_factory=list)
    gpu: str | None = None
    weights_revision: str | None = None
    policy: str | None = None
    context_window: int | None = None
    llamacpp: LlamaCppFacts | None = None

    @model_serializer(mode="wrap")
    def _serialize(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Left out when None, so cards from runs that did not record them keep their bytes.
        out: dict[str, Any] = handler(self)
        for key in ("context_window", "llamacpp"):
            if out.get(key) is None:
                out.pop(key, None)
        return out


class SessionInfo(BaseModel):
    """One invocation of the runner on the folder, and why it stopped.

    A session served otherwise than the first on pin N10 (servingpin.compare_serving) carries its
    own `serving`, the N10 fields that differ (`serving_differs`) and the change in words
    (`serving_change`); a session served as the first carries none of them, so a card of one
    serving keeps the bytes it had before sessions' servings were compared. `pacing` is the
    session's record of its pacing (runfolder.PacingRecord), absent from a run made before it.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    index: int
    started_at: str
    ended_at: str | None
    stop_reason: StopReason
    episodes_written: int
    concurrency: int | None = None
    detail: str | None = None
    serving: ServingInfo | None = None
    serving_differs: list[str] = Field(default_factory=list)
    serving_change: str | None = None
    pacing: PacingRecord | None = None

    @model_serializer(mode="wrap")
    def _serialize(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        for key in ("serving", "serving_differs", "serving_change", "pacing"):
            if not out.get(key):
                out.pop(key, None)
        return out


class Provenance(BaseModel):
    """Every setting and hash a card's figures depend on, plus the plan they were measured on."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    package_version: str
    harness: str
    verifiers_version: str | None
    engine_hash: str
    generator_hash: str
    vocabulary_hash: str
    seed_list_hash: str
    environment_hash: str
    preregistration_hash: str
    records_sha256: str
    model: str
    serving: ServingInfo
    decoding: dict[str, Any]
    budget: dict[str, Any]
    turn_limit: int | None
    concurrency: int | None
    rates: Rates | None  # as the pre-registration declared them (card.json: as_of a date string)
    thresholds: Thresholds
    arms: list[str]
    seeds: list[int]
    attempts: int
    strictness: list[str]
    sessions: list[SessionInfo]
    own_tools: OwnToolsRecord | None = None
    shards: MergeRecord | None = Field(
        default=None, description="the shard folders a merged run was put together from"
    )

    @model_serializer(mode="wrap")
    def _drop_no_own_tools(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """A card on the generated tools, from one folder, keeps the bytes it had before own
        tools and shards existed."""
        out: dict[str, Any] = handler(self)
        for key in ("own_tools", "shards"):
            if out.get(key) is None:
                out.pop(key, None)
        return out

    @property
    def stop_reason(self) -> StopReason | None:
        """Why the last session stopped; None before any session."""
        return self.sessions[-1].stop_reason if self.sessions else None

    @property
    def pooled_servings(self) -> bool:
        """Whether the figures pool several servings: a session served otherwise than the first
        on pin N10 (resumed with --accept-serving-change)."""
        return any(s.serving_differs for s in self.sessions)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _section(mapping: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = mapping.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RunFolderError(f"run.json: {where}{key} must be a mapping, got {value!r}")
    return dict(value)


def _kind(serving: ServingRecord, provider: str) -> ServingKind:
    declared = serving.kind
    if declared in get_args(RegisteredKind):
        return cast(ServingKind, declared)
    registered = provider_def(provider)
    return "unknown" if registered is None else registered.kind


def _server_version(serving: ServingRecord) -> str | None:
    """The serving stack's version as the server reported it (vLLM, Ollama: details.version)."""
    if serving.stack_version is not None:
        return readable_version(serving.stack_version)
    version = serving.details.get("version")
    if isinstance(version, dict):
        version = version.get("version")
    return readable_version(version)


def _serving(header: RunHeader, serving: ServingRecord | None = None) -> ServingInfo:
    """The card's account of a serving: the header's (the first session's), or `serving`."""
    serving = header.serving if serving is None else serving
    declared = _section(header.preregistration, "model", "preregistration.")
    provider = str(serving.provider or declared.get("provider") or "").lower() or None
    kind = _kind(serving, provider or "")
    model = serving.model or declared.get("model")
    return ServingInfo(
        kind=kind,
        provider=provider,
        stack=serving.stack or (provider if kind == "self-served" else None),
        stack_version=_server_version(serving) if kind == "self-served" else None,
        flags=list(serving.flags or []),
        gpu=serving.gpu,
        weights_revision=_text(
            serving.weights_revision or serving.revision or declared.get("revision")
        ),
        policy=_text(model) if kind == "reference" else None,
        context_window=serving.context_window,
        llamacpp=_llamacpp(serving),
    )


def _llamacpp(serving: ServingRecord) -> LlamaCppFacts | None:
    """What a llama.cpp server reported (`serving.llamacpp`, written by the runner's preflight),
    held to local.facts.LlamaCppFacts (the record keeps it as written, so its bytes stay)."""
    value = serving.llamacpp
    if value is None:
        return None
    try:
        return LlamaCppFacts.model_validate(value)
    except ValidationError as exc:
        first = str(exc).splitlines()[0]
        raise RunFolderError(
            f"run.json: serving.llamacpp is not as the runner writes it: {first}"
        ) from None


def _model(header: RunHeader) -> str:
    declared = _section(header.preregistration, "model", "preregistration.")
    name = header.serving.model or declared.get("model")
    return str(name) if name else "not recorded"


def _mapping(header: RunHeader, key: str) -> dict[str, Any]:
    return _section(header.preregistration, key, "preregistration.")


def _rates(header: RunHeader) -> Rates | None:
    value = _section(header.preregistration, "model", "preregistration.").get("rates")
    if value is None:
        return None
    try:
        return Rates.model_validate(value)
    except ValidationError as exc:
        first = str(exc).splitlines()[0]
        raise RunFolderError(
            "run.json: preregistration.model.rates is not input, cached_input, output and "
            f"as_of: {first}"
        ) from exc


def _turn_limit(header: RunHeader) -> int | None:
    value = _mapping(header, "design").get("turn_limit")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise RunFolderError(
            f"run.json: preregistration.turn_limit must be an integer, got {value!r}"
        )
    return value


def _harness(header: RunHeader) -> str:
    """The harness that ran the episodes, as the card names it."""
    if _mapping(header, "design").get("harness") == "verifiers-null":
        version = header.package_versions.get("verifiers", "unknown")
        return f"verifiers {version} taskset poisson-tasks-verifiers, null harness"
    return f"poisson-tasks runner {header.package_version}"


def provenance_from_header(
    header: RunHeader, records_hash: str, written: Mapping[int, int] | None = None
) -> Provenance:
    """Provenance from a run header and the hash of the episode lines it was read with.

    `written`, lines per session counted from the records, replaces the header's own counts (a
    killed session never wrote its count into the header)."""
    strictness = sorted({parse_arm_id(a).strictness for a in header.arms})
    facts = session_facts(header)
    changes = [compare_serving(facts[0], f) for f in facts] if header.sessions else []
    return Provenance(
        package_version=header.package_version,
        harness=_harness(header),
        verifiers_version=header.package_versions.get("verifiers")
        if _mapping(header, "design").get("harness") == "verifiers-null"
        else None,
        engine_hash=header.engine_hash,
        generator_hash=header.generator_hash,
        vocabulary_hash=header.vocabulary_hash,
        seed_list_hash=header.seed_list_hash,
        environment_hash=header.environment_hash,
        preregistration_hash=header.preregistration_hash,
        records_sha256=records_hash,
        model=_model(header),
        serving=_serving(header),
        decoding=_mapping(header, "decoding"),
        budget=_mapping(header, "budget"),
        turn_limit=_turn_limit(header),
        concurrency=header.concurrency,
        rates=_rates(header),
        thresholds=header.thresholds,
        arms=list(header.arms),
        seeds=list(header.seeds),
        attempts=header.attempts,
        strictness=strictness,
        sessions=[
            SessionInfo(
                index=s.index,
                started_at=s.started_at,
                ended_at=s.ended_at,
                stop_reason=s.stop_reason,
                episodes_written=(
                    written.get(s.index, 0) if written is not None else s.episodes_written
                ),
                concurrency=s.concurrency,
                detail=s.detail,
                pacing=s.pacing,
                **(
                    {
                        "serving": _serving(header, s.serving),
                        "serving_differs": list(change.fields),
                        "serving_change": change.describe(),
                    }
                    if not change.held
                    else {}
                ),
            )
            for s, change in zip(header.sessions, changes, strict=True)
        ],
        own_tools=header.own_tools,
        shards=header.merged,
    )


def provenance_from_run(folder: Path | str) -> Provenance:
    """The Provenance block of a run folder (header plus the hash of its episode lines)."""
    run = open_run(folder)
    stream = run.stream()
    for _ in stream:  # one pass: every line checked and hashed, lines counted per session
        pass
    return provenance_from_header(run.header, stream.sha256, stream.written)
