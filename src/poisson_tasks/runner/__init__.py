"""The runner: a pre-registered study run against a model endpoint into a run folder.

`run_preregistration(path_or_plan, out_dir, resume=False) -> RunSummary` is the entry point the CLI
(`poisson-tasks run`) and study.run_study call; `run_plan` is its async form.
"""

from __future__ import annotations

from poisson_tasks.runner.folder import default_run_folder
from poisson_tasks.runner.preflight import check_plan_pins
from poisson_tasks.runner.request import RunRequest, session_request
from poisson_tasks.runner.run import (
    replay_run,
    run_plan,
    run_preregistration,
    run_request,
)
from poisson_tasks.runner.summary import RunSummary, summary_lines

__all__ = [
    "RunRequest",
    "RunSummary",
    "check_plan_pins",
    "default_run_folder",
    "replay_run",
    "run_plan",
    "run_preregistration",
    "run_request",
    "session_request",
    "summary_lines",
]
