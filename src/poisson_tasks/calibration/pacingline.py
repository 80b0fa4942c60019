"""The card's pacing line: the pacing each session ran under and the 429s the study met.

A card whose run recorded no pacing (made before pacing existed, as the published reference cards
were) has no such line. docs/reading-a-card.md reads it; runner/pacing.py is what it describes.
"""

from __future__ import annotations

from poisson_tasks.calibration.artifact import RateLimited
from poisson_tasks.calibration.provenance import Provenance
from poisson_tasks.runfolder import PacingRecord

_QUANTITY = {
    "requests": "requests",
    "tokens": "tokens",
    "tokens_usage_based": "tokens (usage-based)",
}


def _stated(stated: dict[str, int]) -> str:
    parts = [f"{limit:,} {_QUANTITY.get(name, name)}" for name, limit in stated.items()]
    return " and ".join(parts) + " a minute"


def _times(count: int) -> str:
    return "once" if count == 1 else f"{count:,} times"


def pacing_text(record: PacingRecord, harness: str) -> str:
    """One session's pacing in words."""
    if record.pace == "off":
        return "off (execution.pace: off): requests went out at the concurrency alone"
    if "null harness" in harness:
        return (
            "by rate-limit headers, not applied: the verifiers-null harness sends its own requests"
        )
    if record.applied is None:
        return "by rate-limit headers; what it did was not recorded (the session did not close)"
    if not record.applied:
        return "by rate-limit headers, not applied: the endpoint stated no rate limit"
    changed = (
        f"; the stated limit changed {_times(record.limit_changes)}" if record.limit_changes else ""
    )
    if record.slowdowns:
        changed += f"; it slowed down {_times(record.slowdowns)} after a 429"
    return (
        f"by the endpoint's rate-limit headers, last stated {_stated(record.stated)}{changed}; "
        f"{record.held:,} requests held before sending, {record.held_s:.1f} s in all"
    )


def pacing_lines(provenance: Provenance, rate_limited: RateLimited | None) -> list[str]:
    """The provenance list's pacing line (none when the run recorded no pacing)."""
    sessions = [s for s in provenance.sessions if s.pacing is not None]
    if rate_limited is None or not sessions:
        return []
    texts = [pacing_text(s.pacing, provenance.harness) for s in sessions if s.pacing is not None]
    if len(set(texts)) == 1:
        said = texts[0]
    else:
        said = "; ".join(f"session {s.index}: {t}" for s, t in zip(sessions, texts, strict=True))
    return [f"- pacing: {said}; {met(rate_limited)}"]


def met(rate_limited: RateLimited) -> str:
    """The 429s the study's episodes met, in words."""
    responses, episodes = rate_limited.responses, rate_limited.episodes
    if responses == 0:
        return "no response was 429 (rate limited)"
    were = "response was" if responses == 1 else "responses were"
    return (
        f"{responses:,} {were} 429 (rate limited), in {episodes:,} episode{'s' * (episodes != 1)}"
    )
