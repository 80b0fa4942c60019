"""The run folder's schema: its file names and limits, and the records of run.json (RunHeader,
with its sessions, shard, merge and replay records) and of episodes.jsonl (EpisodeLine).

What each record means, and how a folder is written and read, is the package's doc
(runfolder/__init__.py) and docs/architecture.md's "The run folder"."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from poisson_tasks.prereg import Thresholds
from poisson_tasks.runfolder.serving import ServingRecord
from poisson_tasks.verifier import Outcome

HEADER = "run.json"
EPISODES = "episodes.jsonl"
REPLAY = "replay"  # the folder inside a run folder that holds its replay
CARD_DIR = "card"  # the folder inside a run folder that holds its card (card.json, card.md)
# What a reader takes from a run folder (docs/commands.md): run.json is at most HEADER_MAX_BYTES,
# each line of episodes.jsonl at most LINE_MAX_BYTES; both must be regular files.
HEADER_MAX_BYTES = 64 << 20
LINE_MAX_BYTES = 256 << 20
FORMAT = "poisson-tasks/run-folder@1"
EPISODES_GZ = EPISODES + ".gz"  # a published run's records, packed (calibration/published.py)
# An episode line's key for its uncached input tokens, then the key lines written before the field
# was named for what it holds (the published records among them) used for the same figure.
USAGE_UNCACHED_KEYS = ("uncached_input_tokens", "prompt_tokens")


def uncached_input(usage: dict[str, Any]) -> Any:
    """An episode line's uncached input tokens from its raw `usage` object, under either key."""
    for key in USAGE_UNCACHED_KEYS:
        if key in usage:
            return usage[key]
    return None


StopReason = Literal[
    "complete",
    "token_budget",
    "wall_clock",
    "dollar_budget",
    "out_of_credit",
    "interrupted",
    "running",
]
# How a session ended, as a sentence reads it after "the session" (the card's summary line).
STOP_WORDS: dict[str, str] = {
    "complete": "ran every planned episode",
    "token_budget": "stopped at its token budget",
    "wall_clock": "stopped at its wall-clock limit",
    "dollar_budget": "stopped at its dollar budget",
    "out_of_credit": "stopped when the provider reported no credit left",
    "interrupted": "was interrupted (stopped or killed) before it finished",
    "running": "was still running when the folder was read, or was killed",
}


def stop_words(reason: str | None) -> str:
    """How a session ended, in words; a reason this build does not know is quoted as it is."""
    if reason is None:
        return "is not recorded (the folder has no session)"
    return STOP_WORDS.get(reason, f"stopped ({reason})")


class Usage(BaseModel):
    """Tokens as the provider reported them, or counted where it reported none.

    uncached_input_tokens is the input the provider did not serve from its cache (its
    prompt_tokens less the cached ones; the raw usage beside it in the transcript keeps the
    provider's own prompt_tokens, cached tokens included), cached_input_tokens the cached input,
    completion_tokens already holds the reasoning tokens: an episode's tokens are uncached input
    + cached input + completion. A line written before the field had its name reads its old
    key, `prompt_tokens`, as uncached input (USAGE_UNCACHED_KEYS). A response without `usage` is
    counted with the pinned tokenizer (the request as sent, the reply's text and calls), and
    estimated_tokens says how many of the episode's tokens were so counted (None: none were).

    Pin N13's two figures, outside the episode's token total: first_request_tokens is the
    episode's first request's input as the server counted it (its response's prompt_tokens,
    cached input included; None when that response reported no usage), and
    first_request_pinned_tokens the pinned tokenizer's count of the same request
    (reference.wire.request_tokens; None on a line written before runs recorded it).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    uncached_input_tokens: int | None = Field(
        default=None, validation_alias=AliasChoices(*USAGE_UNCACHED_KEYS)
    )
    cached_input_tokens: int | None = None
    completion_tokens: int | None = None
    reasoning_tokens: int | None = None
    provider_cost_usd: float | None = None
    estimated_tokens: int | None = None
    first_request_tokens: int | None = None
    first_request_pinned_tokens: int | None = None


class Timing(BaseModel):
    """Seconds measured around the episode; None where not recorded."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    episode_s: float | None = None
    model_s: float | None = None
    harness_s: float | None = None
    setup_s: float | None = None


