"""The runner end to end against the reference endpoint on loopback: complete folders, the reference
policies' known results, faults, kills and resumes, budget stops, and one-line refusals.

Reference-policy figures here are baselines of the instrument, never a model's results.
"""

from __future__ import annotations

import hashlib
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from synthetic_runs import reference_preregistration
from typer.testing import CliRunner

from poisson_tasks.calibration.records import records_from_run
from poisson_tasks.cli import app
from poisson_tasks.credentials import REDACTED_SHAPE, redact, scrub
from poisson_tasks.errors import EndpointError, RunFolderError
from poisson_tasks.prereg import load_preregistration
from poisson_tasks.reference import ReferenceServer, noisy_expected, start_reference_server
from poisson_tasks.runfolder import EPISODES, EpisodeLine, iter_episodes, read_header
from poisson_tasks.runner import run_preregistration
from poisson_tasks.runner.endpoint import parse_tool_call
from poisson_tasks.runner.textcalls import looks_like_tool_call
from poisson_tasks.verifier import INSTRUMENT_OUTCOMES

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "preregistrations" / "smoke.yaml"
SLOW_CALLS = "flaky?p_500=0&p_429=0&p_slow=1&slow_s=0.05"  # every answer 50 ms late, none fails
cli = CliRunner()


def prereg(
    tmp_path: Path,
    *,
    model: str = "oracle",
    arms: list[str] | None = None,
    tasks: int = 3,
    attempts: int = 2,
    base_url: str | None = None,
    key_env: str | None = None,
    name: str = "t",
    **sections: dict[str, Any],
) -> Path:
    """A pre-registration file against the reference endpoint; `sections` override whole parts."""
    serving: dict[str, Any] = {}
    if base_url is not None:
        serving["base_url"] = base_url
    if key_env is not None:
        serving["api_key_env"] = key_env
    execution = {"concurrency": 4, "max_retries": 3, "backoff_s": 0.001, "backoff_max_s": 0.01}
    overrides: dict[str, dict[str, Any]] = {"model": serving, "execution": execution}
    for key, value in sections.items():
        overrides[key] = {**overrides.get(key, {}), **value}
    doc = reference_preregistration(
        name,
        arms or ["depth:d2", "distractor:r4@k16"],
        tasks=tasks,
        attempts=attempts,
        policy=model,
        seed_string="runner-test",
        **overrides,
    )
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def lines_of(folder: Path) -> list[EpisodeLine]:
    return list(iter_episodes(folder))


def slots_of(lines: list[EpisodeLine], scored_only: bool = False) -> Counter[tuple[str, int, int]]:
    return Counter(
        (ln.arm_id, ln.seed, ln.attempt)
        for ln in lines
        if not (scored_only and ln.outcome in INSTRUMENT_OUTCOMES)
    )


