"""A session's alarms as the lines `run` and `replay` print (one `error:` line each).

An alarm rings when the serving side, not the model, decided a session: more than
thresholds.instrument_max of its lines failed on the instrument's side, or more than the no-call
share of its scored episodes broke format clause 1. The exit status (RunSummary.exit_code) is 1
either way; these are the words beside it, written once for every verb that runs episodes.
"""

from __future__ import annotations

from poisson_tasks.nouns import counted
from poisson_tasks.runner.summary import RunSummary

__all__ = ["alarm_lines"]


def alarm_lines(summary: RunSummary) -> list[str]:
    """One line per alarm of the session (and of the replay a pre-registration ran after it),
    without the `error: ` prefix, which the CLI adds."""
    what = f"the replay in {summary.folder}" if summary.replay_of else summary.folder
    lines = []
    if summary.format_alarm:
        lines.append(
            f"{summary.malformed_clause1} of {counted(summary.scored_this_session, 'scored episode')}"
            " broke format clause 1 (tool-call arguments that are not JSON, or calls written as "
            f"text); they are recorded as malformed_call in {what}: check the server's tool parser"
        )
    if summary.instrument_alarm:
        again = (
            "check the server, then the same `poisson-tasks replay "
            f"{summary.replay_of}` (its --sample and --seed) runs them again"
            if summary.replay_of
            else "their cells will be withheld: check the server, then poisson-tasks run --resume "
            f"{summary.folder} runs them again"
        )
        outcomes = ", ".join(f"{k} {v}" for k, v in summary.outcomes.items())
        lines.append(
            f"{summary.instrument} of {counted(summary.written, 'episode')} this session failed on "
            f"the instrument's side (above thresholds.instrument_max {summary.instrument_max:g}: "
            f"{outcomes}); {again}"
        )
    if summary.replay is not None:
        lines += alarm_lines(summary.replay)
    return lines
