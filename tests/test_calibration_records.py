"""records_from_run and provenance: a run folder read into typed records, checked."""

from __future__ import annotations

import gzip
import hashlib
from datetime import date
from pathlib import Path

import pytest
import yaml
from synthetic_runs import header, line, write_run

from poisson_tasks.calibration import provenance_from_run, records_from_run
from poisson_tasks.calibration.records import records_sha256
from poisson_tasks.errors import RunFolderError
from poisson_tasks.prereg import validate_preregistration
from poisson_tasks.runfolder import EPISODES, ServingRecord, Timing, Usage, write_header

ROOT = Path(__file__).resolve().parents[1]


def test_record_fields_follow_the_outcome(tmp_path: Path) -> None:
    arms = ["depth:d3"]
    lines = [
        line("depth:d3", 0, 0, "passed"),
        line("depth:d3", 0, 1, "overshoot"),
        line("depth:d3", 0, 2, "collateral_mutation"),
        line("depth:d3", 0, 3, "wrong_state", tool_calls=1),
        line("depth:d3", 1, 0, "api_error", tool_calls=0),
        line("depth:d3", 1, 0, "turn_limit", session=1),
    ]
    write_run(tmp_path, header(arms, [0, 1], 4), lines)
    recs = records_from_run(tmp_path)
    got = [(r.outcome, r.strict_pass, r.leaky_pass, r.overshoot, r.instrument) for r in recs]
    assert got == [
        ("passed", True, True, False, False),
        ("overshoot", False, True, True, False),
        ("collateral_mutation", False, True, False, False),
        ("wrong_state", False, False, False, False),
        ("api_error", False, False, False, True),
        ("turn_limit", False, False, False, False),
    ]
    assert recs[3].stopped_short and not recs[3].no_tool_call
    assert recs[4].no_tool_call and not recs[4].stopped_short
    assert recs[5].resumed and recs[5].session == 1
    assert (recs[0].knob, recs[0].level, recs[0].control, recs[0].min_calls) == (
        "depth",
        3,
        False,
        3,
    )


def test_an_overshoot_short_of_another_goal_is_not_counted_as_overshoot(tmp_path: Path) -> None:
    """Issue 32: the card's overshoot share counts only episodes that reached every goal. A shape
    episode labelled overshoot (one goal record past its goal) whose other goal record fell short
    carries leaky_pass false, and is neither a leaky pass nor an overshoot on the card."""
    short = line("shape:w2", 0, 1, "overshoot").model_copy(update={"leaky_pass": False})
    lines = [line("shape:w2", 0, 0, "overshoot"), short]
    write_run(tmp_path, header(["shape:w2"], [0], 2), lines)
    got = [(r.outcome, r.leaky_pass, r.overshoot) for r in records_from_run(tmp_path)]
    assert got == [("overshoot", True, True), ("overshoot", False, False)]


def test_tokens_are_prompt_plus_cached_plus_completion(tmp_path: Path) -> None:
    usages = [
        Usage(
            uncached_input_tokens=700,
            cached_input_tokens=300,
            completion_tokens=50,
            reasoning_tokens=20,
        ),
        Usage(uncached_input_tokens=700, completion_tokens=50),
        Usage(completion_tokens=50),
    ]
    lines = [line("depth:d1", 0, i, usage=u) for i, u in enumerate(usages)]
    write_run(tmp_path, header(["depth:d1"], [0], 3), lines)
    assert [r.tokens for r in records_from_run(tmp_path)] == [1050, 750, None]


def test_gzip_folder_reads_the_same_records_and_hash(tmp_path: Path) -> None:
    plain = write_run(
        tmp_path / "plain",
        header(["depth:d1"], [0, 1], 2),
        [line("depth:d1", s, a) for s in (0, 1) for a in (0, 1)],
    )
    packed = tmp_path / "packed"
    write_header(packed, header(["depth:d1"], [0, 1], 2))
    (packed / "episodes.jsonl.gz").write_bytes(gzip.compress((plain / EPISODES).read_bytes()))
    assert records_from_run(plain) == records_from_run(packed)
    digest = hashlib.sha256((plain / EPISODES).read_bytes()).hexdigest()
    assert records_sha256(plain) == records_sha256(packed) == digest


def test_torn_last_line_is_not_read(tmp_path: Path) -> None:
    write_run(tmp_path, header(["depth:d1"], [0], 2), [line("depth:d1", 0, 0)])
    whole = (tmp_path / EPISODES).read_bytes()
    torn = line("depth:d1", 0, 1).model_dump_json().encode()[:40]
    (tmp_path / EPISODES).write_bytes(whole + torn)
    assert len(records_from_run(tmp_path)) == 1
    assert records_sha256(tmp_path) == hashlib.sha256(whole).hexdigest()


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (line("depth:d2", 0, 0), "arm 'depth:d2' is not in run.json's plan"),
        (line("depth:d1", 9, 0), "seed 9 is not in run.json's seed list"),
        (line("depth:d1", 0, 2), "attempt 2 is outside 0..1"),
        (line("depth:d1", 0, 0).model_copy(update={"min_calls": 4}), "min_calls 4 disagrees"),
    ],
)
def test_a_line_outside_the_plan_is_refused(tmp_path: Path, bad: object, message: str) -> None:
    write_run(tmp_path, header(["depth:d1"], [0], 2), [bad])  # type: ignore[list-item]
    with pytest.raises(RunFolderError, match=message):
        records_from_run(tmp_path)


