"""Pacing by the rate-limit headers: the pacer's arithmetic at given times, the reference endpoint's
limiter on a fake clock, and runs against a rate-limited endpoint on loopback (a limit that changes
mid-study, resets that arrive late, a server that sends no headers, a 429 storm).

Expected waits are worked out by hand from the rule in docs/pacing.md: a bucket refills at its
stated limit per minute, a request's charge is 1 request and its counted tokens.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from endpoint_double import Answer, Seen, serve
from synthetic_runs import reference_preregistration

from poisson_tasks.calibration import card_from_run, render_document
from poisson_tasks.calibration.artifact import RateLimited
from poisson_tasks.calibration.pacingline import met, pacing_text
from poisson_tasks.calibration.records import records_from_run
from poisson_tasks.calibration.sameness import TIME_AND_PLACEMENT
from poisson_tasks.prereg import validate_preregistration
from poisson_tasks.ratelimitheaders import Stated, read_stated
from poisson_tasks.reference import LimitChange, RateLimit, start_reference_server
from poisson_tasks.reference.app import ReferenceApp
from poisson_tasks.reference.ratelimit import Limiter
from poisson_tasks.runfolder import PacingRecord, read_header
from poisson_tasks.runner import run_preregistration
from poisson_tasks.runner.pacing import FLOOR, SLOWDOWN, Buckets, Ticket

# ------------------------------------------------------------------ the pacer, at given times


def ticket(tokens: int) -> Ticket:
    return Ticket(lambda: tokens)


def never_counted() -> int:
    raise AssertionError("counted a request's tokens with no limit stated")


def tokens_stated(limit: int, remaining: int) -> tuple[Stated, ...]:
    return (Stated("tokens", limit, remaining, None),)


def test_before_any_limit_nothing_waits_and_nothing_is_counted() -> None:
    state = Buckets()
    first = state.send(0.0, Ticket(never_counted))
    assert not state.active and state.wait(0.0, Ticket(never_counted)) == 0.0
    state.observe(0.1, first, ())  # a response without headers
    assert not state.active and state.in_flight == {}


def test_a_charge_waits_for_the_bucket_to_refill_at_the_limit_per_minute() -> None:
    state = Buckets()
    first = state.send(0.0, ticket(100))
    state.observe(1.0, first, tokens_stated(600, 100))  # 600 a minute: 10 tokens a second
    assert state.wait(1.0, ticket(100)) == 0.0
    assert state.wait(1.0, ticket(150)) == pytest.approx(5.0)  # 50 short at 10 a second
    assert state.wait(3.0, ticket(150)) == pytest.approx(3.0)
    sent = state.send(1.0, ticket(100))
    assert sent.seq == 1 and state.buckets["tokens"].level == pytest.approx(0.0)
    assert state.wait(1.0, ticket(30)) == pytest.approx(3.0)


def test_requests_are_charged_one_each() -> None:
    state = Buckets()
    state.observe(0.0, state.send(0.0, ticket(5)), (Stated("requests", 120, 1, None),))
    assert state.wait(0.0, ticket(10_000)) == 0.0
    state.send(0.0, ticket(10_000))
    assert state.wait(0.0, ticket(1)) == pytest.approx(0.5)  # 2 requests a second


def test_a_response_is_set_less_what_was_sent_after_it_and_is_in_flight() -> None:
    state = Buckets()
    a = state.send(0.0, Ticket(lambda: 40))  # sent before any limit came: counted when needed
    b = state.send(0.0, ticket(70))
    c = state.send(0.0, ticket(200))
    state.observe(0.0, b, tokens_stated(10_000, 5_000))
    assert state.buckets["tokens"].level == pytest.approx(5_000 - 200)  # c, not a
    state.observe(0.0, a, tokens_stated(10_000, 9_000))  # older than b's: may only lower
    assert state.buckets["tokens"].level == pytest.approx(5_000 - 200)
    state.observe(0.0, a, tokens_stated(10_000, 1_000))
    assert state.buckets["tokens"].level == pytest.approx(1_000 - 200)
    state.observe(0.0, c, tokens_stated(10_000, 3_000))
    assert state.buckets["tokens"].level == pytest.approx(3_000)
    assert state.in_flight == {}


def test_a_charge_above_the_limit_waits_for_a_full_bucket_not_for_ever() -> None:
    state = Buckets()
    state.observe(0.0, state.send(0.0, ticket(1)), tokens_stated(600, 0))
    assert state.wait(0.0, ticket(5_000)) == pytest.approx(60.0)


def test_a_changed_limit_is_taken_and_counted() -> None:
    state = Buckets()
    state.observe(0.0, state.send(0.0, ticket(1)), tokens_stated(600, 600))
    state.observe(0.0, state.send(0.0, ticket(1)), tokens_stated(1_200, 0))
    assert state.limit_changes == 1 and state.stated == {"tokens": 1_200}
    assert state.wait(0.0, ticket(20)) == pytest.approx(1.0)  # 20 tokens a second now


def test_a_429_holds_new_requests_for_its_retry_after() -> None:
    state = Buckets()
    state.observe(0.0, state.send(0.0, ticket(1)), tokens_stated(6_000, 6_000))
    refused = state.send(0.0, ticket(10))
    state.refused(0.0, refused, tokens_stated(6_000, 5_990), 2.5)
    assert state.wait(0.0, ticket(1)) == pytest.approx(2.5)
    assert state.wait(2.5, ticket(1)) == 0.0


def test_a_429_with_nothing_said_empties_every_bucket() -> None:
    state = Buckets()
    state.observe(0.0, state.send(0.0, ticket(1)), tokens_stated(600, 600))
    state.refused(0.0, state.send(0.0, ticket(10)), (), None)
    assert state.wait(0.0, ticket(10)) == pytest.approx(1.0 / SLOWDOWN)


def test_a_429_the_pacer_let_through_slows_it_once_then_it_recovers() -> None:
    state = Buckets()
    state.observe(0.0, state.send(0.0, ticket(1)), tokens_stated(600, 0))
    first, second = state.send(0.0, ticket(1)), state.send(0.0, ticket(1))
    state.refused(0.0, first, tokens_stated(600, 0), None)
    state.refused(0.0, second, tokens_stated(600, 0), None)  # sent before the cut: no second cut
    assert state.slowdowns == 1 and state.share(0.0) == pytest.approx(SLOWDOWN)
    assert state.wait(0.0, ticket(10)) == pytest.approx(1.0 / SLOWDOWN)
    assert state.share(60.0) == pytest.approx(SLOWDOWN + 0.05)
    assert state.share(3600.0) == 1.0
    later = state.send(0.0, ticket(1))
    state.refused(0.0, later, tokens_stated(600, 0), None)
    assert state.slowdowns == 2 and state.share(0.0) == pytest.approx(SLOWDOWN**2)
    for _ in range(40):
        state.refused(0.0, state.send(0.0, ticket(1)), tokens_stated(600, 0), None)
    assert state.share(0.0) == pytest.approx(FLOOR)


def test_a_429_before_any_limit_slows_nothing() -> None:
    state = Buckets()
    early = state.send(0.0, ticket(1))
    state.refused(0.0, early, tokens_stated(600, 0), 1.0)  # the first statement comes on a 429
    assert state.active and state.slowdowns == 0


# ------------------------------------------------------------------ the limiter, on a fake clock


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_limiter_admits_until_empty_then_refuses_with_when_to_retry() -> None:
    clock = Clock()
    limiter = Limiter(RateLimit(rpm=60, tpm=600), clock)
    first = limiter.admit(500)
    assert first.admitted
    assert read_stated(dict(first.headers)) == (
        Stated("requests", 60, 59, 1.0),
        Stated("tokens", 600, 100, 50.0),  # 500 short of full at 10 tokens a second
    )
    refused = limiter.admit(160)
    headers = dict(refused.headers)
    assert not refused.admitted and refused.short == "tokens"
    assert headers["retry-after-ms"] == "6000" and headers["retry-after"] == "6"
    assert "Limit 600, Used 500, Requested 160" in refused.message
    assert read_stated(headers)[1].remaining == 100  # a refused request is charged nothing
    clock.now += 6.0
    assert limiter.admit(160).admitted


def test_requests_per_minute_bind_on_their_own() -> None:
    clock = Clock()
    limiter = Limiter(RateLimit(rpm=2), clock)
    assert limiter.admit(10**9).admitted and limiter.admit(1).admitted
    refused = limiter.admit(1)
    assert refused.short == "requests" and dict(refused.headers)["retry-after-ms"] == "30000"


def test_a_limit_changes_at_its_time_and_a_bucket_is_cut_to_a_lower_one() -> None:
    clock = Clock()
    limiter = Limiter(RateLimit(tpm=6_000, changes=(LimitChange(10.0, None, 600),)), clock)
    assert limiter.admit(100).admitted  # the first request starts the clock
    clock.now += 10.0
    answer = limiter.admit(100)
    assert read_stated(dict(answer.headers)) == (Stated("tokens", 600, 500, 10.0),)


def test_a_late_reset_refills_slower_than_the_headers_say() -> None:
    clock = Clock()
    limiter = Limiter(RateLimit(tpm=600, reset_late_s=60.0), clock)
    answer = limiter.admit(600)
    assert dict(answer.headers)["x-ratelimit-reset-tokens"] == "1m0s"  # full in a minute, it says
    clock.now += 60.0
    late = limiter.admit(600)
    assert not late.admitted  # but only half is back
    assert read_stated(dict(late.headers))[0].remaining == 300
    assert dict(late.headers)["retry-after-ms"] == "60000"  # its Retry-After is the honest one


def test_without_retry_after_a_429_says_only_the_limits() -> None:
    limiter = Limiter(RateLimit(tpm=100, retry_after=False), Clock())
    refused = limiter.admit(101)
    assert not refused.admitted and "retry-after" not in dict(refused.headers)
    assert "Request too large" in refused.message


def test_a_charge_above_the_limit_never_gets_a_retry_after() -> None:
    refused = Limiter(RateLimit(tpm=100), Clock()).admit(101)
    assert not refused.admitted and "retry-after-ms" not in dict(refused.headers)


def test_a_drained_limiter_starts_empty() -> None:
    refused = Limiter(RateLimit(rpm=60, drained=True), Clock()).admit(1)
    assert not refused.admitted and dict(refused.headers)["retry-after-ms"] == "1000"


@pytest.mark.parametrize(
    "bad",
    [{"rpm": 0}, {"tpm": -5}, {"reset_late_s": -1.0}, {"changes": (LimitChange(-1.0, 5, 5),)}],
)
def test_a_bad_limit_is_refused(bad: dict[str, Any]) -> None:
    from poisson_tasks.errors import ReferenceServerError

    with pytest.raises(ReferenceServerError):
        RateLimit(**bad)


CHAT_BODY = json.dumps(
    {"model": "oracle", "messages": [{"role": "user", "content": "hello"}]}
).encode()


def test_the_endpoint_sends_the_headers_only_when_started_with_a_limit() -> None:
    plain = ReferenceApp().handle("POST", "/v1/chat/completions", {}, CHAT_BODY)
    assert plain.status == 200 and not any(k.startswith("x-ratelimit") for k, _ in plain.headers)
    limited = ReferenceApp(rate_limit=RateLimit(rpm=1))
    first = limited.handle("POST", "/v1/chat/completions", {}, CHAT_BODY)
    assert first.status == 200 and dict(first.headers)["x-ratelimit-remaining-requests"] == "0"
    second = limited.handle("POST", "/v1/chat/completions", {}, CHAT_BODY)
    error = json.loads(second.body)["error"]
    assert second.status == 429 and error["code"] == "rate_limit_exceeded"
    assert error["type"] == "requests" and "retry-after" in dict(second.headers)


# ------------------------------------------------------------------ runs on loopback


def plan_doc(tasks: int, **execution: Any) -> dict[str, Any]:
    return reference_preregistration(
        "pacing",
        ["depth:d1"],
        tasks=tasks,
        seed_string="range",
        decoding={"max_completion_tokens": 64},
        execution={"concurrency": 4, "backoff_s": 0.05, "backoff_max_s": 0.5, **execution},
    )


def run_against(base_url: str, doc: dict[str, Any], out: Path) -> Any:
    doc["model"]["base_url"] = base_url
    return run_preregistration(validate_preregistration(doc), out, show_progress=False)


def rate_limited_count(folder: Path) -> int:
    return sum(r.rate_limited for r in records_from_run(folder))


def test_a_limit_that_changes_mid_study_is_followed(tmp_path: Path) -> None:
    # drained: an account another client has just used up, so the pacing starts at once
    limit = RateLimit(rpm=1_200, changes=(LimitChange(0.5, 600, None),), drained=True)
    with start_reference_server(rate_limit=limit) as server:
        started = time.perf_counter()
        summary = run_against(server.base_url, plan_doc(10), tmp_path / "run")
        wall = time.perf_counter() - started
    pacing = read_header(tmp_path / "run").sessions[-1].pacing
    assert summary.outcomes == {"passed": 10}
    assert pacing is not None and pacing.applied and pacing.limit_changes == 1
    assert pacing.stated == {"requests": 600}
    # only the first round, sent before any header came, meets an empty bucket
    assert rate_limited_count(tmp_path / "run") <= 4
    assert wall >= 20 / 20  # 20 requests, none faster than 20 a second


def test_resets_that_arrive_late_cost_a_few_429s_and_lose_nothing(tmp_path: Path) -> None:
    # the headers say 20 requests a second; the bucket refills at 10
    limit = RateLimit(rpm=1_200, reset_late_s=60.0, drained=True)
    with start_reference_server(rate_limit=limit) as server:
        started = time.perf_counter()
        summary = run_against(server.base_url, plan_doc(15, max_retries=6), tmp_path / "run")
        wall = time.perf_counter() - started
    pacing = read_header(tmp_path / "run").sessions[-1].pacing
    assert summary.outcomes == {"passed": 15} and summary.complete
    assert pacing is not None and pacing.slowdowns >= 1
    met = rate_limited_count(tmp_path / "run")
    assert met == summary.retries  # every retry here was a 429, and every 429 is counted
    assert met <= 4 + 6  # the first round, then a few until the pacer has slowed down
    assert wall >= 30 / 10


class Recorder:
    """A loopback double that answers as the oracle, without rate-limit headers, and records
    each request's bytes and how many were in flight at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.in_flight = 0
        self.most = 0

    def __call__(self, seen: Seen, oracle: dict[str, Any]) -> Answer | None:
        with self.lock:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
        time.sleep(0.02)  # long enough for the other episodes' requests to arrive
        with self.lock:
            self.in_flight -= 1
        return None


