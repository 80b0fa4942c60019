"""Per-episode records: a finished run folder read into typed rows a card is computed from.

One record per episode line. Tokens follow the run folder's convention: `prompt_tokens` is the
uncached input, `cached_input_tokens` the cached input, and `completion_tokens` already holds the
reasoning tokens, so an episode's tokens are prompt + cached input + completion and nothing else.
"""

from __future__ import annotations

import gzip
import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from pydantic import BaseModel, ConfigDict, Field

from poisson_tasks.arms import ArmSpec, Knob, parse_arm_id
from poisson_tasks.errors import ArmError, RunFolderError
from poisson_tasks.runfolder import EPISODES, EpisodeLine, RunHeader, read_header
from poisson_tasks.verifier import INSTRUMENT_OUTCOMES, Outcome

EPISODES_GZ = EPISODES + ".gz"

__all__ = [
    "EPISODES_GZ",
    "EpisodeRecord",
    "episode_lines",
    "records_from_lines",
    "records_from_run",
    "records_sha256",
]


class EpisodeRecord(BaseModel):
    """One episode as a card reads it: who, how it ended, what it cost, how long it took."""

    model_config = ConfigDict(frozen=True, extra="forbid")

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
    prompt_tokens: int | None
    cached_input_tokens: int | None
    completion_tokens: int | None
    reasoning_tokens: int | None
    provider_cost_usd: float | None
    episode_s: float | None
    model_s: float | None
    harness_s: float | None
    setup_s: float | None
    estimated_tokens: int | None = None
    context_overflow: bool = False
    system_fingerprints: list[str | None] = Field(default_factory=list)

    @property
    def tokens(self) -> int | None:
        """Prompt + cached input + completion; None unless prompt and completion were reported."""
        if self.prompt_tokens is None or self.completion_tokens is None:
            return None
        return self.prompt_tokens + (self.cached_input_tokens or 0) + self.completion_tokens

    @property
    def no_tool_call(self) -> bool:
        return self.tool_calls == 0

    @property
    def stopped_short(self) -> bool:
        """At least one tool call but fewer than the task's minimum (disjoint from no tool call)."""
        return 0 < self.tool_calls < self.min_calls


def _lines(fh: BinaryIO) -> Iterator[tuple[int, bytes]]:
    """Complete lines with their numbers; a torn last line (a kill mid-write) is never read."""
    for number, raw in enumerate(fh, start=1):
        if not raw.endswith(b"\n"):
            return
        yield number, raw


def _episodes_path(folder: Path) -> Path | None:
    plain, packed = folder / EPISODES, folder / EPISODES_GZ
    if plain.exists():
        return plain
    return packed if packed.exists() else None


def _open(path: Path) -> BinaryIO:
    if path.name.endswith(".gz"):
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return path.open("rb")


def episode_lines(folder: Path) -> Iterator[tuple[int, EpisodeLine]]:
    """(line number, episode) for every complete line of episodes.jsonl or episodes.jsonl.gz."""
    path = _episodes_path(folder)
    if path is None:
        return
    try:
        with _open(path) as fh:
            for number, raw in _lines(fh):
                try:
                    yield number, EpisodeLine.model_validate_json(raw)
                except ValueError as exc:
                    first = str(exc).splitlines()[0]
                    raise RunFolderError(
                        f"{path}:{number} is not an episode line: {first}"
                    ) from exc
    except (OSError, EOFError) as exc:  # a damaged gzip stream
        raise RunFolderError(f"{path} cannot be read: {exc}") from exc


def records_sha256(folder: Path) -> str:
    """SHA-256 of the episode lines' bytes as read (uncompressed, complete lines only)."""
    hasher = hashlib.sha256()
    path = _episodes_path(folder)
    if path is not None:
        try:
            with _open(path) as fh:
                for _, raw in _lines(fh):
                    hasher.update(raw)
        except (OSError, EOFError) as exc:
            raise RunFolderError(f"{path} cannot be read: {exc}") from exc
    return hasher.hexdigest()


