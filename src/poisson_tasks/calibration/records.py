"""Per-episode records: a finished run folder read into typed rows a card is computed from.

One record per episode line. Tokens follow the run folder's convention: `uncached_input_tokens`
is the uncached input (a line written before the field was named so has it as `prompt_tokens`),
`cached_input_tokens` the cached input, and `completion_tokens` already holds the reasoning
tokens, so an episode's tokens are uncached input + cached input + completion and nothing else.

Reading is one streamed pass (runfolder.RecordStream, the run folder's one reader of its lines):
only the fields a card reads are kept (the transcript is parsed but dropped), each line checked
against the header's plan (runfolder.PlanSlots) as it becomes a row.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from poisson_tasks.arms import Knob
from poisson_tasks.runfolder import (
    EPISODES,
    EPISODES_GZ,
    EpisodeLine,
    PlanSlots,
    RecordStream,
    RunHeader,
    episode_lines,
    open_run,
    records_sha256,
    uncached_input,
)
from poisson_tasks.verifier import INSTRUMENT_OUTCOMES, Outcome

__all__ = [
    "EPISODES_GZ",
    "EpisodeRecord",
    "EpisodeRow",
    "RecordStream",
    "episode_lines",
    "episode_rows",
    "records_from_lines",
    "records_from_run",
    "records_sha256",
]


def episode_tokens(prompt: int | None, cached: int | None, completion: int | None) -> int | None:
    """An episode's tokens by the run folder's convention (the module docstring); None unless both
    prompt and completion were reported."""
    if prompt is None or completion is None:
        return None
    return prompt + (cached or 0) + completion


@dataclass
class EpisodeRow:
    """One episode line as a card reads it: who, how it ended, what it cost, how long it took.

    The one table of an episode's fields (names, types, order). The streamed card holds these, one
    per line in flight; EpisodeRecord is the same fields validated, and takes them from here, so a
    new field is written once: here, and where _Plan.check reads it from the line.
    """

    arm_id: str
    knob: Knob
    level: int
    control: bool
    seed: int
    attempt: int
    task_id: str
    session: int
    resumed: bool
    outcome: Outcome
    instrument: bool
    strict_pass: bool
    leaky_pass: bool
    overshoot: bool
    tool_calls: int
    model_calls: int
    min_calls: int
    uncached_input_tokens: int | None
    cached_input_tokens: int | None
    completion_tokens: int | None
    reasoning_tokens: int | None
    provider_cost_usd: float | None
    episode_s: float | None
    model_s: float | None
    harness_s: float | None
    setup_s: float | None
    estimated_tokens: int | None
    context_overflow: bool
    system_fingerprints: list[str | None]
    malformed_clause: int | None
    text_calls: int
    text_call_dialects: list[str]
    first_request_tokens: int | None
    first_request_pinned_tokens: int | None
    rate_limited: int = 0  # the episode's failed responses that were 429 (transcript)

    @property
    def tokens(self) -> int | None:
        """Uncached + cached input + completion; None unless uncached input and completion were
        reported."""
        return episode_tokens(
            self.uncached_input_tokens, self.cached_input_tokens, self.completion_tokens
        )

    @property
    def no_tool_call(self) -> bool:
        return self.tool_calls == 0

    @property
    def stopped_short(self) -> bool:
        """At least one tool call but fewer than the task's minimum (disjoint from no tool call)."""
        return 0 < self.tool_calls < self.min_calls


class EpisodeRecord(BaseModel, EpisodeRow):
    """An EpisodeRow validated by pydantic and frozen: its fields are EpisodeRow's, inherited."""

    model_config = ConfigDict(frozen=True, extra="forbid")


_NOTHING: Mapping[str, Any] = {}


def _dialects(transcript: Any) -> list[str]:
    """The dialects the runner named for the episode's text calls (its transcript's
    `text_call_dialects`); empty where the harness recorded none."""
    named = transcript.get("text_call_dialects") if type(transcript) is dict else None
    if type(named) is not list:
        return _EMPTY_DIALECTS
    return [dialect for dialect in named if type(dialect) is str]


_EMPTY_DIALECTS: list[str] = []


