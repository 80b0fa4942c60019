"""The run folder's on-disk records: `run.json` (the header) and `episodes.jsonl` (one line per episode).

The runner writes these and calibration reads them; this module is the contract between the two.
A run folder is append-only: episode lines are written as each episode ends and fsynced in
batches (runner/folder.py), and the header is replaced atomically (write, fsync, rename), so a crash or kill never leaves it half-written.

Slots and resuming. A slot is one planned (arm_id, seed, attempt), attempts numbered from 0. A
slot holds at most one *scored* line (outcome not in verifier.INSTRUMENT_OUTCOMES). An instrument
failure (api_error, wall_timeout, replay_mismatch, verifier_error) is written the moment it happens
and is never removed or rewritten; a resumed session (`poisson-tasks run --resume`) runs a fresh
attempt for every slot with no scored line, including slots whose only lines are instrument
failures, and marks it resumed=True with its session index. A reader therefore counts each
instrument failure in its cell's instrument rate and scores the slot by its one scored line, and a
resumed run cannot hide a failure. A slot with no line at all (the run stopped, was killed, or the
episode was in flight) is simply not run yet. A kill can leave a torn last line: readers skip it,
and the runner truncates it before appending.

A header read is a header checked. run.json stores the pre-registration its run was made with,
its hash, and copies of what it registers (thresholds, arms, seeds, attempts; for a shard or a
merge the plan hash and the count of shards). read_header holds each copy to the value recomputed
from the stored document (registered.py) and the document to its hash (check_header), so what a
card or a merge decides with is what was registered; a folder edited after its run, here or on
another machine, is refused in one line naming the field.

Budgets. Token and dollar caps count every episode line in the folder plus each session's abandoned
usage (episodes cut off in flight by a stop); the wall-clock cap is per session.

Shards. A folder made by `run --shard i/n` records `shard` (ShardRecord) and holds only its
shard's slots, within its share of the caps; a folder made by `merge` records `merged`
(MergeRecord) and holds every shard's lines, sessions renumbered. A whole run's header has neither
key, so its bytes are as they were before shards existed.

Replays. `poisson-tasks replay RUN_DIR` runs a seeded sample of the run's scored slots again into
the folder RUN_DIR/replay/ (REPLAY), a run folder of its own whose header records `replay`
(ReplayRecord): the sample's size, seed, rule and slots. A run's own header never has that key.

Cards. `poisson-tasks card` writes a run's card into RUN_DIR/card/ (CARD_DIR), whether it ran the
run or was given its folder (calibration/output.py).
"""

from __future__ import annotations

import json
import os
from array import array
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from poisson_tasks.arms import ArmSpec, parse_arm_id
from poisson_tasks.errors import ArmError, RunFolderError
from poisson_tasks.files import atomic_write, lines_limited, open_regular, os_problem, read_limited
from poisson_tasks.prereg import Thresholds
from poisson_tasks.registered import Registered, registered
from poisson_tasks.verifier import INSTRUMENT_OUTCOMES, Outcome

HEADER = "run.json"
EPISODES = "episodes.jsonl"
REPLAY = "replay"  # the folder inside a run folder that holds its replay
CARD_DIR = "card"  # the folder inside a run folder that holds its card (card.json, card.md)
# What a reader takes from a run folder (docs/commands.md): run.json is at most HEADER_MAX_BYTES,
# each line of episodes.jsonl at most LINE_MAX_BYTES; both must be regular files.
HEADER_MAX_BYTES = 64 << 20
LINE_MAX_BYTES = 256 << 20
FORMAT = "poisson-tasks/run-folder@1"
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
    serving: dict[str, Any] | None = None
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
    serving: dict[str, Any] = Field(default_factory=dict)
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