def test_an_attempt_scored_twice_is_refused_but_an_instrument_retry_is_not(tmp_path: Path) -> None:
    retry = write_run(
        tmp_path / "retry",
        header(["depth:d1"], [0], 1),
        [
            line("depth:d1", 0, 0, "wall_timeout"),
            line("depth:d1", 0, 0, "passed", session=1),
        ],
    )
    assert [r.outcome for r in records_from_run(retry)] == ["wall_timeout", "passed"]
    twice = write_run(
        tmp_path / "twice",
        header(["depth:d1"], [0], 1),
        [
            line("depth:d1", 0, 0, "passed"),
            line("depth:d1", 0, 0, "wrong_state", session=1),
        ],
    )
    with pytest.raises(
        RunFolderError,
        match=r"episodes.jsonl:2: depth:d1 seed 0 attempt 0 was already scored at line 1",
    ):
        records_from_run(twice)


def test_missing_header_names_the_fix(tmp_path: Path) -> None:
    with pytest.raises(RunFolderError, match=r"run\.json is missing"):
        records_from_run(tmp_path)


def _prereg(name: str) -> dict[str, object]:
    """A shipped pre-registration's plan as a run header records it: the document, its hash, and
    the arms, seeds, attempts, thresholds and concurrency it registers (the header's copies)."""
    doc = yaml.safe_load((ROOT / "preregistrations" / name).read_text())
    plan = validate_preregistration(doc)
    return {
        "preregistration": plan.preregistration.model_dump(mode="json"),
        "preregistration_hash": plan.preregistration_hash,
        "arms": list(plan.arms),
        "seeds": list(plan.seeds),
        "seed_list_hash": plan.seed_list_hash,
        "attempts": plan.attempts,
        "thresholds": plan.preregistration.thresholds,
        "concurrency": plan.preregistration.execution.concurrency,
    }


def test_provenance_reads_a_real_preregistration_for_a_reference_policy(tmp_path: Path) -> None:
    head = header(["depth:d1"], [0], 1, provider="reference", model="oracle")
    head = head.model_copy(
        update={
            **_prereg("published-reference-oracle.yaml"),
            "serving": ServingRecord.model_validate(
                {
                    "provider": "reference",
                    "base_url": "http://127.0.0.1:5/v1",
                    "model": "oracle",
                    "revision": None,
                    "details": {"health": {"ok": True}},
                }
            ),
        }
    )
    write_run(tmp_path, head, [])
    p = provenance_from_run(tmp_path)
    assert p.model == "oracle"
    assert (p.serving.kind, p.serving.policy, p.serving.provider) == (
        "reference",
        "oracle",
        "reference",
    )
    assert p.turn_limit == 32
    assert p.decoding == {
        "temperature": 1.0,
        "top_p": 1.0,
        "reasoning_effort": "low",
        "max_completion_tokens": 2048,
        "extra_body": {},
    }
    assert p.rates is None
    assert p.budget["tokens"] == 200_000_000


def test_provenance_reads_declared_rates_and_self_served_details(tmp_path: Path) -> None:
    head = header(["depth:d1"], [0], 1)
    head = head.model_copy(
        update={
            **_prereg("knob-probe.yaml"),
            "serving": ServingRecord.model_validate(
                {
                    "provider": "vllm",
                    "base_url": "http://127.0.0.1:8000/v1",
                    "model": "m",
                    "revision": "abc123",
                    "details": {"version": {"version": "0.29.0"}},
                    "gpu": "L4",
                    "flags": ["--max-model-len", "16384"],
                }
            ),
        }
    )
    write_run(tmp_path, head, [])
    p = provenance_from_run(tmp_path)
    assert p.rates is not None
    assert (p.rates.input, p.rates.cached_input, p.rates.output, p.rates.as_of) == (
        0.05,
        0.005,
        0.40,
        date(2025, 8, 7),
    )
    # the card records them as the pre-registration declared them, the date as its JSON writes it
    assert p.model_dump(mode="json")["rates"] == {
        "input": 0.05,
        "cached_input": 0.005,
        "output": 0.40,
        "as_of": "2025-08-07",
        "source": "https://developers.openai.com/api/docs/models/gpt-5-nano",
    }
    s = p.serving
    assert (s.kind, s.stack, s.stack_version, s.weights_revision, s.gpu) == (
        "self-served",
        "vllm",
        "0.29.0",
        "abc123",
        "L4",
    )
    assert s.flags == ["--max-model-len", "16384"]


def test_timing_reaches_the_record(tmp_path: Path) -> None:
    t = Timing(episode_s=3.5, model_s=3.0, harness_s=0.4, setup_s=0.1)
    write_run(tmp_path, header(["depth:d1"], [0], 1), [line("depth:d1", 0, 0, timing=t)])
    r = records_from_run(tmp_path)[0]
    assert (r.episode_s, r.model_s, r.harness_s, r.setup_s) == (3.5, 3.0, 0.4, 0.1)