@pytest.mark.parametrize("concurrency", [1, 4])
def test_a_server_without_headers_is_driven_exactly_as_with_pacing_off(
    tmp_path: Path, concurrency: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    import poisson_tasks.runner.endpoint as endpoint

    def counted(*args: Any) -> int:
        raise AssertionError("pacing counted a request's tokens against a server with no limit")

    monkeypatch.setattr(endpoint, "request_tokens", counted)
    seen: dict[str, tuple[list[bytes], int]] = {}
    for pace in ("headers", "off"):
        recorder = Recorder()
        with serve(recorder) as double:
            doc = plan_doc(6, concurrency=concurrency, pace=pace)
            doc["model"] = {"provider": "openai-compatible", "model": "double-model"}
            run_against(double.base_url, doc, tmp_path / pace)
            bodies = [json.dumps(s.body, sort_keys=True).encode() for s in double.requests]
            seen[pace] = (bodies, recorder.most)
        pacing = read_header(tmp_path / pace).sessions[-1].pacing
        assert pacing is not None and not pacing.applied and pacing.held == 0
    (paced, most_paced), (plain, most_plain) = seen["headers"], seen["off"]
    assert most_paced == most_plain == concurrency
    if concurrency == 1:
        assert paced == plain  # the same requests in the same order
    else:
        assert Counter(paced) == Counter(plain)


def storm(seen: Seen, oracle: dict[str, Any]) -> Answer:
    """Every request refused: a drained account, asking for 50 s."""
    headers = {
        "x-ratelimit-limit-tokens": "30000",
        "x-ratelimit-remaining-tokens": "0",
        "x-ratelimit-reset-tokens": "1m0s",
        "retry-after": "50",
    }
    body = {
        "error": {"message": "Rate limit reached", "type": "tokens", "code": "rate_limit_exceeded"}
    }
    return Answer(429, body, headers)


@pytest.mark.parametrize("pace", ["headers", "off"])
def test_a_429_storm_is_bounded_and_counted(tmp_path: Path, pace: str) -> None:
    with serve(storm) as double:
        doc = plan_doc(3, concurrency=3, pace=pace, max_retries=3, retry_after_max_s=0.1)
        doc["model"] = {"provider": "openai-compatible", "model": "double-model"}
        started = time.perf_counter()
        summary = run_against(double.base_url, doc, tmp_path / "run")
        wall = time.perf_counter() - started
        requests = len(double.requests)
    assert summary.outcomes == {"api_error": 3}
    assert summary.retries == 3 * 3 and requests == 3 * 4
    assert rate_limited_count(tmp_path / "run") == requests
    # every wait is held to retry_after_max_s (0.1 s), the pacer's pause too, not Retry-After's 50 s:
    # three episodes at once, each four attempts, so about 0.3 s of waiting, plus the runner
    assert wall < 10.0


def test_the_card_states_the_pacing_and_the_429s(tmp_path: Path) -> None:
    with start_reference_server(rate_limit=RateLimit(rpm=1_200, drained=True)) as server:
        run_against(server.base_url, plan_doc(6), tmp_path / "run")
    artifact = card_from_run(tmp_path / "run")
    met = rate_limited_count(tmp_path / "run")
    assert artifact.rate_limited is not None and artifact.rate_limited.responses == met
    lines = [ln for ln in render_document(artifact).splitlines() if ln.startswith("- pacing:")]
    assert len(lines) == 1
    assert lines[0].startswith(
        "- pacing: by the endpoint's rate-limit headers, last stated 1,200 requests a minute; "
    )
    assert lines[0].endswith(f"{met} responses were 429 (rate limited), in {met} episodes") or (
        met == 1 and lines[0].endswith("1 response was 429 (rate limited), in 1 episode")
    )


def test_a_card_of_a_run_on_a_server_without_headers_says_pacing_was_not_applied(
    tmp_path: Path,
) -> None:
    with start_reference_server() as server:
        run_against(server.base_url, plan_doc(2), tmp_path / "run")
    text = render_document(card_from_run(tmp_path / "run"))
    assert (
        "- pacing: by rate-limit headers, not applied: the endpoint stated no rate limit; "
        "no response was 429 (rate limited)"
    ) in text.splitlines()


# ------------------------------------------------------------------ execution.pace


ROOT = Path(__file__).resolve().parents[1]


def test_the_default_pace_leaves_every_written_hash_alone() -> None:
    for card in ("reference-noisy", "reference-oracle", "reference-overshoot"):
        stored = json.loads((ROOT / "calibration" / card / "run.json").read_text())
        plan = validate_preregistration(stored["preregistration"])
        assert plan.preregistration.execution.pace == "headers"
        assert plan.preregistration_hash == stored["preregistration_hash"]
    explicit = plan_doc(2, pace="headers")
    assert (
        validate_preregistration(explicit).preregistration_hash
        == validate_preregistration(plan_doc(2)).preregistration_hash
    )


def test_pace_off_is_recorded_in_the_hash_but_not_in_the_measurement() -> None:
    paced, off = (
        validate_preregistration(plan_doc(2)),
        validate_preregistration(plan_doc(2, pace="off")),
    )
    assert off.preregistration.model_dump(mode="json")["execution"]["pace"] == "off"
    assert off.preregistration_hash != paced.preregistration_hash
    assert off.measurement_hash == paced.measurement_hash  # a resumed session may change it


def test_an_unquoted_yaml_off_is_off_and_a_wrong_pace_is_one_problem() -> None:
    import yaml

    from poisson_tasks.errors import PreregistrationError

    doc = plan_doc(2)
    doc["execution"].update(yaml.safe_load("pace: off"))  # YAML 1.1 reads it as false
    assert validate_preregistration(doc).preregistration.execution.pace == "off"
    doc["execution"]["pace"] = "fast"
    with pytest.raises(PreregistrationError) as err:
        validate_preregistration(doc)
    assert err.value.problems == ["execution.pace: Input should be 'headers' or 'off' (got 'fast')"]


# ------------------------------------------------------------------ the card's line


RUNNER = "poisson-tasks runner 1.0"


@pytest.mark.parametrize(
    ("record", "harness", "text"),
    [
        (
            PacingRecord(pace="off", applied=False),
            RUNNER,
            "off (execution.pace: off): requests went out at the concurrency alone",
        ),
        (
            PacingRecord(pace="headers"),
            RUNNER,
            "by rate-limit headers; what it did was not recorded (the session did not close)",
        ),
        (
            PacingRecord(pace="headers", applied=True),
            "verifiers 0.4.0 taskset poisson-tasks-verifiers, null harness",
            "by rate-limit headers, not applied: the verifiers-null harness sends its own requests",
        ),
        (
            PacingRecord(
                pace="headers",
                applied=True,
                stated={"requests": 500, "tokens": 200_000, "tokens_usage_based": 150_000},
                limit_changes=1,
                slowdowns=3,
                held=1234,
                held_s=56.78,
            ),
            RUNNER,
            "by the endpoint's rate-limit headers, last stated 500 requests and 200,000 tokens and "
            "150,000 tokens (usage-based) a minute; the stated limit changed once; it slowed down "
            "3 times after a 429; 1,234 requests held before sending, 56.8 s in all",
        ),
    ],
)
def test_each_pacing_reads_in_words(record: PacingRecord, harness: str, text: str) -> None:
    assert pacing_text(record, harness) == text


def test_the_429s_read_in_words() -> None:
    assert met(RateLimited(responses=0, episodes=0)) == "no response was 429 (rate limited)"
    assert (
        met(RateLimited(responses=1, episodes=1))
        == "1 response was 429 (rate limited), in 1 episode"
    )
    assert met(RateLimited(responses=1500, episodes=7)) == (
        "1,500 responses were 429 (rate limited), in 7 episodes"
    )


def test_the_429s_are_time_not_a_difference_between_two_cards() -> None:
    assert "rate_limited" in {e.path for e in TIME_AND_PLACEMENT}
