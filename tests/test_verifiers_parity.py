"""Parity: the native loop and the verifiers null harness give the same episodes.

The same pre-registration is run twice against the same reference endpoint, once with
`design.harness: native` and once with `verifiers-null` (the one-line eval, vf-eval, in a child
process), and every slot's tool-call sequence, verdict and final ledger must agree. The cases cover
5 seeds of one level of every knob and of every control arm (oracle, which sees seeded histories and
planned faults), overshooting, malformed tool-call JSON, a tool call written as text, plain-text
replies, the turn limit and a provider that fails every request. A call naming no tool of the
block is covered in test_nulltrace.py (no reference policy makes one).

Every push runs a seeded subset: each case runs one shard of SEEDS shards (runner/shard.py: every
arm of the case at one of its seeds, so every knob and control arm is still covered), the shard
drawn per case by random.Random(PARITY_SEED); the test ids name it and the test prints the seeds.
POISSON_TASKS_PARITY=full runs every slot of every case (docs/verifiers-export.md).

Needs the verifiers extra (marker `verifiers`; CI step scripts/ci/verifiers-parity). Each case
is one vf-eval process; its rollouts run concurrently.
"""

from __future__ import annotations

import asyncio
import os
import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from poisson_tasks.arms import CONTROL_ARMS, KNOBS, all_arms, arm_id, parse_arm_id
from poisson_tasks.bundle import ToolCall
from poisson_tasks.generator import generate
from poisson_tasks.prereg import load_preregistration
from poisson_tasks.reference import ReferenceServer, start_reference_server
from poisson_tasks.runfolder import EpisodeLine, iter_episodes
from poisson_tasks.runner import run_plan
from poisson_tasks.runner.shard import Shard, shard_slots
from poisson_tasks.verifier import INSTRUMENT_OUTCOMES, verify

pytest.importorskip("verifiers", reason="needs the verifiers extra: pip install '.[verifiers]'")
pytestmark = pytest.mark.verifiers

SEEDS = 5
CONCURRENCY = 16
PARITY_SEED = 20  # draws the subset each push runs; fixed, so every push runs the same one
FULL = os.environ.get("POISSON_TASKS_PARITY", "subset") == "full"


def one_level(knob: str) -> str:
    """A level of the knob past its first (the first is often the easy end)."""
    levels = [a for a in all_arms(knob) if a.control is None]
    return arm_id(levels[min(1, len(levels) - 1)])


EVERY_KNOB = [one_level(k) for k in KNOBS] + [a for k in KNOBS for a in CONTROL_ARMS[k]]

# (case, model, arms, slack, turn limit or None for the default 32)
CASES: list[tuple[str, str, list[str], int, int | None]] = [
    ("every-knob-and-control", "oracle", EVERY_KNOB, 4, None),
    ("overshoot", "overshoot", ["depth:d3"], 4, None),
    ("malformed-json", "garbage", ["depth:d2"], 0, None),
    ("text-call", "text-call", ["depth:d2"], 4, None),
    ("plain-text", "no-call", ["depth:d2"], 4, None),
    ("turn-limit", "overshoot", ["depth:d1"], 0, 0),
    ("provider-fails", "flaky?p_500=1&p_429=0&p_slow=0", ["depth:d1"], 4, None),
]


def _subset() -> list[Shard | None]:
    """Per case, the shard every push runs (one task of each arm); None runs the whole case."""
    draw = random.Random(PARITY_SEED)
    shards = [Shard(draw.randrange(SEEDS), SEEDS) for _ in CASES]
    return [None if FULL else shard for shard in shards]


SUBSET = _subset()
PARAMS = [(*case, shard) for case, shard in zip(CASES, SUBSET, strict=True)]
IDS = [
    f"{c[0]}-shard{s.index}of{s.count}" if s else c[0] for c, s in zip(CASES, SUBSET, strict=True)
]


@pytest.fixture(scope="module")
def server() -> Any:
    with start_reference_server(process=True) as s:
        yield s