class EpisodeLine(BaseModel):
    """One finished episode: who, the verdict, usage and timing, and the full transcript."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    arm_id: str
    seed: int
    attempt: int
    task_id: str
    session: int = Field(description="which invocation of the runner made it: 0 first, 1+ resumed")
    resumed: bool
    outcome: Outcome
    strict_label: Outcome
    leaky_pass: bool
    passed: bool
    malformed_clause: int | None = None
    min_calls: int
    tool_calls: int
    model_calls: int
    goal_stages: list[int] = Field(default_factory=list)
    usage: Usage = Usage()
    timing: Timing = Timing()
    system_fingerprints: list[str | None] = Field(
        default_factory=list, description="per response; None where the response carried none"
    )
    finish_reasons: list[str] = Field(default_factory=list)
    unparsed_text_calls: int = 0
    context_overflow: bool = Field(
        default=False,
        description="the conversation outgrew the serving context window; scored as turn_limit",
    )
    error: str | None = None
    transcript: dict[str, Any] = Field(default_factory=dict)


class PacingRecord(BaseModel):
    """How one session paced its requests (runner/pacing.py): the `execution.pace` in force,
    whether the endpoint stated a rate limit (then requests were paced by it), the last limit it
    stated per quantity (requests, tokens, tokens_usage_based: per minute), how often a stated
    limit changed, how often a 429 made the pacer slow down, and how many requests the pacer held
    before sending and for how long in all.
    A session killed before its end records only `pace` (`applied` None: not recorded)."""

    model_config = ConfigDict(extra="forbid")

    pace: Literal["headers", "off"]
    applied: bool | None = None
    stated: dict[str, int] = Field(default_factory=dict)
    limit_changes: int = 0
    slowdowns: int = 0
    held: int = 0
    held_s: float = 0.0


class Session(BaseModel):
    """One invocation of the runner on this folder.

    stop_reason "running" on a session that is not the last means that session was killed; the
    next resume marks it "interrupted". `abandoned` counts episodes cut off in flight by a stop
    (never written: their slots are run on resume), and `abandoned_usage` what they had spent.
    """

    model_config = ConfigDict(extra="forbid")

    index: int
    started_at: str
    ended_at: str | None = None
    stop_reason: StopReason = "running"
    episodes_written: int = 0
    detail: str | None = None
    abandoned: int = 0
    abandoned_usage: Usage = Usage()
    concurrency: int | None = None
    budget: dict[str, Any] | None = None
    serving: ServingRecord | None = None
    pacing: PacingRecord | None = None

    @model_serializer(mode="wrap")
    def _drop_unpaced(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """A session written before pacing existed keeps its bytes."""
        out: dict[str, Any] = handler(self)
        if out.get("pacing") is None:
            out.pop("pacing", None)
        return out


class OwnToolsRecord(BaseModel):
    """A run on the user's own tools: the file, its tools, and what the pin ledger found on them
    (rows whose figures the tools change, rows that could not be held), on the seeds checked."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    file: str
    sha256: str
    names: list[str]
    checked_seeds: list[int]
    contrasts: int
    changed: list[dict[str, Any]] = Field(default_factory=list)
    not_held: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def file_name(self) -> str:
        """The tool file's name as a card prints it: `file` is the path the pre-registration
        gave, relative to that document (`../examples/tools.json`), which means nothing beside
        the card; the sha256 says which file it was."""
        return PurePosixPath(self.file.replace("\\", "/")).name or self.file


class ShardRecord(BaseModel):
    """This folder holds one shard of a study cut across machines (`run --shard i/n`).

    `plan_hash` is the pre-registration's hash less the address of its endpoint (every shard may
    reach its own server), `slots_sha256` the digest of this shard's slots as the partition rule
    `rule` cuts them (runner/shard.py), and `budget` this shard's share of the study's caps.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    index: int
    count: int
    rule: str
    plan_hash: str
    slots: int
    slots_sha256: str
    budget: dict[str, Any]


class MergedShard(BaseModel):
    """One shard folder a merge read: where it was, its sessions' new numbers, what it held."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    index: int
    folder: str
    sessions: list[int]
    episodes: int
    tokens: int
    records_sha256: str
    budget: dict[str, Any]


class MergeRecord(BaseModel):
    """This folder is the merge of a study's shard folders (`poisson-tasks merge`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    count: int
    rule: str
    plan_hash: str
    merged_at: str
    shards: list[MergedShard]


class ReplayRecord(BaseModel):
    """This folder replays a sample of another run's scored slots (`poisson-tasks replay`).

    `sample` slots drawn with `seed` by the rule `rule` (runner/replay.py) from the
    `scored` slots the run held when the replay began; `slots` lists them ([arm, seed, attempt])
    and `slots_sha256` is their digest, which a resumed replay checks before it runs a slot.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    sample: int
    seed: int
    rule: str
    scored: int
    slots: list[tuple[str, int, int]]
    slots_sha256: str


class RunHeader(BaseModel):
    """The run's header: what was planned, how it was served, and every session that wrote to it."""

    model_config = ConfigDict(extra="forbid")

    format: str = FORMAT
    preregistration: dict[str, Any]
    preregistration_hash: str
    seed_list_hash: str
    seeds: list[int]
    arms: list[str]
    attempts: int
    engine_hash: str
    generator_hash: str
    vocabulary_hash: str
    environment_hash: str
    package_version: str
    package_versions: dict[str, str] = Field(default_factory=dict)
    serving: ServingRecord = Field(default_factory=ServingRecord)
    concurrency: int | None = None
    thresholds: Thresholds = Thresholds()
    sessions: list[Session] = Field(default_factory=list)
    own_tools: OwnToolsRecord | None = None
    shard: ShardRecord | None = None
    merged: MergeRecord | None = None
    replay: ReplayRecord | None = None

    @model_serializer(mode="wrap")
    def _drop_unsharded(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """A folder that is neither a shard, a merge nor a replay keeps the bytes it had before
        any of them."""
        out: dict[str, Any] = handler(self)
        for key in ("shard", "merged", "replay"):
            if out.get(key) is None:
                out.pop(key, None)
        return out
