"""The card's Reproducibility section: a run's replayed sample set beside the run's own episodes.

`poisson-tasks replay` (runner/replay.py) runs a seeded sample of a run's scored slots again into
RUN_DIR/replay/. Each replayed slot's scored line is paired with the run's scored line of the same
slot and compared four ways: an identical transcript (every message's bytes, tool-call ids left
out), the same tool calls, the same verdict, a different verdict; each count gets the card's rate
interval with the task as the cluster (calibration/intervals.py, the one definition). The first
difference is located by model call and kind (`call`, `text`, `end`). Pin N10 compares the run's
serving with the replay's (servingpin.compare_serving, the one comparison); when it did not hold,
the replay is not a like-for-like re-run and the card says so. docs/reproducibility.md says how to
read the section.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from poisson_tasks.calibration.artifact import FirstDifference, ReplayShare, Reproducibility
from poisson_tasks.calibration.intervals import rate_interval
from poisson_tasks.prereg import Thresholds
from poisson_tasks.runfolder import REPLAY, RunHeader, is_run_folder, open_run
from poisson_tasks.seeding import replay_seed_phrase
from poisson_tasks.servingpin import N10_FIELDS, ServingFacts, compare_serving, session_facts
from poisson_tasks.verifier import INSTRUMENT_OUTCOMES

__all__ = [
    "ReplaySide",
    "compare_episodes",
    "first_difference",
    "flip_reading",
    "measure_replay",
    "same_messages",
]

SlotKey = tuple[str, int, int]
Kind = Literal["call", "text", "end"]


def _key(doc: Mapping[str, Any]) -> SlotKey:
    return (str(doc["arm_id"]), int(doc["seed"]), int(doc["attempt"]))


def _scored(doc: Mapping[str, Any]) -> bool:
    return doc.get("outcome") not in INSTRUMENT_OUTCOMES


def _without_ids(message: Mapping[str, Any]) -> dict[str, Any]:
    """A message less the ids a server draws for its tool calls (random on vLLM, say)."""
    out = {k: v for k, v in message.items() if k != "tool_call_id"}
    calls = out.get("tool_calls")
    if isinstance(calls, list):
        out["tool_calls"] = [
            {k: v for k, v in c.items() if k != "id"} if isinstance(c, Mapping) else c
            for c in calls
        ]
    return out


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _messages(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    transcript = doc.get("transcript") or {}
    messages = transcript.get("messages") or []
    return [_without_ids(m) for m in messages if isinstance(m, Mapping)]


def same_messages(first: Mapping[str, Any], other: Mapping[str, Any]) -> bool:
    """Whether two episode lines' transcripts have the same bytes, tool-call ids left out."""
    return _canonical(_messages(first)) == _canonical(_messages(other))


def _opening(doc: Mapping[str, Any]) -> int:
    """How many messages the episode opened with (system, user, and on a control or history arm
    the seeded calls and answers): its first request's size, as the transcript records it."""
    transcript = doc.get("transcript") or {}
    opening = transcript.get("opening_messages")
    if not isinstance(opening, int):
        sizes = transcript.get("request_messages") or [0]
        opening = sizes[0] if isinstance(sizes[0], int) else 0
    return max(0, opening)


