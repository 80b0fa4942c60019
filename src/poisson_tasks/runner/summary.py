"""What one session of a run did, and where its folder stands after it (`RunSummary`), and the
lines the command line prints for it (`summary_lines`)."""

from __future__ import annotations

import shlex
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from poisson_tasks.runfolder import StopReason
from poisson_tasks.runner.folder import resume_hint

LIMIT_STOPS: frozenset[str] = frozenset(
    {"token_budget", "dollar_budget", "wall_clock", "out_of_credit"}
)


class RunSummary(BaseModel):
    """What one session of a run did, and where the folder stands after it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    folder: str
    session: int
    shard: str | None = Field(default=None, description="i/n for a shard folder")
    stop_reason: StopReason
    detail: str | None = None
    planned: int = Field(description="episodes the plan holds (slots)")
    scored: int = Field(description="slots with a scored line, whole folder")
    written: int = Field(description="lines this session wrote")
    outcomes: dict[str, int] = Field(description="this session's lines by outcome")
    passed: int = Field(description="this session's strict passes")
    malformed_clause1: int = Field(description="this session's malformed calls on clause 1")
    no_tool_call: int = Field(description="this session's scored episodes with no tool call")
    instrument: int = Field(description="this session's instrument failures")
    abandoned: int = Field(description="episodes cut off in flight by a stop (not written)")
    retries: int
    tokens: int = Field(description="tokens over the whole folder")
    dollars: float | None = Field(description="spend over the whole folder; None without rates")
    seconds: float
    incomplete_arms: list[str] = Field(
        description="arms with a planned episode that has no line at all (as the card counts)"
    )
    unscored_arms: list[str] = Field(
        default_factory=list,
        description="arms with a slot whose only lines are instrument failures (--resume reruns)",
    )
    no_call_max: float = 0.10
    instrument_max: float = 0.02
    replay_of: str | None = Field(
        default=None, description="the run folder this session replayed a sample of"
    )
    replay: RunSummary | None = Field(
        default=None, description="the replay design.replay ran after the run (runner/replay.py)"
    )
    replay_waits: bool = Field(
        default=False,
        description="design.replay is declared but the run is not complete: no replay yet",
    )
    already_complete: bool = Field(
        default=False,
        description="a resume found every slot scored: nothing ran and no session was added",
    )

    @property
    def pending(self) -> int:
        return self.planned - self.scored

    @property
    def complete(self) -> bool:
        return self.pending == 0

    @property
    def scored_this_session(self) -> int:
        return self.written - self.instrument

    @property
    def limit_stop(self) -> bool:
        """A limit stopped the session (tokens, dollars, wall clock, out of credit)."""
        return self.stop_reason in LIMIT_STOPS

    @property
    def instrument_alarm(self) -> bool:
        """More than `thresholds.instrument_max` of this session's lines were instrument failures:
        the serving, not the model, decided the run, and its cells will be withheld."""
        return self.written > 0 and self.instrument > self.instrument_max * self.written

    @property
    def exit_code(self) -> int:
        """1 when an alarm rings (instrument failures over the limit, or format clause 1), 3 when a
        limit stopped the run before every planned episode had a line, 0 otherwise; a run whose
        own code is 0 takes its replay's."""
        if self.instrument_alarm or self.format_alarm:
            return 1
        if self.limit_stop and self.incomplete_arms:
            return 3
        return 0 if self.replay is None else self.replay.exit_code

    @property
    def format_alarm(self) -> bool:
        """More than the no-call share of this session's scored episodes broke format clause 1
        (tool-call arguments that are not JSON, or calls written as text): the model's result is
        recorded, but the run says so loudly, since it usually means a serving parser problem."""
        scored = self.scored_this_session
        return scored > 0 and self.malformed_clause1 > self.no_call_max * scored


def stopped_line(name: str, summary: RunSummary) -> str:
    """The line a signal-stopped session ends on: what it wrote and how to continue."""
    spend = f", ${summary.dollars:.4f}" if summary.dollars is not None else ""
    hint = (
        "every slot is scored"
        if summary.complete
        else f"continue with {resume_hint(Path(summary.folder))}"
    )
    return (
        f"stopped by {name}: {summary.written} episodes written this session ({summary.abandoned} abandoned "
        f"in flight, their spend recorded); {summary.scored}/{summary.planned} slots scored, "
        f"{summary.tokens:,} tokens{spend} in all; {hint}"
    )


def summary_lines(summary: RunSummary) -> list[str]:
    """The summary as the CLI prints it."""
    rate = (
        f"{summary.passed / summary.scored_this_session:.3f}"
        if summary.scored_this_session
        else "-"
    )
    spend = f", ${summary.dollars:.4f}" if summary.dollars is not None else ""
    what = "replay" if summary.replay_of else "run"
    if summary.already_complete:
        carded = summary.replay_of or summary.folder
        lines = [
            f"{what} {summary.folder}"
            + (f" (shard {summary.shard})" if summary.shard else "")
            + f" is complete already: {summary.scored}/{summary.planned} slots scored, "
            f"{summary.tokens:,} tokens{spend}; nothing ran and no session was added (its card: "
            f"poisson-tasks card {shlex.quote(carded)})"
        ]
        return lines + ([] if summary.replay is None else summary_lines(summary.replay))
    lines = [
        what
        + f" {summary.folder}"
        + (f" (shard {summary.shard})" if summary.shard else "")
        + f" session {summary.session}: {summary.stop_reason}"
        + (f" ({summary.detail})" if summary.detail else ""),
        f"  episodes   {summary.written} written this session ({summary.instrument} instrument failures, "
        f"{summary.abandoned} abandoned in flight); {summary.scored}/{summary.planned} slots scored",
        f"  strict     {summary.passed}/{summary.scored_this_session} passed ({rate}); "
        f"{summary.no_tool_call} with no tool call; {summary.retries} retries",
        f"  spend      {summary.tokens:,} tokens{spend}; {summary.seconds:.1f} s",
    ]
    if summary.incomplete_arms:
        lines.append(
            f"  incomplete {', '.join(summary.incomplete_arms)}; continue with "
            f"{resume_hint(Path(summary.folder))}"
        )
    if summary.unscored_arms:
        lines.append(
            f"  unscored   {', '.join(summary.unscored_arms)} hold slots whose only lines are "
            f"instrument failures; {resume_hint(Path(summary.folder))} runs them again"
        )
    if summary.replay_waits:
        lines.append(
            "  replay     design.replay runs once every slot is scored; continue with "
            f"{resume_hint(Path(summary.folder))}"
        )
    if summary.replay is not None:
        lines += summary_lines(summary.replay)
    return lines