class _Plan:
    """The header's plan as lookups, with each arm id parsed once."""

    def __init__(self, header: RunHeader) -> None:
        self.seeds = frozenset(header.seeds)
        self.attempts = header.attempts
        self.specs: dict[str, ArmSpec] = {}
        for arm in header.arms:
            try:
                self.specs[arm] = parse_arm_id(arm)
            except ArmError as exc:
                raise RunFolderError(f"run.json: arms: {exc}") from exc


def _record(where: str, line: EpisodeLine, plan: _Plan) -> EpisodeRecord:
    """One checked record; a line outside the header's plan is a damaged folder."""
    spec = plan.specs.get(line.arm_id)
    if spec is None:
        raise RunFolderError(f"{where}: arm {line.arm_id!r} is not in run.json's plan")
    if line.seed not in plan.seeds:
        raise RunFolderError(f"{where}: seed {line.seed} is not in run.json's seed list")
    if not 0 <= line.attempt < plan.attempts:
        raise RunFolderError(
            f"{where}: attempt {line.attempt} is outside 0..{plan.attempts - 1} "
            f"(attempts are numbered from 0; the plan has {plan.attempts})"
        )
    if line.min_calls != spec.min_calls:
        raise RunFolderError(
            f"{where}: min_calls {line.min_calls} disagrees with {line.arm_id}'s {spec.min_calls}"
        )
    instrument = line.outcome in INSTRUMENT_OUTCOMES
    return EpisodeRecord(
        arm_id=line.arm_id,
        knob=spec.knob,
        level=spec.level,
        control=spec.is_control,
        seed=line.seed,
        attempt=line.attempt,
        task_id=line.task_id,
        session=line.session,
        resumed=line.resumed,
        outcome=line.outcome,
        instrument=instrument,
        strict_pass=not instrument and line.strict_label == "passed",
        leaky_pass=not instrument and line.leaky_pass,
        overshoot=not instrument and line.strict_label == "overshoot",
        tool_calls=line.tool_calls,
        model_calls=line.model_calls,
        min_calls=line.min_calls,
        prompt_tokens=line.usage.prompt_tokens,
        cached_input_tokens=line.usage.cached_input_tokens,
        completion_tokens=line.usage.completion_tokens,
        reasoning_tokens=line.usage.reasoning_tokens,
        provider_cost_usd=line.usage.provider_cost_usd,
        episode_s=line.timing.episode_s,
        model_s=line.timing.model_s,
        harness_s=line.timing.harness_s,
        setup_s=line.timing.setup_s,
        estimated_tokens=line.usage.estimated_tokens,
        context_overflow=line.context_overflow,
        system_fingerprints=list(line.system_fingerprints),
    )


def records_from_lines(
    lines: Iterator[tuple[int, EpisodeLine]], header: RunHeader, source: str = EPISODES
) -> list[EpisodeRecord]:
    """Records in file order; an attempt scored twice (not an instrument retry) is refused."""
    out: list[EpisodeRecord] = []
    scored: dict[tuple[str, int, int], int] = {}
    plan = _Plan(header)
    for number, line in lines:
        where = f"{source}:{number}"
        rec = _record(where, line, plan)
        if not rec.instrument:
            key = (rec.arm_id, rec.seed, rec.attempt)
            if key in scored:
                raise RunFolderError(
                    f"{where}: {rec.arm_id} seed {rec.seed} attempt {rec.attempt} was already "
                    f"scored at line {scored[key]}; an attempt is run once (only an instrument "
                    "failure may be retried)"
                )
            scored[key] = number
        out.append(rec)
    return out


def records_from_run(folder: Path | str) -> list[EpisodeRecord]:
    """Every episode of a run folder as a typed record, checked against the header's plan."""
    path = Path(folder)
    header = read_header(path)
    return records_from_lines(episode_lines(path), header)