def write_header(folder: Path, header: RunHeader) -> None:
    """Replace run.json atomically so a kill or a full disk never leaves half a header."""
    folder.mkdir(parents=True, exist_ok=True)
    data = json.dumps(header.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"
    atomic_write(folder / HEADER, data.encode("utf-8"))


def read_header(folder: Path) -> RunHeader:
    """A folder's run.json, read within HEADER_MAX_BYTES and held to its own pre-registration
    (check_header): a header edited after its run is refused, never read."""
    path = folder / HEADER
    if not path.exists():
        raise RunFolderError(
            f"{folder} is not a run folder: {HEADER} is missing (run `poisson-tasks run` first)"
        )
    try:
        header = RunHeader.model_validate_json(read_limited(path, HEADER_MAX_BYTES))
    except OSError as exc:
        raise RunFolderError(f"{path} cannot be read: {os_problem(exc)}") from None
    except ValueError as exc:
        first = str(exc).splitlines()[0]
        raise RunFolderError(f"{path} is damaged or from another version: {first}") from exc
    check_header(header, path)
    return header


# ------------------------------------------------------------------ a header held to its document

_EDITED = (
    "run.json was changed after its run; restore it as its run wrote it, or register the change "
    "in a new pre-registration and run that"
)


def _edited(source: Path, what: str) -> RunFolderError:
    return RunFolderError(f"{source}: {what}: {_EDITED}")


def check_header(header: RunHeader, source: Path) -> None:
    """The header against the pre-registration it stores (`source` names its run.json).

    A card decides with the header's thresholds, arms, seeds and attempts, and a merge with its
    shard record; each is a copy of what the stored pre-registration registers, so each is
    recomputed from that document (registered.py), and the document is held to its own hash. An
    edit of any one of them alone is refused in one line naming the field (RunFolderError)."""
    ours = registered(header.preregistration, source)
    if header.preregistration_hash != ours.preregistration_hash:
        raise _edited(
            source, "preregistration_hash is not the hash of the pre-registration it stores"
        )
    for name in Thresholds.model_fields:
        theirs, value = getattr(header.thresholds, name), getattr(ours.thresholds, name)
        if theirs != value:
            raise _edited(
                source,
                f"thresholds.{name} is {theirs:g} but its pre-registration registered {value:g}",
            )
    if tuple(header.arms) != ours.arms:
        raise _edited(source, "arms are not the ones its pre-registration's design.arms plans")
    if header.attempts != ours.attempts:
        raise _edited(
            source,
            f"attempts is {header.attempts} but its pre-registration registered {ours.attempts}",
        )
    if tuple(header.seeds) != ours.seeds or header.seed_list_hash != ours.seed_list_hash:
        raise _edited(
            source,
            "seeds or seed_list_hash are not the ones its pre-registration's design.seed_string "
            "and design.tasks derive",
        )
    if any(session.index != number for number, session in enumerate(header.sessions)):
        raise _edited(source, "sessions are not numbered 0, 1, 2 ... in the order they ran")
    _check_cut_record(header, source, ours)


def _check_cut_record(header: RunHeader, source: Path, ours: Registered) -> None:
    """A shard's or a merge's record: its count of shards within the plan's tasks (a shard holds
    whole tasks), a shard's index within its count, and its plan hash the document's."""
    cut: list[tuple[str, int, str]] = []
    if header.shard is not None:
        cut.append(("shard", header.shard.count, header.shard.plan_hash))
    if header.merged is not None:
        cut.append(("merged", header.merged.count, header.merged.plan_hash))
    for key, count, recorded in cut:
        if not 1 <= count <= ours.tasks:
            raise _edited(
                source,
                f"{key}.count {count} is not 1 to the plan's {ours.tasks} tasks (a shard holds "
                "whole tasks)",
            )
        if recorded != ours.plan_hash:
            raise _edited(
                source, f"{key}.plan_hash is not the plan hash of the pre-registration it stores"
            )
    if header.shard is not None and not 0 <= header.shard.index < header.shard.count:
        raise _edited(
            source,
            f"shard.index {header.shard.index} is outside 0 to {header.shard.count - 1} (shard "
            f"i of n is numbered from 0)",
        )


def iter_episodes(folder: Path) -> Iterator[EpisodeLine]:
    """Every complete episode line; a torn last line (a kill mid-write) is skipped, never parsed."""
    path = folder / EPISODES
    if not path.exists():
        return
    if not path.is_file():
        raise RunFolderError(f"{path} is not a file: a run folder's {EPISODES} holds episode lines")
    try:
        fh = open_regular(path)
    except OSError as exc:
        raise RunFolderError(f"{path} cannot be read: {os_problem(exc)}") from None
    with fh:
        try:
            for number, raw in enumerate(lines_limited(fh, LINE_MAX_BYTES), start=1):
                if not raw.endswith(b"\n"):
                    break  # the line a kill interrupted: never flushed whole, so never counted
                try:
                    yield EpisodeLine.model_validate_json(raw)
                except ValueError as exc:
                    raise RunFolderError(
                        f"{path}:{number} is not an episode line: {str(exc).splitlines()[0]}"
                    ) from exc
        except OSError as exc:
            raise RunFolderError(f"{path} cannot be read: {os_problem(exc)}") from None


def append_episode(fh: Any, line: EpisodeLine) -> None:
    """Append one episode line and flush it to disk before the next episode is counted."""
    fh.write(line.model_dump_json().encode() + b"\n")
    fh.flush()
    os.fsync(fh.fileno())


class PlanSlots:
    """A run header's plan as lookups, each arm id parsed once, and a slot per planned (arm,
    seed, attempt) holding the line that scored it (0: none yet). The one integrity check of an
    episode line against its folder's plan, which `card` (calibration.records) and `run
    --resume` (runner.folder) both run: a line outside the plan, or a second scored line for one
    attempt, is a damaged folder."""

    def __init__(self, header: RunHeader) -> None:
        self.seeds = {seed: index for index, seed in enumerate(dict.fromkeys(header.seeds))}
        self.attempts = header.attempts
        self.specs: dict[str, tuple[int, ArmSpec]] = {}
        for arm in header.arms:
            try:
                spec = parse_arm_id(arm)
            except ArmError as exc:
                raise RunFolderError(f"run.json: arms: {exc}") from exc
            self.specs.setdefault(arm, (len(self.specs), spec))
        self.scored_at = array("q", bytes(8 * len(self.specs) * len(self.seeds) * self.attempts))

    def locate(
        self, source: str, number: int, arm: str, seed: int, attempt: int
    ) -> tuple[int, ArmSpec]:
        """The line's slot, as its index in plan order, and its arm, once the slot is found inside
        the plan."""
        found = self.specs.get(arm)
        if found is None:
            raise RunFolderError(f"{source}:{number}: arm {arm!r} is not in run.json's plan")
        arm_index, spec = found
        seed_index = self.seeds.get(seed)
        if seed_index is None:
            raise RunFolderError(f"{source}:{number}: seed {seed} is not in run.json's seed list")
        if not 0 <= attempt < self.attempts:
            raise RunFolderError(
                f"{source}:{number}: attempt {attempt} is outside 0..{self.attempts - 1} "
                f"(attempts are numbered from 0; the plan has {self.attempts})"
            )
        return (arm_index * len(self.seeds) + seed_index) * self.attempts + attempt, spec

    def check_slot(
        self,
        source: str,
        number: int,
        arm: str,
        seed: int,
        attempt: int,
        min_calls: int,
        outcome: str,
    ) -> ArmSpec:
        """The line's arm, once the line is found inside the plan and its slot not scored
        before (an instrument failure may be retried; a scored attempt is run once)."""
        slot, spec = self.locate(source, number, arm, seed, attempt)
        if min_calls != spec.min_calls:
            raise RunFolderError(
                f"{source}:{number}: min_calls {min_calls} disagrees with {arm}'s {spec.min_calls}"
            )
        if outcome not in INSTRUMENT_OUTCOMES:
            if self.scored_at[slot]:
                raise RunFolderError(
                    f"{source}:{number}: {arm} seed {seed} attempt {attempt} was already scored at "
                    f"line {self.scored_at[slot]}; an attempt is run once (only an instrument "
                    "failure may be retried)"
                )
            self.scored_at[slot] = number
        return spec
