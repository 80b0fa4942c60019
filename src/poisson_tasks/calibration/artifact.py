"""The machine-readable card: every figure, the comparisons, provenance and the closing texts.

An Artifact is what `build_artifact` returns, what `card.json` holds (see cardjson.py for its
canonical bytes) and what `render_document` turns into `card.md`. Floats are already rounded by
the card's one rule (6 decimals) when an Artifact is built, so an Artifact read back from its
card.json equals the one that wrote it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from poisson_tasks.calibration.provenance import Provenance
from poisson_tasks.prereg import Thresholds

FORMAT = "poisson-tasks/card@2"
Rate = Literal["strict", "leaky"]
ComparisonVerdict = Literal["distinguishable", "too_small", "left_out"]

__all__ = [
    "FORMAT",
    "Artifact",
    "Cell",
    "CellCosts",
    "Claim",
    "Comparison",
    "FirstDifference",
    "Instrument",
    "KnobTable",
    "NoCallPeak",
    "NoCalls",
    "Ordering",
    "PassAtK",
    "PublishedFacts",
    "RateFigure",
    "ReplayShare",
    "Reproducibility",
    "ServingObserved",
    "Statements",
    "Totals",
]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RateFigure(_Frozen):
    """pass@1 (the mean over tasks of each task's pass rate) and its task-clustered interval.

    few_events is True when the cell has fewer than 15 successes or 15 failures: its interval
    is wide, and the card says so beside it.
    """

    pass_at_1: float
    low: float
    high: float
    few_events: bool


class PassAtK(_Frozen):
    """Unbiased strict pass@k: the chance that at least one of `attempts` (the k of pass@k)
    attempts passes; None when no task has that many scored attempts.

    card.json names the field "k": the alias is used both ways, so the card's bytes are the same
    whichever name the Python code uses (it writes `attempts`).
    """

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )

    attempts: int = Field(alias="k")
    value: float | None


class PassHatK(PassAtK):
    """Strict pass^k (Yao et al. 2024, tau-bench): the chance that all k attempts of a task pass,
    C(c, k) / C(n, k) per task, averaged over tasks with k scored attempts; None when none has.

    pass@k rewards one success in k tries; pass^k asks for k in k, the reliability a user who runs
    the same task again meets. Beyond the spec (docs/spec-deviations.md).
    """


class Instrument(_Frozen):
    """Episodes the instrument failed: out of every denominator, counted as they happened."""

    count: int
    rate: float | None
    by_outcome: dict[str, int]


class CellCosts(_Frozen):
    """Per-episode cost over the scored episodes; None where nothing was measured."""

    mean_model_calls: float | None
    median_model_calls: float | None
    mean_tool_calls: float | None
    median_tool_calls: float | None
    mean_tokens: float | None
    median_tokens: float | None
    p90_tokens: float | None
    tokens_per_strict_pass: float | None
    timed_episodes: int
    episode_s_median: float | None
    episode_s_p90: float | None
    model_s_median: float | None
    model_s_p90: float | None
    harness_s_median: float | None
    harness_s_p90: float | None
    setup_s_median: float | None


class Totals(_Frozen):
    """Token totals and dollars over every episode line (instrument failures cost money too)."""

    episodes: int
    uncached_input_tokens: int | None = Field(
        validation_alias=AliasChoices("uncached_input_tokens", "prompt_tokens")
    )  # a card.json written before the field was named for what it holds says `prompt_tokens`
    cached_input_tokens: int | None
    completion_tokens: int | None
    reasoning_tokens: int | None
    reasoning_share: float | None
    computed_usd: float | None
    provider_usd: float | None
    provider_usd_episodes: int


class NoCalls(_Frozen):
    """Scored episodes that made no tool call; of them, those that wrote a call as text instead
    (content the serving side's tool parser did not turn into a tool call), and those text calls
    by dialect."""

    episodes: int
    as_text: int
    dialects: dict[str, int]


class Cell(_Frozen):
    """One arm's results for the card's model. Figures are None when withheld or not measured.

    outcomes counts the scored episodes by outcome; malformed_clauses the malformed_call ones by
    the format clause they broke; no_calls the no-call episodes and which of them were text calls.
    """

    arm_id: str
    knob: str
    level: int
    control: bool
    min_calls: int
    planned: int
    episodes: int
    scored: int
    missing: int
    incomplete: bool
    resumed: int
    instrument: Instrument
    published: bool
    withheld: str | None
    outcomes: dict[str, int]
    malformed_clauses: dict[str, int]
    no_calls: NoCalls
    strict: RateFigure | None
    leaky: RateFigure | None
    overshoot: float | None
    pass_at_k: list[PassAtK]
    pass_hat_k: list[PassHatK]
    no_tool_call: float | None
    stopped_short: float | None
    saturated_strict: bool | None
    saturated_leaky: bool | None
    median_model_calls: float | None
    median_tokens: float | None
    median_episode_s: float | None
    costs: CellCosts | None
    totals: Totals


class Comparison(_Frozen):
    """One level against the next one up on one rate, paired over shared seeds.

    diff is the lower level's rate minus the upper one's: positive when the rate falls as the
    level rises. sign_p is the exact two-sided sign test's p-value over the seeds whose rate
    differs, in the direction of diff (null when the pair is not computed). reason says why a pair
    is left out, or why a pair whose interval excludes zero is still too small to call.
    """

    rate: Rate
    lower: str
    upper: str
    diff: float | None
    low: float | None
    high: float | None
    churn: float | None
    pairs_used: int
    sign_p: float | None
    verdict: ComparisonVerdict
    reason: str | None


class Ordering(_Frozen):
    """Is pass@1 non-increasing across a knob's levels? What the point estimates and the adjacent
    comparisons each say, and the verdict read from both.

    estimate_rises names the adjacent pairs whose point estimate rises (the upper level's pass@1
    above the lower's); no_estimate the levels with none (withheld or empty). rising and falling
    name the pairs distinguishable with the rate rising and falling; left_out the pairs the design
    does not compare; saturated the levels saturated on the rate.
    yes: every adjacent pair is compared, and no point estimate rises.
    no: at least one pair is distinguishable with the rate rising.
    cannot_tell: no rise is distinguishable, but a point estimate rises (too small to call) or a
    pair is left out, so the data do not decide it.
    single_level: the knob has one level on the card, so there is nothing to order.
    """

    rate: Rate
    verdict: Literal["yes", "no", "cannot_tell", "single_level"]
    estimate_rises: list[str]
    no_estimate: list[str]
    rising: list[str]
    falling: list[str]
    left_out: list[str]
    saturated: list[str]


class KnobTable(_Frozen):
    """One knob: its levels in order, its adjacent-level comparisons, and its ordering."""

    knob: str
    levels: list[str]
    read_on: Rate
    comparisons: list[Comparison]
    ordering_strict: Ordering
    ordering_leaky: Ordering | None


class Claim(_Frozen):
    """One line of what the card does not claim, with the key that says why it applies."""

    key: str
    text: str


class Statements(_Frozen):
    """The card's one opening sentence (what it can and cannot tell), the two closing texts, and
    the depth reading note when the top depth level is present. A card.json written before the
    opening sentence existed reads with it empty."""

    can_tell: str = ""
    what_it_is: str
    does_not_claim: list[Claim]
    depth_note: str | None


class NoCallPeak(_Frozen):
    """The highest no-call share in any cell: how far the card was from the no-call refusal."""

    arm_id: str
    share: float


class PublishedFacts(_Frozen):
    """What a published card was measured on: enough to say whether a run reads beside it."""

    name: str
    model: str
    generator_hash: str
    seeds: list[int]
    decoding: dict[str, Any]
    strictness: list[str]
    arms: list[str]
    attempts: int


class ServingObserved(_Frozen):
    """What the responses showed about the serving, over every episode line of a model card.

    system_fingerprints: each distinct `system_fingerprint` and how many responses carried it
    (None when no response carried one); estimated_tokens: tokens counted with the pinned tokenizer
    because a response reported no usage, and their share of all tokens; context_overflow:
    episodes that ended because the conversation outgrew the serving context window (scored
    turn_limit, in the denominator); context_window: the window the server reported.
    """

    responses: int
    system_fingerprints: dict[str, int] | None
    responses_without_fingerprint: int
    estimated_tokens: int
    estimated_share: float | None
    context_overflow: int
    context_overflow_by_arm: dict[str, int]
    context_window: int | None


class RateLimited(_Frozen):
    """The 429s a study met, counted from its episode lines' failed responses: how many, and in
    how many episodes. On a card whose run recorded its pacing (runner/pacing.py), beside the
    pacing each session had (provenance.sessions' `pacing`); a 429 of an episode abandoned in
    flight is not in it (its line was never written)."""

    responses: int
    episodes: int


class FirstRequestArm(_Frozen):
    """Pin N13 on one arm: over its tasks with both counts (the first line of each), the first
    request's input tokens as the server counted them, the pinned tokenizer's count of the same
    request, and the server's less the pinned (medians)."""

    arm_id: str
    tasks: int
    server_median: float | None
    pinned_median: float | None
    offset_median: float | None


class FirstRequestContrast(_Frozen):
    """Pin N13 across one contrast's arms: on each seed every arm counted, whether the server's
    less the pinned count is the same on every arm within `band` tokens; the widest spread seen,
    on which seed, and each arm's offset there."""

    knob: str
    arms: list[str]
    seeds: int
    held_seeds: int
    held: bool | None
    widest: int | None
    widest_seed: int | None
    widest_offsets: dict[str, int] = Field(default_factory=dict)


class FirstRequestPin(_Frozen):
    """Pin N13, realised first-request input tokens, read off the records (reported, never
    refused). status: `measured`; `not_recorded` (the lines carry no pinned count: written before
    runs recorded it); `no_server_count` (the server reported no usage on first requests)."""

    status: Literal["measured", "not_recorded", "no_server_count"]
    band: int
    arms: list[FirstRequestArm] = Field(default_factory=list)
    contrasts: list[FirstRequestContrast] = Field(default_factory=list)


class ReplayShare(_Frozen):
    """Of the replayed episodes, how many had one property, the share, and its interval (the
    card's rate interval with the task as the cluster, calibration/intervals.py)."""

    count: int
    share: float
    low: float
    high: float


class FirstDifference(_Frozen):
    """Where a replayed episode first parted from the run's: the model call (from 1) and what
    differed there first: `call` (the calls made), `text` (the reply's text, the calls the same)
    or `end` (one episode ended where the other went on)."""

    turn: int
    kind: Literal["call", "text", "end"]
    episodes: int


class Reproducibility(_Frozen):
    """A replay of a sample of the run's scored slots set beside the run (runner/replay.py).

    A transcript is identical when every message (the model's text and calls, the tools'
    answers) has the same bytes, tool-call ids left out (servers draw them at random); the
    tool calls are the same when the scored calls match name and arguments, turn by turn; the
    verdict is the verifier's outcome. `serving_differences` is pin N10's comparison of the run's
    first session with each replay session (servingpin.compare_serving): empty when it held,
    otherwise the replay is not a like-for-like re-run.
    """

    sample: int
    seed: int
    rule: str
    seeds: str = Field(
        default="",
        description="what the run and its replay sent as sampling seeds (seeding.py); empty on a "
        "card.json written before it was recorded",
    )
    scored_in_run: int
    replayed: int
    not_yet_replayed: int
    identical_transcript: ReplayShare
    same_tool_calls: ReplayShare
    same_verdict: ReplayShare
    different_verdict: ReplayShare
    pass_flips: int
    first_differences: list[FirstDifference]
    resolution: float
    run_serving: dict[str, str]
    replay_serving: dict[str, str]
    serving_differences: list[str]
    replay_records_sha256: str
    reading: str


class Artifact(_Frozen):
    """A card: one model's figures per level, the comparisons, costs, provenance and texts."""

    format: str = FORMAT
    kind: Literal["model", "reference-policy"]
    model: str
    stale: bool
    installed_generator_hash: str
    installed_engine_hash: str | None = None
    stale_hashes: list[str] = Field(default_factory=list)
    provenance: Provenance
    thresholds: Thresholds
    cells: list[Cell]
    knobs: list[KnobTable]
    controls: list[str]
    run_totals: Totals
    no_call_peak: NoCallPeak | None
    published_cards: list[str] = Field(default_factory=list)
    statements: Statements
    serving_observed: ServingObserved | None = None
    first_request: FirstRequestPin | None = None
    reproducibility: Reproducibility | None = None
    rate_limited: RateLimited | None = None

    @model_serializer(mode="wrap")
    def _serialize(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Left out when None: a card without serving observations, a replay or a record of its
        # pacing keeps the bytes it had before the field existed (the published reference-policy
        # cards); card.md says "not replayed".
        out: dict[str, Any] = handler(self)
        for key in ("serving_observed", "reproducibility", "rate_limited"):
            if out.get(key) is None:
                out.pop(key, None)
        return out

    def cell(self, arm_id: str) -> Cell:
        """The cell of one arm; KeyError when the card has none."""
        for cell in self.cells:
            if cell.arm_id == arm_id:
                return cell
        raise KeyError(arm_id)