def _replies(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The model's own replies: the assistant messages after the opening ones (a seeded history's
    assistant turns are the task's, not model calls)."""
    return [m for m in _messages(doc)[_opening(doc) :] if m.get("role") == "assistant"]


def first_difference(first: Mapping[str, Any], other: Mapping[str, Any]) -> tuple[int, Kind] | None:
    """The model call (from 1) at which two transcripts first differ and what differed there
    (`call`: the calls; `text`: the reply's text, the calls the same; `end`: one episode ended
    where the other went on), or None when their transcripts are the same."""
    if same_messages(first, other):
        return None
    mine, theirs = _replies(first), _replies(other)
    for turn, (one, two) in enumerate(zip(mine, theirs, strict=False), start=1):
        if _canonical(one.get("tool_calls") or []) != _canonical(two.get("tool_calls") or []):
            return turn, "call"
        if _canonical(one.get("content")) != _canonical(two.get("content")):
            return turn, "text"
    return min(len(mine), len(theirs)) + 1, "end"


@dataclass(frozen=True, slots=True)
class Pair:
    """How one replayed episode compares with the run's episode of the same slot."""

    identical: bool
    same_calls: bool
    same_verdict: bool
    pass_flip: bool
    first: tuple[int, Kind] | None


def compare_episodes(run: Mapping[str, Any], replay: Mapping[str, Any]) -> Pair:
    """The four comparisons of one slot's run line and replay line, and the first difference."""
    calls = (run.get("transcript") or {}).get("tool_calls")
    again = (replay.get("transcript") or {}).get("tool_calls")
    return Pair(
        identical=same_messages(run, replay),
        same_calls=_canonical(calls) == _canonical(again),
        same_verdict=run.get("outcome") == replay.get("outcome"),
        pass_flip=bool(run.get("passed")) != bool(replay.get("passed")),
        first=first_difference(run, replay),
    )


def _share(pairs: Sequence[tuple[SlotKey, bool]], confidence: float) -> ReplayShare:
    """A count of replayed episodes, its share, and the rate interval over tasks."""
    by_task: dict[tuple[str, int], list[int]] = {}
    for (arm, seed, _), hit in pairs:
        counts = by_task.setdefault((arm, seed), [0, 0])
        counts[0] += int(hit)
        counts[1] += 1
    count = sum(int(hit) for _, hit in pairs)
    interval = rate_interval(
        [c[0] for c in by_task.values()], [c[1] for c in by_task.values()], confidence
    )
    return ReplayShare(
        count=count,
        share=round(count / len(pairs), 6),
        low=round(interval.low, 6),
        high=round(interval.high, 6),
    )


def _facts(facts: ServingFacts) -> dict[str, str]:
    return {label: facts.value(name) for name, label in N10_FIELDS}


def flip_reading(flips: ReplayShare, resolution: float, like_for_like: bool) -> str:
    """The one sentence on what the flip rate means for reading the card's comparisons."""
    bound = (
        f"{flips.share:.3f} of the replayed episodes (up to {flips.high:.3f} at the interval's top)"
    )
    served = (
        ""
        if like_for_like
        else " The replay was served otherwise than the run, so this mixes the serving's change "
        "with its nondeterminism."
    )
    if flips.count == 0 and flips.high >= resolution:
        return (
            f"No replayed episode changed its verdict, but so few replays bound the flip rate only "
            f"below {flips.high:.3f}, not clearly below the {resolution:g} the design needs before "
            "it calls two levels different: replay more slots to show that the serving's "
            f"nondeterminism alone cannot make a called difference.{served}"
        )
    if flips.high < resolution:
        return (
            f"A re-run changed the verdict of {bound}, so a level's pass rate moves between two "
            f"runs by about that much at most, below the {resolution:g} the design needs before it "
            "calls two levels different: the serving's nondeterminism alone does not make a "
            f"called difference.{served}"
        )
    return (
        f"A re-run changed the verdict of {bound}, so a level's pass rate can move between two "
        f"runs by about that much, not clearly below the {resolution:g} the design needs before "
        "it calls two levels different: a called difference near that size may be the "
        f"serving's nondeterminism, not the level.{served}"
    )


@dataclass
class ReplaySide:
    """A run folder's replay, read for its card: the sampled slots, the replay's scored lines,
    and the run's scored lines of the same slots as the card's one pass hands them over."""

    folder: Path
    header: RunHeader
    lines: dict[SlotKey, Mapping[str, Any]]
    records_sha256: str
    run_lines: dict[SlotKey, Mapping[str, Any]] = field(default_factory=dict)

    @classmethod
    def open(cls, run_dir: Path) -> ReplaySide | None:
        """The replay in RUN_DIR/replay/, read whole (its lines are few), or None when there is
        none: the card then says "not replayed"."""
        folder = run_dir / REPLAY
        if not is_run_folder(folder):
            return None
        replay = open_run(folder)
        if replay.header.replay is None:
            return None
        stream = replay.stream()
        lines = {_key(doc): doc for _, doc in stream if _scored(doc)}
        return cls(folder, replay.header, lines, stream.sha256)

    def keep(self, number: int, doc: Mapping[str, Any]) -> None:
        """An observer for the card's pass over the run: keeps the run's scored line of every
        replayed slot."""
        if _scored(doc):
            key = _key(doc)
            if key in self.lines:
                self.run_lines[key] = doc

    def measure(self, run: RunHeader, thresholds: Thresholds) -> Reproducibility:
        """The section's figures: the pairs compared, counted with intervals, and N10 compared."""
        assert self.header.replay is not None
        record = self.header.replay
        keys = [key for key in (tuple(slot) for slot in record.slots) if key in self.lines]
        ordered = [
            (key, compare_episodes(self.run_lines[key], self.lines[key]))
            for key in keys
            if key in self.run_lines
        ]
        confidence = thresholds.confidence
        run_facts = session_facts(run)[0]
        replay_facts = session_facts(self.header)
        differences: list[str] = []
        for index, facts in enumerate(replay_facts):
            change = compare_serving(run_facts, facts)
            if not change.held:
                where = f"replay session #{index}: " if len(replay_facts) > 1 else ""
                differences.append(where + change.describe())
        empty = ReplayShare(count=0, share=0.0, low=0.0, high=1.0)
        flips = (
            _share([(key, not pair.same_verdict) for key, pair in ordered], confidence)
            if ordered
            else empty
        )
        firsts = Counter(pair.first for _, pair in ordered if pair.first is not None)
        decoding, model = (run.preregistration.get(k) for k in ("decoding", "model"))
        provider = model.get("provider") if isinstance(model, dict) else None
        derived = isinstance(decoding, dict) and decoding.get("seed") == "derived"
        return Reproducibility(
            sample=record.sample,
            seed=record.seed,
            rule=record.rule,
            seeds=replay_seed_phrase(provider, derived),
            scored_in_run=record.scored,
            replayed=len(ordered),
            not_yet_replayed=record.sample - len(ordered),
            identical_transcript=_share(
                [(key, pair.identical) for key, pair in ordered], confidence
            )
            if ordered
            else empty,
            same_tool_calls=_share([(key, pair.same_calls) for key, pair in ordered], confidence)
            if ordered
            else empty,
            same_verdict=_share([(key, pair.same_verdict) for key, pair in ordered], confidence)
            if ordered
            else empty,
            different_verdict=flips,
            pass_flips=sum(pair.pass_flip for _, pair in ordered),
            first_differences=[
                FirstDifference(turn=turn, kind=kind, episodes=n)
                for (turn, kind), n in sorted(firsts.items())
            ],
            resolution=thresholds.resolution,
            run_serving=_facts(run_facts),
            replay_serving=_facts(replay_facts[0]),
            serving_differences=differences,
            replay_records_sha256=self.records_sha256,
            reading=flip_reading(flips, thresholds.resolution, not differences) if ordered else "",
        )


def measure_replay(run_dir: Path | str) -> Reproducibility | None:
    """The Reproducibility section of a run folder's replay (None when it has none), read in one
    pass over the run's lines without building the rest of the card."""
    folder = Path(run_dir)
    replay = ReplaySide.open(folder)
    if replay is None:
        return None
    run = open_run(folder)
    for number, doc in run.stream():
        replay.keep(number, doc)
    return replay.measure(run.header, run.thresholds)
