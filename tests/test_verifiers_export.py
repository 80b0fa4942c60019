"""The verifiers export's own reward and metrics on a finished trace (the `verifiers` extra).

The trace is built as the null harness records it (tests/test_nulltrace.py's null_trace), its
verdict written by the task's own `finalize` step (`verdict_info`), then scored by the task's
reward and metric methods as vf-eval calls them. CI runs this file in the verifiers step
(scripts/ci/verifiers-eval); without the extra it is skipped.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("verifiers", reason="needs the verifiers extra: pip install '.[verifiers]'")

from test_nulltrace import null_trace

from poisson_tasks.export.verifiers import (
    PoissonTask,
    PoissonTaskset,
    PoissonTasksetConfig,
)
from poisson_tasks.generator import generate
from poisson_tasks.runner.nulltrace import TRACE_INFO_KEY, verdict_info


def _task(arm: str) -> PoissonTask:
    config = PoissonTasksetConfig(id="poisson-tasks-verifiers", arms=[arm], tasks=1)
    (task,) = PoissonTaskset(config).load()
    return task


def _scored(arm: str, control: str) -> tuple[float, dict[str, float]]:
    task = _task(arm)
    bundle = generate(task.data.arm_id, task.data.seed)
    info = verdict_info(bundle, null_trace(bundle, bundle.negative_controls[control].turns))
    trace: Any = SimpleNamespace(info={TRACE_INFO_KEY: info})
    return asyncio.run(task.strict(trace)), asyncio.run(task.episode(trace))


def test_the_strict_reward_is_the_strict_reading_on_a_leaky_arm() -> None:
    """An overshoot passes a /leaky arm's own reading and fails the strict one: the reward named
    strict says 0.0, and the arm's own reading is the metric arm_pass."""
    reward, metrics = _scored("depth:d3/leaky", "overshoot")
    assert reward == 0.0
    assert metrics["arm_pass"] == 1.0 and metrics["leaky_pass"] == 1.0
    assert "strict" not in metrics


def test_on_a_strict_arm_the_reward_and_the_arms_reading_agree() -> None:
    reward, metrics = _scored("depth:d3", "overshoot")
    assert (reward, metrics["arm_pass"], metrics["leaky_pass"]) == (0.0, 0.0, 1.0)
