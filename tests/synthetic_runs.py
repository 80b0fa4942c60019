"""Synthetic run folders written through poisson_tasks.runfolder, with outcomes chosen by the test.

Nothing here is a model's result: every figure a card computes from these folders is synthetic
and exists to check the card's arithmetic against a hand computation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from poisson_tasks.arms import parse_arm_id
from poisson_tasks.bundle import digest
from poisson_tasks.prereg import Thresholds, seed_list_hash
from poisson_tasks.runfolder import (
    EPISODES,
    EpisodeLine,
    RunHeader,
    ServingRecord,
    Session,
    Timing,
    Usage,
    append_episode,
    write_header,
)
from poisson_tasks.verifier import LEAKY_PASSES, Outcome

PUBLISHED_ARMS = (
    "depth:d1",
    "depth:d2",
    "depth:d3",
    "depth:d5",
    "depth:d8",
    "depth:d1+h8",
    "depth:d2+h5",
    "distractor:r0@k16",
    "distractor:r2@k16",
    "distractor:r4@k16",
    "distractor:r8@k16",
    "distractor:r14@k16",
    "distractor:r0+len(r8)@k16",
    "distractor:r2+len(r14)@k16",
)
DECODING = {
    "extra_body": {},
    "max_completion_tokens": 2048,
    "reasoning_effort": "low",
    "temperature": 1.0,
    "top_p": 1.0,
}
FAKE_HASH = "f" * 64
FAKE_ENGINE_HASH = "e" * 64


def header(
    arms: Sequence[str],
    seeds: Sequence[int],
    attempts: int,
    *,
    generator_hash: str = FAKE_HASH,
    provider: str = "openai",
    model: str = "synthetic-model",
    rates: dict[str, Any] | None = None,
    serving: dict[str, Any] | ServingRecord | None = None,
    decoding: dict[str, Any] | None = None,
    thresholds: Thresholds | None = None,
    sessions: Sequence[str] = ("complete",),
    concurrency: int | None = 4,
) -> RunHeader:
    """A run header laid out as the runner writes one (preregistration = the Preregistration's
    JSON form, serving = what the endpoint reported), with fixed fake hashes so a card made from
    it does not depend on the install."""
    strictness = "leaky" if any(a.endswith("/leaky") for a in arms) else "strict"
    prereg = {
        "format": "poisson-tasks/preregistration@1",
        "name": "synthetic",
        "description": "",
        "model": {
            "provider": provider,
            "model": model,
            "base_url": None,
            "revision": None,
            "api_key_env": None,
            "rates": rates,
        },
        "decoding": dict(decoding or DECODING),
        "design": {
            "arms": list(arms),
            "tasks": len(seeds),
            "attempts": attempts,
            "seed_string": "range",
            "split": "eval",
            "strictness": strictness,
            "turn_limit": 32,
            "slack": 4,
            "horizon": 13,
            "harness": "verifiers-null",  # the published design's path (reading-a-card.md)
        },
        "budget": {"tokens": 1_000_000, "wall_clock_s": 3600.0, "dollars": None},
    }
    if thresholds is not None:
        prereg["thresholds"] = thresholds.model_dump(mode="json")
    # the header's copies of the plan are what its document registers (runfolder.check_header)
    assert list(seeds) == list(range(len(seeds))), "synthetic runs use the seeds 'range' derives"
    if serving is None:
        serving = {
            "provider": provider,
            "base_url": "http://127.0.0.1:1/v1",
            "model": model,
            "revision": None,
            "details": {},
        }
    return RunHeader(
        preregistration=prereg,
        preregistration_hash=digest(prereg),
        seed_list_hash=seed_list_hash(list(seeds)),
        seeds=list(seeds),
        arms=list(arms),
        attempts=attempts,
        engine_hash=FAKE_ENGINE_HASH,
        generator_hash=generator_hash,
        vocabulary_hash="v" * 64,
        environment_hash="distributions:" + "0" * 64,
        package_version="0.1.0",
        package_versions={"verifiers": "0.4.0"},
        serving=serving,
        concurrency=concurrency,
        thresholds=thresholds or Thresholds(),
        sessions=[
            Session(
                index=i,
                started_at=f"2026-11-0{i + 1}T00:00:00Z",
                ended_at=f"2026-11-0{i + 1}T01:00:00Z",
                stop_reason=reason,  # type: ignore[arg-type]
                concurrency=concurrency,
            )
            for i, reason in enumerate(sessions)
        ],
    )


def line(
    arm: str,
    seed: int,
    attempt: int,
    outcome: Outcome = "passed",
    *,
    tool_calls: int | None = None,
    model_calls: int | None = None,
    usage: Usage | None = None,
    timing: Timing | None = None,
    session: int = 0,
    transcript: dict[str, Any] | None = None,
) -> EpisodeLine:
    """One episode line; calls default to the arm's minimum (model calls add the reply turn)."""
    spec = parse_arm_id(arm)
    calls = spec.min_calls if tool_calls is None else tool_calls
    return EpisodeLine(
        arm_id=arm,
        seed=seed,
        attempt=attempt,
        task_id=f"{arm}#{seed}",
        session=session,
        resumed=session > 0,
        outcome=outcome,
        strict_label=outcome,
        leaky_pass=outcome in LEAKY_PASSES,
        passed=outcome == "passed",
        min_calls=spec.min_calls,
        tool_calls=calls,
        model_calls=calls + 1 if model_calls is None else model_calls,
        usage=usage
        or Usage(uncached_input_tokens=1000, cached_input_tokens=200, completion_tokens=100),
        timing=timing or Timing(),
        transcript=transcript or {},
    )