def folder_hash(folder: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        h.update(str(p.relative_to(folder)).encode())
        if p.is_file():
            h.update(p.read_bytes())
    return h.hexdigest()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --------------------------------------------------------------------------- complete runs


def test_smoke_writes_a_complete_folder(tmp_path: Path) -> None:
    out = tmp_path / "run"
    summary = run_preregistration(SMOKE, out, show_progress=False)
    plan = load_preregistration(SMOKE)
    assert summary.stop_reason == "complete" and summary.complete
    header = read_header(out)
    assert header.preregistration_hash == plan.preregistration_hash
    assert header.seed_list_hash == plan.seed_list_hash and header.seeds == list(plan.seeds)
    assert header.arms == list(plan.arms) and header.attempts == plan.attempts
    assert header.serving.details["health"]["status"] == "ok"
    assert header.serving.in_process is True
    assert "openai" in header.package_versions and header.concurrency == 8
    assert [s.stop_reason for s in header.sessions] == ["complete"]
    lines = lines_of(out)
    assert slots_of(lines) == Counter(plan.slots())
    for ln in lines:
        t = ln.transcript
        assert t["messages"][0]["role"] == "system"
        assert len(t["responses"]) == ln.model_calls == len(ln.finish_reasons)
        assert t["request_messages"][0] == t["opening_messages"]
        assert t["request_messages"] == sorted(t["request_messages"])
        assert len(t["observations"]) == ln.tool_calls
        assert all(len(o) == 52 for o in t["observations"])
        assert ln.usage.uncached_input_tokens is not None and ln.usage.completion_tokens is not None
        assert ln.timing.episode_s is not None and ln.timing.model_s is not None
        assert ln.system_fingerprints == ["ref-0.1.0-graded"] * ln.model_calls
        assert not ln.resumed and ln.session == 0
    # calibration reads the folder through the same contract
    assert len(records_from_run(out)) == plan.episodes == 400


def test_oracle_passes_every_episode(tmp_path: Path, server: ReferenceServer) -> None:
    plan_path = ROOT / "preregistrations" / "published-reference-oracle.yaml"
    arms = load_preregistration(plan_path).arms
    path = prereg(
        tmp_path,
        arms=list(arms),
        tasks=2,
        attempts=1,
        base_url=server.base_url,
        execution={"concurrency": 16},
    )
    summary = run_preregistration(path, tmp_path / "run", show_progress=False)
    lines = lines_of(tmp_path / "run")
    assert len(lines) == 28 and summary.passed == 28
    assert all(ln.outcome == "passed" and ln.tool_calls == ln.min_calls for ln in lines)


def test_noisy_rates_match_the_analytic_values(tmp_path: Path, server: ReferenceServer) -> None:
    params = {"p_wrong_tool": 0.2, "p_early_stop": 0.1, "p_overshoot": 0.3}
    model = "noisy?" + "&".join(f"{k}={v}" for k, v in params.items())
    path = prereg(
        tmp_path,
        model=model,
        arms=["depth:d2", "distractor:r4@k16"],
        tasks=40,
        attempts=3,
        base_url=server.base_url,
        execution={"concurrency": 16},
    )
    run_preregistration(path, tmp_path / "run", show_progress=False)
    lines = lines_of(tmp_path / "run")
    for arm in ("depth:d2", "distractor:r4@k16"):
        got = [ln for ln in lines if ln.arm_id == arm]
        n = len(got)
        assert n == 120
        want = noisy_expected(arm, max_turns=32, **params)
        for outcome, p in (
            ("passed", want.passed),
            ("overshoot", want.overshoot),
            ("wrong_state", want.wrong_state),
        ):
            share = sum(ln.outcome == outcome for ln in got) / n
            se = max((p * (1 - p) / n) ** 0.5, 1 / n)
            assert abs(share - p) <= 4 * se, (arm, outcome, share, p)


def test_no_call_episodes_are_recorded_as_no_call(tmp_path: Path, server: ReferenceServer) -> None:
    path = prereg(tmp_path, model="no-call", base_url=server.base_url)
    summary = run_preregistration(path, tmp_path / "run", show_progress=False)
    lines = lines_of(tmp_path / "run")
    assert len(lines) == 12 and summary.no_tool_call == 12
    assert all(
        ln.tool_calls == 0 and ln.model_calls == 1 and ln.outcome == "wrong_state" for ln in lines
    )


def test_a_call_written_as_text_is_counted_not_taken_as_a_reply(
    tmp_path: Path, server: ReferenceServer
) -> None:
    path = prereg(tmp_path, model="text-call", base_url=server.base_url)
    summary = run_preregistration(path, tmp_path / "run", show_progress=False)
    lines = lines_of(tmp_path / "run")
    assert all(ln.outcome == "malformed_call" and ln.malformed_clause == 1 for ln in lines)
    assert all(ln.unparsed_text_calls == 1 and ln.finish_reasons == ["stop"] for ln in lines)
    assert all("<tool_call>" in ln.transcript["text_calls"][0] for ln in lines)
    assert summary.format_alarm


def test_replay_mismatch_is_an_instrument_failure(
    tmp_path: Path, server: ReferenceServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from poisson_tasks.verifier import verify as real

    def tampered(*args: Any, **kwargs: Any) -> Any:
        v = real(*args, **kwargs)
        return v.model_copy(update={"observations": [*v.observations, "x"]})

    monkeypatch.setattr("poisson_tasks.runner.episode.verify", tampered)
    path = prereg(tmp_path, base_url=server.base_url, tasks=1, attempts=1)
    summary = run_preregistration(path, tmp_path / "run", show_progress=False)
    lines = lines_of(tmp_path / "run")
    assert [ln.outcome for ln in lines] == ["replay_mismatch"] * 2
    assert all(not ln.passed and "replay" in (ln.error or "") for ln in lines)
    assert summary.instrument == 2


# --------------------------------------------------------------------------- faults


def test_flaky_endpoint_loses_nothing_and_shows_its_retries(
    tmp_path: Path, server: ReferenceServer
) -> None:
    model = "flaky?p_500=0.15&p_429=0.15&p_slow=0.1&slow_s=0.3"
    path = prereg(
        tmp_path,
        model=model,
        tasks=6,
        attempts=2,
        base_url=server.base_url,
        execution={"max_retries": 1, "request_timeout_s": 0.1},
    )
    out = tmp_path / "run"
    summary = run_preregistration(path, out, show_progress=False)
    lines = lines_of(out)
    assert len(lines) == summary.written == 24  # every planned episode has its line
    assert {ln.outcome for ln in lines} <= {"passed", "api_error"}
    failed = [ln for ln in lines if ln.outcome == "api_error"]
    assert failed and all(ln.error for ln in failed)
    assert summary.retries > 0
    assert sum(ln.transcript["retries"] for ln in lines) == summary.retries
    # resume re-runs the failed slots until each has a scored line; the failures stay counted.
    # Each resume re-runs only what failed; a loaded machine turns more requests into 0.1 s
    # timeouts, so the loop allows many cheap resumes rather than a few.
    for _ in range(40):
        if run_preregistration(path, out, resume=True, show_progress=False).complete:
            break
    after = lines_of(out)
    assert slots_of(after, scored_only=True) == Counter(load_preregistration(path).slots())
    assert [ln for ln in after if ln.outcome == "api_error"][: len(failed)] == failed
    assert all(ln.resumed and ln.session >= 1 for ln in after[len(lines) :])


def test_an_episode_past_its_timeout_is_wall_timeout(
    tmp_path: Path, server: ReferenceServer
) -> None:
    model = "flaky?p_500=0&p_429=0&p_slow=1&slow_s=0.4"
    path = prereg(
        tmp_path,
        model=model,
        tasks=1,
        attempts=1,
        base_url=server.base_url,
        execution={"episode_timeout_s": 0.15},
    )
    summary = run_preregistration(path, tmp_path / "run", show_progress=False)
    lines = lines_of(tmp_path / "run")
    assert [ln.outcome for ln in lines] == ["wall_timeout"] * 2
    assert all(ln.timing.model_s is not None and ln.timing.model_s > 0.1 for ln in lines)
    assert summary.instrument == 2


def _slot(line: EpisodeLine) -> tuple[str, int, int]:
    return (line.arm_id, line.seed, line.attempt)


def _as_uninterrupted(line: EpisodeLine) -> dict[str, Any]:
    """A line less what differs between two runs of one plan: who wrote it, and timings."""
    data = line.model_dump(exclude={"session", "resumed", "timing"})
    data["transcript"] = {k: v for k, v in line.transcript.items() if k != "response_seconds"}
    return data


def test_kill_9_then_resume_runs_exactly_the_plan(tmp_path: Path, server: ReferenceServer) -> None:
    path = prereg(
        tmp_path,
        model=SLOW_CALLS,
        arms=["depth:d3", "distractor:r2@k16"],
        tasks=8,
        attempts=2,
        base_url=server.base_url,
        execution={"concurrency": 2},
    )
    out = tmp_path / "run"
    whole = tmp_path / "whole"  # the same plan, never interrupted
    assert run_preregistration(path, whole, show_progress=False).complete
    proc = subprocess.Popen(
        [sys.executable, "-m", "poisson_tasks.cli", "run", str(path), "--out", str(out), "--quiet"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and proc.poll() is None:
            episodes = out / EPISODES
            if episodes.exists() and episodes.read_bytes().count(b"\n") >= 5:
                break
            time.sleep(0.02)
        assert proc.poll() is None, "the run finished before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    before = lines_of(out)
    assert 5 <= len(before) < 32
    assert read_header(out).sessions[-1].stop_reason == "running"
    summary = run_preregistration(path, out, resume=True, show_progress=False)
    assert summary.complete
    after = lines_of(out)
    # none twice, none missing
    assert slots_of(after) == Counter(load_preregistration(path).slots())
    assert after[: len(before)] == before
    assert all(ln.resumed and ln.session == 1 for ln in after[len(before) :])
    sessions = read_header(out).sessions
    assert [s.stop_reason for s in sessions] == ["interrupted", "complete"]
    assert [s.episodes_written for s in sessions] == [len(before), len(after) - len(before)]
    # the records are those of the uninterrupted run, slot for slot
    assert {_slot(ln): _as_uninterrupted(ln) for ln in after} == {
        _slot(ln): _as_uninterrupted(ln) for ln in lines_of(whole)
    }


def test_a_torn_last_line_is_cut_before_resuming(tmp_path: Path, server: ReferenceServer) -> None:
    path = prereg(tmp_path, base_url=server.base_url)
    out = tmp_path / "run"
    run_preregistration(path, out, show_progress=False)
    raw = (out / EPISODES).read_bytes().splitlines(keepends=True)
    (out / EPISODES).write_bytes(b"".join(raw[:-3]) + raw[-3][:40])  # two lost, one torn
    assert len(lines_of(out)) == 9
    run_preregistration(path, out, resume=True, show_progress=False)
    data = (out / EPISODES).read_bytes()
    assert data.endswith(b"\n")
    assert slots_of(lines_of(out)) == Counter(load_preregistration(path).slots())


# --------------------------------------------------------------------------- stopping


def test_a_token_budget_stop_keeps_paid_episodes_and_resumes(
    tmp_path: Path, server: ReferenceServer
) -> None:
    path = prereg(
        tmp_path,
        arms=["depth:d1"],
        tasks=10,
        attempts=2,
        base_url=server.base_url,
        budget={"tokens": 20_000},
        execution={"concurrency": 1},
    )
    out = tmp_path / "run"
    res = cli.invoke(app, ["run", str(path), "--out", str(out), "--quiet"])
    assert res.exit_code == 3, res.output
    header = read_header(out)
    assert header.sessions[0].stop_reason == "token_budget"
    lines = lines_of(out)
    assert 1 <= len(lines) < 20 and header.sessions[0].episodes_written == len(lines)
    spent = sum(
        (ln.usage.uncached_input_tokens or 0)
        + (ln.usage.cached_input_tokens or 0)
        + (ln.usage.completion_tokens or 0)
        for ln in lines
    )
    assert (
        spent
        >= 20_000
        > spent
        - max(
            (ln.usage.uncached_input_tokens or 0)
            + (ln.usage.cached_input_tokens or 0)
            + (ln.usage.completion_tokens or 0)
            for ln in lines
        )
    )
    assert "incomplete depth:d1" in res.stderr
    # the budget is not part of the measurement: a larger one resumes the same folder
    doc = yaml.safe_load(path.read_text())
    doc["budget"]["tokens"] = 10_000_000
    doc["execution"]["concurrency"] = 3
    bigger = tmp_path / "bigger.yaml"
    bigger.write_text(yaml.safe_dump(doc))
    summary = run_preregistration(bigger, out, resume=True, show_progress=False)
    assert summary.complete and slots_of(lines_of(out)) == Counter(
        load_preregistration(path).slots()
    )


def test_a_dollar_budget_stops_on_the_declared_rates(
    tmp_path: Path, server: ReferenceServer
) -> None:
    rates = {"input": 1000.0, "cached_input": 100.0, "output": 1000.0, "as_of": "2026-01-01"}
    path = prereg(
        tmp_path,
        arms=["depth:d1"],
        tasks=10,
        attempts=2,
        base_url=server.base_url,
        model="oracle",
        budget={"dollars": 10.0},
        execution={"concurrency": 1},
    )
    doc = yaml.safe_load(path.read_text())
    doc["model"]["rates"] = rates  # a test price for the mechanism, not anyone's real rate
    path.write_text(yaml.safe_dump(doc))
    summary = run_preregistration(path, tmp_path / "run", show_progress=False)
    assert summary.stop_reason == "dollar_budget" and not summary.complete
    assert summary.dollars is not None and summary.dollars >= 10.0
    assert read_header(tmp_path / "run").sessions[0].stop_reason == "dollar_budget"


def test_the_wall_clock_stop_abandons_in_flight_episodes(
    tmp_path: Path, server: ReferenceServer
) -> None:
    # depth:d8 takes nine calls of 0.1 s each: at the 0.6 s deadline both episodes are mid-way
    path = prereg(
        tmp_path,
        model=SLOW_CALLS.replace("0.05", "0.1"),
        arms=["depth:d8"],
        tasks=2,
        attempts=2,
        base_url=server.base_url,
        budget={"wall_clock_s": 0.6},
        execution={"concurrency": 2},
    )
    out = tmp_path / "run"
    summary = run_preregistration(path, out, show_progress=False)
    assert summary.stop_reason == "wall_clock" and summary.abandoned >= 1
    session = read_header(out).sessions[0]
    assert session.abandoned == summary.abandoned
    assert (session.abandoned_usage.uncached_input_tokens or 0) > 0
    assert len(lines_of(out)) == summary.written == 0
    assert run_preregistration(path, out, resume=True, show_progress=False).abandoned >= 1


# --------------------------------------------------------------------------- bad input


def _one_error_line(res: Any) -> str:
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("error: ")
    return str(lines[0])


def test_a_malformed_preregistration_is_one_line_and_no_folder(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("format: poisson-tasks/preregistration@1\nname: x\nmodel: 3\n")
    res = cli.invoke(app, ["run", str(bad), "--out", str(tmp_path / "run")])
    assert res.exit_code == 2
    assert "model: must be a mapping" in res.stderr
    assert not (tmp_path / "run").exists()


def test_an_unreachable_endpoint_is_one_line_and_no_folder(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    path = prereg(tmp_path, base_url=url)
    res = cli.invoke(app, ["run", str(path), "--out", str(tmp_path / "run")])
    assert res.exit_code == 2
    assert "cannot reach" in _one_error_line(res)
    assert not (tmp_path / "run").exists()


def test_a_wrong_api_key_is_one_line_and_no_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POISSON_TEST_KEY", "sk-wrong-0123456789abcdef")
    with start_reference_server("127.0.0.1", 0, api_key="sk-right-0123456789abcdef") as srv:
        path = prereg(tmp_path, base_url=srv.base_url, key_env="POISSON_TEST_KEY")
        res = cli.invoke(app, ["run", str(path), "--out", str(tmp_path / "run")])
    assert res.exit_code == 2
    line = _one_error_line(res)
    assert "refused the API key" in line and "0123456789abcdef" not in res.output
    assert not (tmp_path / "run").exists()


def test_an_unset_key_variable_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: ReferenceServer
) -> None:
    monkeypatch.delenv("POISSON_UNSET_KEY", raising=False)
    path = prereg(tmp_path, base_url=server.base_url, key_env="POISSON_UNSET_KEY")
    with pytest.raises(EndpointError, match="POISSON_UNSET_KEY, which is not set"):
        run_preregistration(path, tmp_path / "run", show_progress=False)
    assert not (tmp_path / "run").exists()


def test_garbage_tool_call_json_is_the_models_result_and_one_line(
    tmp_path: Path, server: ReferenceServer
) -> None:
    path = prereg(tmp_path, model="garbage", base_url=server.base_url, tasks=2, attempts=1)
    out = tmp_path / "run"
    res = cli.invoke(app, ["run", str(path), "--out", str(out), "--quiet"])
    assert res.exit_code == 1
    # the session's summary (stderr, like every report beside what a command makes), then the
    # format alarm as the one error line, last
    said = res.stderr.rstrip().splitlines()
    errors = [ln for ln in said if ln.startswith("error: ")]
    assert errors == said[-1:] and "broke format clause 1" in errors[0]
    lines = lines_of(out)
    assert len(lines) == 4 and read_header(out).sessions[0].stop_reason == "complete"
    assert all(ln.outcome == "malformed_call" and ln.malformed_clause == 1 for ln in lines)
    first = lines[0].transcript["tool_calls"][0][0]
    assert first["arguments"] is None and first["raw_arguments"]


def test_resume_on_another_studys_folder_is_refused_untouched(
    tmp_path: Path, server: ReferenceServer
) -> None:
    path = prereg(tmp_path, base_url=server.base_url)
    out = tmp_path / "run"
    run_preregistration(path, out, show_progress=False)
    with (out / EPISODES).open("ab") as fh:
        fh.write(b'{"torn":')  # even a torn tail stays as it is when the resume is refused
    before = folder_hash(out)
    other = prereg(tmp_path, base_url=server.base_url, tasks=4, name="other")
    res = cli.invoke(app, ["run", str(other), "--resume", str(out)])
    assert res.exit_code == 2
    assert "another pre-registration" in _one_error_line(res)
    assert folder_hash(out) == before
    with pytest.raises(RunFolderError):
        run_preregistration(SMOKE, out, resume=True, show_progress=False)
    assert folder_hash(out) == before


def test_out_on_a_used_folder_and_resume_on_nothing_are_refused(
    tmp_path: Path, server: ReferenceServer
) -> None:
    path = prereg(tmp_path, base_url=server.base_url, tasks=1, attempts=1)
    out = tmp_path / "run"
    run_preregistration(path, out, show_progress=False)
    before = folder_hash(out)
    res = cli.invoke(app, ["run", str(path), "--out", str(out)])
    assert res.exit_code == 2 and "--resume" in _one_error_line(res)
    assert folder_hash(out) == before
    res = cli.invoke(app, ["run", str(path), "--resume", str(tmp_path / "nothing")])
    assert res.exit_code == 2 and "not a run folder" in _one_error_line(res)
    assert not (tmp_path / "nothing").exists()


def test_the_api_key_never_enters_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = "sk-test-secret-9f8e7d6c5b4a39281706"
    monkeypatch.setenv("POISSON_TEST_KEY", key)
    path = prereg(tmp_path, key_env="POISSON_TEST_KEY", tasks=2, attempts=1)
    out = tmp_path / "run"
    summary = run_preregistration(path, out, show_progress=False)  # in-process, key required
    assert summary.complete and summary.passed == 4
    for p in out.rglob("*"):
        data = p.read_bytes()
        assert key.encode() not in data and b"9f8e7d6c5b4a" not in data


# --------------------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    ("text", "call"),
    [
        ('<tool_call>\n{"name": "review_refund", "arguments": {}}\n</tool_call>', True),
        ('{"name": "review_refund", "arguments": {"record_id": "a"}}', True),
        ('Calling it now: ```json\n{"name": "x", "parameters": {}}\n```', True),
        ('[{"function": {"name": "x", "arguments": "{}"}}]', True),
        ('<function=review_refund>{"record_id": "a"}</function>', True),
        ("Done: the record is at stage 3.", False),
        ('The payload was {"status": "ok"}.', False),
        ("", False),
        (None, False),
    ],
)
def test_text_that_looks_like_a_tool_call(text: str | None, call: bool) -> None:
    assert looks_like_tool_call(text) is call


def test_unparseable_arguments_make_a_malformed_call_not_a_crash() -> None:
    bad = parse_tool_call({"name": "f", "arguments": '{"record_id": "a", "'})
    assert bad.arguments is None and bad.raw_arguments == '{"record_id": "a", "'
    listed = parse_tool_call({"name": "f", "arguments": "[1, 2]"})
    assert listed.arguments is None
    ok = parse_tool_call({"name": "f", "arguments": '{"a": "1"}'})
    assert ok.arguments == {"a": "1"} and ok.raw_arguments is None
    empty = parse_tool_call({"name": "f", "arguments": ""})
    assert empty.arguments == {}


def test_redact_removes_the_key_and_key_shaped_text() -> None:
    msg = "Incorrect API key provided: sk-proj-abc***xyz1; also secret-value"
    out = redact(msg, "secret-value")
    assert "sk-proj" not in out and "secret-value" not in out and "[redacted]" in out


def _redact_by_hand(text: str, secret: str) -> str:
    """redact() as first written: the key, then every position covered by an 8-character piece."""
    text = text.replace(secret, "[redacted]")
    width = min(8, len(secret))
    pieces = {secret[i : i + width] for i in range(len(secret) - width + 1)}
    covered = [False] * len(text)
    for at in range(len(text) - width + 1):
        if text[at : at + width] in pieces:
            covered[at : at + width] = [True] * width
    out, at = [], 0
    while at < len(text):
        if covered[at]:
            while at < len(text) and covered[at]:
                at += 1
            out.append("[redacted]")
        else:
            out.append(text[at])
            at += 1
    return REDACTED_SHAPE.sub("[redacted]", "".join(out))


def _scrub_by_hand(value: Any, secret: str) -> Any:
    if isinstance(value, str):
        return _redact_by_hand(value, secret)
    if isinstance(value, dict):
        return {_scrub_by_hand(k, secret): _scrub_by_hand(v, secret) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub_by_hand(v, secret) for v in value]
    return value


def test_scrub_and_redact_equal_the_position_by_position_pass() -> None:
    """The fast paths (one search over all strings, the pieces looked for in C) change nothing."""
    rng = random.Random(20261201)

    def text(secret: str) -> str:
        parts = []
        for _ in range(rng.randint(0, 4)):
            roll = rng.random()
            if roll < 0.25:
                start = rng.randint(0, len(secret))
                parts.append(secret[start : rng.randint(start, len(secret))])
            elif roll < 0.35:
                parts.append(
                    rng.choice(
                        [
                            *("sk-", "key-", "rk-", "sk-abcd", "xsk-abcde", "\0"),
                            *("hf_", "hf_abcdefgh01234567ij", "Bearer abc123def456", "AKIA"),
                            *("AKIAABCDEFGHIJ012345", "eyJhbGciOi.eyJzdWIiOi.x", "xoxb-12345678"),
                        ]
                    )
                )
            else:
                parts.append(
                    "".join(rng.choice('ab-_kXY01 \n\0"\\é') for _ in range(rng.randint(0, 9)))
                )
        return "".join(parts)

    def value(secret: str, depth: int = 0) -> Any:
        roll = rng.random()
        if depth > 3 or roll < 0.4:
            return text(secret)
        if roll < 0.55:
            return rng.randint(0, 9)
        if roll < 0.8:
            return [value(secret, depth + 1) for _ in range(rng.randint(0, 4))]
        return {text(secret): value(secret, depth + 1) for _ in range(rng.randint(0, 4))}

    changed = 0
    for _ in range(3000):
        secret = "".join(rng.choice('abXY01-_sk\0"é') for _ in range(rng.randint(1, 20)))
        sample = value(secret)
        assert scrub(sample, secret) == _scrub_by_hand(sample, secret), (sample, secret)
        if isinstance(sample, str):
            assert redact(sample, secret) == _redact_by_hand(sample, secret)
        changed += scrub(sample, secret) != sample
    assert changed > 300  # the samples do hold keys and key-shaped text
    key = "sk-proj-Ab3dEf9hIjKlMnOpQrStUvWxYz0123456789"
    transcript = {"messages": [{"role": "user", "content": "a plain task"}], "responses": [{}]}
    assert scrub(transcript, key) == transcript
    transcript["responses"] = [{"id": "x", "note": f"echo {key[5:19]} back"}]
    assert scrub(transcript, key) == _scrub_by_hand(transcript, key) != transcript
    odd: dict[Any, Any] = {"lone": "\ud800 " + key[3:12], 7: ["plain"]}  # orjson refuses both
    assert scrub(odd, key) == _scrub_by_hand(odd, key) != odd
    assert scrub({"lone": "\ud800", 7: ["plain"]}, key) == {"lone": "\ud800", 7: ["plain"]}


# --------------------------------------------------------------------------- the endpoint's answers


def _endpoint(handler: Any, retries: int = 2) -> Any:
    """An Endpoint whose client answers from `handler` in memory (no socket at all)."""
    import httpx2
    import openai

    from poisson_tasks.prereg import Decoding, Execution
    from poisson_tasks.runner.endpoint import Endpoint

    ep = Endpoint(
        base_url="http://mock/v1",
        api_key="sk-mock-0123456789",
        model="m",
        decoding=Decoding(
            temperature=1.0, top_p=1.0, reasoning_effort=None, max_completion_tokens=10
        ),
        execution=Execution(max_retries=retries, backoff_s=0.0, backoff_max_s=0.0),
    )
    ep.client = openai.AsyncOpenAI(
        api_key="sk-mock-0123456789",
        base_url="http://mock/v1",
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )
    return ep


def _answers(*responses: tuple[int, dict[str, Any]]) -> Any:
    import httpx2

    seen: list[dict[str, Any]] = []
    queue = list(responses)

    def handler(request: httpx2.Request) -> httpx2.Response:
        import json

        seen.append(json.loads(request.content))
        status, body = queue.pop(0) if len(queue) > 1 else queue[0]
        return httpx2.Response(status, json=body)

    handler.seen = seen  # type: ignore[attr-defined]
    return handler


OK_BODY = {
    "choices": [{"message": {"role": "assistant", "content": "done"}, "finish_reason": "stop"}],
    "usage": {
        "prompt_tokens": 10,
        "completion_tokens": 2,
        "prompt_tokens_details": {"cached_tokens": 4},
    },
    "system_fingerprint": "fp",
}


def _err(code: str | None, kind: str = "x") -> dict[str, Any]:
    return {"error": {"message": "m", "type": kind, "code": code}}


async def test_retries_then_succeeds_and_sends_the_declared_decoding() -> None:
    handler = _answers((500, _err(None)), (429, _err("rate_limit_exceeded")), (200, OK_BODY))
    ep = _endpoint(handler)
    reply = await ep.complete([{"role": "user", "content": "hi"}], [], "a|1|0")
    assert reply.retries == 2 and reply.content == "done" and ep.counters.retries == 2
    sent = handler.seen[0]
    assert sent["user"] == "a|1|0" and sent["max_completion_tokens"] == 10
    assert "reasoning_effort" not in sent  # null is not sent
    await ep.close()


async def test_a_call_that_keeps_failing_is_call_failed() -> None:
    from poisson_tasks.errors import CallFailed

    ep = _endpoint(_answers((503, _err(None))), retries=2)
    with pytest.raises(CallFailed, match="503 after 2 retries"):
        await ep.complete([{"role": "user", "content": "hi"}], [], "u")
    ep = _endpoint(_answers((400, _err("context_length_exceeded"))))
    with pytest.raises(CallFailed, match="HTTP 400") as info:
        await ep.complete([{"role": "user", "content": "hi"}], [], "u")
    assert info.value.retries == 0  # a 400 is not retried
    await ep.close()


async def test_out_of_credit_and_refused_keys_stop_the_run() -> None:
    from poisson_tasks.errors import OutOfCredit

    ep = _endpoint(_answers((429, _err("insufficient_quota", "insufficient_quota"))))
    with pytest.raises(OutOfCredit):
        await ep.complete([{"role": "user", "content": "hi"}], [], "u")
    ep = _endpoint(_answers((401, _err("invalid_api_key"))))
    with pytest.raises(EndpointError, match="refused the API key") as info:
        await ep.complete([{"role": "user", "content": "hi"}], [], "u")
    assert "0123456789" not in str(info.value)
    await ep.close()


def test_out_of_credit_mid_run_keeps_paid_episodes(
    tmp_path: Path, server: ReferenceServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from poisson_tasks.errors import OutOfCredit
    from poisson_tasks.runner.endpoint import Endpoint

    real = Endpoint.complete
    calls = {"n": 0}

    async def complete(self: Endpoint, *args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] > 12:
            raise OutOfCredit("the account is out of credit (insufficient_quota)")
        return await real(self, *args, **kwargs)

    monkeypatch.setattr(Endpoint, "complete", complete)
    path = prereg(
        tmp_path,
        arms=["depth:d3"],
        tasks=10,
        attempts=2,
        base_url=server.base_url,
        execution={"concurrency": 2},
    )
    out = tmp_path / "run"
    res = cli.invoke(app, ["run", str(path), "--out", str(out), "--quiet"])
    assert res.exit_code == 3, res.output
    session = read_header(out).sessions[0]
    assert session.stop_reason == "out_of_credit" and session.abandoned >= 1
    lines = lines_of(out)
    assert 1 <= len(lines) <= 3 and all(ln.outcome == "passed" for ln in lines)


def test_the_progress_line_shows_done_pass_rate_spend_retries_and_eta() -> None:
    import io

    from poisson_tasks.runner.progress import Progress

    stream = io.StringIO()
    with Progress(10, token_cap=1000, dollar_cap=2.0, stream=stream, enabled=True) as p:
        for passed in (True, True, True, False):
            p.episode(instrument=False, passed=passed, tokens=250, dollars=0.5)
        p.retry("429")
    text = stream.getvalue()
    for needle in (
        "episodes 4/10",
        "pass 0.750",
        "tokens 250/1,000",
        "$0.5000/2",
        "retries 1 (last 429)",
        "eta ",
    ):
        assert needle in text, (needle, text)
    quiet = io.StringIO()
    # not a terminal: no live line; a plain line comes every LINE_EVERY_S (tests/test_progress.py)
    with Progress(10, token_cap=1000, dollar_cap=None, stream=quiet) as p:
        p.retry("500")
    assert quiet.getvalue() == ""


def test_the_runner_builds_no_negative_controls(
    tmp_path: Path, server: ReferenceServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It never reads them; the task ids in its records are the whole tasks' ids all the same."""
    from poisson_tasks.generator import generate as real

    asked: list[bool] = []

    def spy(arm: str, seed: int, controls: bool = True) -> Any:
        asked.append(controls)
        return real(arm, seed, controls=controls)

    monkeypatch.setattr("poisson_tasks.runner.session.generate", spy)
    path = prereg(tmp_path, base_url=server.base_url, tasks=2, attempts=1)
    run_preregistration(path, tmp_path / "run", show_progress=False)
    lines = lines_of(tmp_path / "run")
    plan = load_preregistration(path)
    assert asked.count(False) == len(lines) == plan.episodes  # one lean bundle per episode
    assert all(ln.task_id == real(ln.arm_id, ln.seed).task_id for ln in lines)


def test_a_runner_bug_stops_the_run_and_is_not_called_complete(
    tmp_path: Path, server: ReferenceServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from poisson_tasks.generator import generate as real

    path = prereg(
        tmp_path,
        arms=["depth:d1"],
        tasks=4,
        attempts=1,
        base_url=server.base_url,
        execution={"concurrency": 1},
    )
    bad_seed = load_preregistration(path).seeds[2]

    def broken(arm: str, seed: int, controls: bool = True) -> Any:
        if seed == bad_seed:
            raise RuntimeError("generator bug")
        return real(arm, seed, controls=controls)

    monkeypatch.setattr("poisson_tasks.runner.session.generate", broken)
    with pytest.raises(RuntimeError, match="generator bug"):
        run_preregistration(path, tmp_path / "run", show_progress=False)
    session = read_header(tmp_path / "run").sessions[0]
    assert session.stop_reason == "interrupted" and "generator bug" in (session.detail or "")
    assert len(lines_of(tmp_path / "run")) == 2


def test_the_lines_uncached_input_is_named_so_and_old_lines_still_read(
    tmp_path: Path, server: ReferenceServer
) -> None:
    # issue 34 item 5: the line's usage.prompt_tokens was the uncached input, while the raw usage
    # stored beside it (the server's prompt_tokens) counts cached tokens too
    path = prereg(tmp_path, arms=["depth:d3"], tasks=2, attempts=1, base_url=server.base_url)
    run_preregistration(path, tmp_path / "run", show_progress=False)
    raw = [orjson.loads(x) for x in (tmp_path / "run" / EPISODES).read_bytes().splitlines()]
    for doc in raw:
        usage, responses = doc["usage"], doc["transcript"]["responses"]
        assert "prompt_tokens" not in usage
        served = sum(r["usage"]["prompt_tokens"] for r in responses)
        cached = sum(r["usage"]["prompt_tokens_details"]["cached_tokens"] for r in responses)
        assert cached > 0 and usage["cached_input_tokens"] == cached
        assert usage["uncached_input_tokens"] == served - cached
    # a line written before the rename (the published records are) reads the same figure
    old = []
    for doc in raw:
        usage = dict(doc["usage"])
        usage["prompt_tokens"] = usage.pop("uncached_input_tokens")
        old.append(orjson.dumps({**doc, "usage": usage}) + b"\n")
    (tmp_path / "run" / EPISODES).write_bytes(b"".join(old))
    assert [ln.usage.uncached_input_tokens for ln in lines_of(tmp_path / "run")] == [
        d["usage"]["uncached_input_tokens"] for d in raw
    ]
    records = records_from_run(tmp_path / "run")
    assert [r.uncached_input_tokens for r in records] == [
        d["usage"]["uncached_input_tokens"] for d in raw
    ]