def _prereg(
    tmp: Path,
    name: str,
    model: str,
    arms: list[str],
    slack: int,
    limit: int | None,
    harness: str,
    base_url: str,
) -> Path:
    horizon = max(parse_arm_id(a).max_turns(slack) for a in arms)
    design: dict[str, Any] = {
        "arms": arms,
        "tasks": SEEDS,
        "attempts": 1,
        "seed_string": "parity",
        "slack": slack,
        "horizon": horizon,
        "turn_limit": horizon if limit == 0 else (limit or 32),
        "harness": harness,
    }
    doc = {
        "format": "poisson-tasks/preregistration@1",
        "name": f"{name}-{harness}",
        "model": {"provider": "reference", "model": model, "base_url": base_url},
        "decoding": {
            "temperature": 1.0,
            "top_p": 1.0,
            "reasoning_effort": "low",
            "max_completion_tokens": 2048,
        },
        "design": design,
        "budget": {"tokens": 500_000_000, "wall_clock_s": 900},
        "execution": {
            "concurrency": CONCURRENCY,
            "max_retries": 1,
            "backoff_s": 0.001,
            "backoff_max_s": 0.01,
        },
    }
    path = tmp / f"{name}-{harness}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _calls(line: EpisodeLine) -> list[list[tuple[str, Any, Any]]]:
    return [
        [(c["name"], c["arguments"], c.get("raw_arguments")) for c in turn]
        for turn in line.transcript["tool_calls"]
    ]


def _final_ledger(line: EpisodeLine) -> list[Any]:
    bundle = generate(line.arm_id, line.seed)
    turns = [
        [ToolCall(name=n, arguments=a, raw_arguments=r) for n, a, r in t] for t in _calls(line)
    ]
    v = verify(bundle, turns, line.outcome != "turn_limit", line.outcome == "turn_limit")
    return [list(r) for r in v.final_state]


def test_the_subset_covers_every_arm_of_every_case(tmp_path: Path) -> None:
    """Each drawn shard holds every arm of its case (so every knob and control arm) once."""
    for (case, model, arms, slack, limit), shard in zip(CASES, SUBSET, strict=True):
        path = _prereg(tmp_path, case, model, arms, slack, limit, "native", "http://127.0.0.1:1/v1")
        plan = load_preregistration(path)
        slots = plan.slots() if shard is None else shard_slots(plan, shard)
        assert sorted({s.arm_id for s in slots}) == sorted(arms), case
        assert len(slots) == len(arms) * (SEEDS if shard is None else 1), case


@pytest.mark.parametrize(("case", "model", "arms", "slack", "limit", "shard"), PARAMS, ids=IDS)
def test_both_harnesses_give_the_same_episodes(
    case: str,
    model: str,
    arms: list[str],
    slack: int,
    limit: int | None,
    shard: Shard | None,
    server: ReferenceServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    folders = {}
    expected_slots: set[tuple[str, int, int]] = set()
    for harness in ("native", "verifiers-null"):
        path = _prereg(tmp_path, case, model, arms, slack, limit, harness, server.base_url)
        folder = tmp_path / harness
        plan = load_preregistration(path)
        slots = plan.slots() if shard is None else shard_slots(plan, shard)
        expected_slots = {(s.arm_id, s.seed, s.attempt) for s in slots}
        asyncio.run(run_plan(plan, folder, show_progress=False, shard=shard))
        folders[harness] = {(ln.arm_id, ln.seed, ln.attempt): ln for ln in iter_episodes(folder)}
    with capsys.disabled():
        which = (
            "every seed" if shard is None else f"shard {shard.label} (PARITY_SEED {PARITY_SEED})"
        )
        seeds = sorted({seed for _, seed, _ in expected_slots})
        print(f"\nparity {case}: {which}: {len(expected_slots)} slots, seeds {seeds}")
    native, null = folders["native"], folders["verifiers-null"]
    assert set(native) == set(null) == expected_slots
    for slot, a in native.items():
        b = null[slot]
        where = f"{case} {slot}"
        assert (a.outcome, a.strict_label, a.passed, a.leaky_pass, a.malformed_clause) == (
            b.outcome,
            b.strict_label,
            b.passed,
            b.leaky_pass,
            b.malformed_clause,
        ), f"{where}: {a.outcome} vs {b.outcome} ({b.error})"
        if a.outcome in INSTRUMENT_OUTCOMES:
            continue
        assert _calls(a) == _calls(b), where
        assert (a.tool_calls, a.model_calls, a.goal_stages) == (
            b.tool_calls,
            b.model_calls,
            b.goal_stages,
        ), where
        assert _final_ledger(a) == _final_ledger(b), where
    outcomes = {ln.outcome for ln in native.values()}
    expected = {
        "every-knob-and-control": {"passed"},
        "overshoot": {"overshoot"},
        "malformed-json": {"malformed_call"},
        "text-call": {"malformed_call"},
        "plain-text": {"wrong_state"},
        "turn-limit": {"turn_limit"},
        "provider-fails": {"api_error"},
    }[case]
    assert outcomes == expected, f"{case}: the case did not exercise what it is for: {outcomes}"