def write_run(folder: Path, head: RunHeader, lines: Iterable[EpisodeLine]) -> Path:
    """Write run.json and episodes.jsonl through poisson_tasks.runfolder."""
    write_header(folder, head)
    with (folder / EPISODES).open("ab") as fh:
        for ln in lines:
            append_episode(fh, ln)
    return folder


Pattern = Callable[[str, int, int], Outcome]


def full_run(
    folder: Path,
    arms: Sequence[str],
    seeds: Sequence[int],
    attempts: int,
    pattern: Pattern,
    **header_args: Any,
) -> Path:
    """Every planned episode, each outcome from pattern(arm, seed, attempt)."""
    lines = [line(a, s, t, pattern(a, s, t)) for a in arms for s in seeds for t in range(attempts)]
    return write_run(folder, header(arms, seeds, attempts, **header_args), lines)


EXAMPLE_ARMS = (
    "depth:d1",
    "depth:d2",
    "depth:d3",
    "depth:d5",
    "depth:d8",
    "depth:d1+h8",
    "depth:d2+h5",
)
EXAMPLE_RATES = {
    "input": 0.1,
    "cached_input": 0.01,
    "output": 0.4,
    "as_of": "2026-11-01",
    "source": None,
}


def _uniform(*parts: object) -> float:
    """A draw in [0, 1) from a hash of its parts: the same on every run and platform."""
    import hashlib

    digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _example_line(arm: str, seed: int, attempt: int) -> EpisodeLine:
    spec = parse_arm_id(arm)
    depth = spec.level
    hard = 0.25 * _uniform("task", seed)  # some tasks are harder at every level
    reach = _uniform(arm, seed, attempt, "reach") > hard + 0.06 * depth
    over = reach and depth < 8 and _uniform(arm, seed, attempt, "over") < (8 - depth) / 12
    short = not reach and _uniform(arm, seed, attempt, "short") < 0.5
    outcome: Outcome = "wrong_state" if not reach else "overshoot" if over else "passed"
    calls = spec.min_calls - 1 if short and spec.min_calls > 1 else spec.min_calls
    calls += 8 - depth if over else 0
    prompt = 900 + 250 * calls + int(200 * _uniform(arm, seed, attempt, "p"))
    return line(
        arm,
        seed,
        attempt,
        outcome,
        tool_calls=calls,
        usage=Usage(
            uncached_input_tokens=prompt,
            cached_input_tokens=300 * calls,
            completion_tokens=60 * (calls + 1),
            reasoning_tokens=20 * (calls + 1),
        ),
        timing=Timing(
            episode_s=round(0.8 * (calls + 1) + _uniform(arm, seed, attempt, "t"), 3),
            model_s=round(0.7 * (calls + 1), 3),
            harness_s=round(0.01 * calls, 3),
            setup_s=0.05,
        ),
    )


def example_run(folder: Path, tasks: int = 20, attempts: int = 5) -> Path:
    """The synthetic run the docs' example card is rendered from (a made-up model, not a result)."""
    lines = [
        _example_line(a, s, t) for a in EXAMPLE_ARMS for s in range(tasks) for t in range(attempts)
    ]
    head = header(
        EXAMPLE_ARMS,
        range(tasks),
        attempts,
        rates=EXAMPLE_RATES,
        model="synthetic-example",
        concurrency=8,
    )
    return write_run(folder, head, lines)


def reference_preregistration(
    name: str,
    arms: Sequence[str],
    *,
    tasks: int,
    attempts: int = 1,
    policy: str = "oracle",
    seed_string: str,
    slack: int = 0,
    **sections: dict[str, Any],
) -> dict[str, Any]:
    """A pre-registration document against the reference policy `policy` (tests and benchmarks
    write theirs from this one); `sections` are merged into its own, the horizon follows the arms."""
    doc: dict[str, Any] = {
        "format": "poisson-tasks/preregistration@1",
        "name": name,
        "model": {"provider": "reference", "model": policy},
        "decoding": {
            "temperature": 1.0,
            "top_p": 1.0,
            "reasoning_effort": "low",
            "max_completion_tokens": 2048,
        },
        "design": {
            "arms": list(arms),
            "tasks": tasks,
            "attempts": attempts,
            "seed_string": seed_string,
            "slack": slack,
            "horizon": 0,
        },
        "budget": {"tokens": 50_000_000, "wall_clock_s": 120},
        "execution": {"concurrency": 4},
    }
    for key, value in sections.items():
        doc[key] = {**doc.get(key, {}), **value}
    design = doc["design"]
    design["horizon"] = max(parse_arm_id(arm).max_turns(design["slack"]) for arm in design["arms"])
    return doc