def _rate_limited(transcript: Any) -> int:
    """How many of the episode's failed responses were 429 (its transcript's
    `failed_responses`); 0 where the harness recorded none."""
    failed = transcript.get("failed_responses") if type(transcript) is dict else None
    if type(failed) is not list or not failed:
        return 0
    return sum(1 for f in failed if type(f) is dict and f.get("status") == 429)


class _Plan(PlanSlots):
    """The header's plan (runfolder.PlanSlots, the check `run --resume` runs too), each checked
    line made a row."""

    def check(self, source: str, number: int, doc: Mapping[str, Any]) -> EpisodeRow:
        """One checked row; a line outside the header's plan, or a second scored line for one
        attempt, is a damaged folder (named `source:number` in the error)."""
        arm, seed, attempt = doc["arm_id"], doc["seed"], doc["attempt"]
        outcome, label = doc["outcome"], doc["strict_label"]
        spec = self.check_slot(source, number, arm, seed, attempt, doc["min_calls"], outcome)
        instrument = outcome in INSTRUMENT_OUTCOMES
        usage = doc.get("usage", _NOTHING)
        timing = doc.get("timing", _NOTHING)
        transcript = doc.get("transcript", _NOTHING)
        return EpisodeRow(
            arm_id=arm,
            knob=spec.knob,
            level=spec.level,
            control=spec.is_control,
            seed=seed,
            attempt=attempt,
            task_id=doc["task_id"],
            session=doc["session"],
            resumed=doc["resumed"],
            outcome=outcome,
            instrument=instrument,
            strict_pass=not instrument and label == "passed",
            leaky_pass=not instrument and doc["leaky_pass"],
            # the card's overshoot: reached every goal, then carried a record past it
            overshoot=not instrument and label == "overshoot" and doc["leaky_pass"],
            tool_calls=doc["tool_calls"],
            model_calls=doc["model_calls"],
            min_calls=doc["min_calls"],
            uncached_input_tokens=uncached_input(usage),
            cached_input_tokens=usage.get("cached_input_tokens"),
            completion_tokens=usage.get("completion_tokens"),
            reasoning_tokens=usage.get("reasoning_tokens"),
            provider_cost_usd=usage.get("provider_cost_usd"),
            episode_s=timing.get("episode_s"),
            model_s=timing.get("model_s"),
            harness_s=timing.get("harness_s"),
            setup_s=timing.get("setup_s"),
            estimated_tokens=usage.get("estimated_tokens"),
            context_overflow=doc.get("context_overflow", False),
            system_fingerprints=doc.get("system_fingerprints", []),
            malformed_clause=doc.get("malformed_clause"),
            text_calls=doc.get("unparsed_text_calls", 0),
            text_call_dialects=_dialects(transcript),
            first_request_tokens=usage.get("first_request_tokens"),
            first_request_pinned_tokens=usage.get("first_request_pinned_tokens"),
            rate_limited=_rate_limited(transcript),
        )


def episode_rows(
    lines: Iterable[tuple[int, Mapping[str, Any]]], header: RunHeader, source: str = EPISODES
) -> Iterator[EpisodeRow]:
    """Checked rows in file order from (line number, EpisodeLine fields); an attempt scored
    twice (not an instrument retry) is refused, and so is a line outside the header's plan."""
    plan = _Plan(header)
    for number, doc in lines:
        yield plan.check(source, number, doc)


def records_from_lines(
    lines: Iterable[tuple[int, EpisodeLine]], header: RunHeader, source: str = EPISODES
) -> list[EpisodeRecord]:
    """Records in file order; an attempt scored twice (not an instrument retry) is refused."""
    fields = ((number, line.model_dump()) for number, line in lines)
    return [EpisodeRecord.model_validate(vars(row)) for row in episode_rows(fields, header, source)]


def records_from_run(folder: Path | str) -> list[EpisodeRecord]:
    """Every episode of a run folder as a typed record, checked against the header's plan."""
    run = open_run(folder)
    rows = episode_rows(run.stream(), run.header)
    return [EpisodeRecord.model_validate(vars(row)) for row in rows]
