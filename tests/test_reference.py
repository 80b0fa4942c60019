"""The reference endpoint: policies played against generated tasks over real HTTP on loopback.

Each episode is played like a runner would: send the bundle's messages and tools, apply the returned
tool calls through the engine, send the 52-byte lines back as tool messages, until a reply; then
verify() judges it.
"""

from __future__ import annotations

import hashlib
import json
import math
import socket
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import httpx
import openai
import orjson
import pytest
from typer.testing import CliRunner

from poisson_tasks import __version__
from poisson_tasks.arms import ArmSpec, all_arms, parse_arm_id
from poisson_tasks.bundle import TaskBundle, ToolCall
from poisson_tasks.cli import app as cli_app
from poisson_tasks.domain.engine import apply, initial_state
from poisson_tasks.errors import PolicyError, ReferenceServerError
from poisson_tasks.generator import generate
from poisson_tasks.generator.assemble import BUILDERS
from poisson_tasks.reference import (
    POLICY_NAMES,
    ChatRequest,
    flaky_fault,
    graded_expected,
    noisy_expected,
    noisy_rates,
    parse_model,
    respond,
    start_reference_server,
)
from poisson_tasks.reference.expected import overshoot_possible
from poisson_tasks.reference.server import ReferenceServer
from poisson_tasks.verifier import EpisodeVerdict, verify

SEEDS = range(20)
KNOBS_BUILT = sorted(BUILDERS)
Ask = Callable[[list[dict[str, Any]]], tuple[dict[str, Any], str]]


@cache
def bundle(arm: str, seed: int) -> TaskBundle:
    return generate(arm, seed)


def chat(b: TaskBundle) -> dict[str, Any]:
    """A bundle's opening request, as keyword arguments of chat.completions.create."""
    return {"messages": b.messages(), "tools": b.tools}


@dataclass
class Played:
    verdict: EpisodeVerdict
    finishes: list[str] = field(default_factory=list)
    replies: list[dict[str, Any]] = field(default_factory=list)


def play(b: TaskBundle, ask: Ask, max_turns: int = 64) -> Played:
    """One episode of at most `max_turns` model calls; a last call still calling is turn_limit."""
    messages = b.messages()
    state = initial_state(b.engine)
    turns: list[list[ToolCall]] = []
    out = Played(verdict=None)  # type: ignore[arg-type]
    for _ in range(max_turns):
        message, finish = ask(messages)
        out.finishes.append(finish)
        out.replies.append(message)
        calls = message.get("tool_calls") or []
        if not calls:
            out.verdict = verify(b, turns, True, False)
            return out
        messages = [
            *messages,
            {"role": "assistant", "content": message.get("content"), "tool_calls": calls},
        ]
        turn = []
        for tc in calls:
            raw = tc["function"]["arguments"]
            try:
                args = json.loads(raw)
            except ValueError:
                args = None
            call = ToolCall(
                name=tc["function"]["name"],
                arguments=args if isinstance(args, dict) else None,
                raw_arguments=raw,
            )
            state, line = apply(b.engine, state, call.name, call.arguments)
            messages.append({"role": "tool", "tool_call_id": tc["id"], "content": line})
            turn.append(call)
        turns.append(turn)
    out.verdict = verify(b, turns, False, True)
    return out


def check_usage(usage: Any) -> None:
    assert usage is not None
    assert usage.prompt_tokens > 0 and usage.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert 0 <= usage.prompt_tokens_details.cached_tokens < usage.prompt_tokens
    assert usage.completion_tokens_details.reasoning_tokens >= 0


def http_ask(
    client: openai.OpenAI,
    model: str,
    tools: list[dict[str, Any]],
    seed: int | None = None,
    user: str | None = None,
) -> Ask:
    def ask(messages: list[dict[str, Any]]) -> tuple[dict[str, Any], str]:
        extra: dict[str, Any] = {"messages": messages, "tools": tools}
        if seed is not None:
            extra["seed"] = seed
        if user:
            extra["user"] = user
        r = client.chat.completions.create(model=model, **extra)
        check_usage(r.usage)
        assert r.system_fingerprint == f"ref-{__version__}-{model.partition('?')[0]}"
        m = r.choices[0].message
        calls = [
            {
                "id": tc.id,
                "type": "function",
                "function": {"name": tc.function.name, "arguments": tc.function.arguments},
            }
            for tc in m.tool_calls or []
        ]
        assert (r.choices[0].finish_reason == "tool_calls") == bool(calls)
        return {"content": m.content, "tool_calls": calls}, r.choices[0].finish_reason

    return ask


def check_usage_json(usage: dict[str, Any]) -> None:
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert 0 <= usage["prompt_tokens_details"]["cached_tokens"] < usage["prompt_tokens"]
    assert usage["completion_tokens_details"]["reasoning_tokens"] >= 0


def httpx_ask(
    http: httpx.Client, model: str, tools: list[dict[str, Any]], seed: int | None = None
) -> Ask:
    """The same exchange as http_ask through plain httpx (the bulk sweeps: the openai client's own
    request transform costs more per call than the whole server does)."""

    def ask(messages: list[dict[str, Any]]) -> tuple[dict[str, Any], str]:
        payload: dict[str, Any] = {"model": model, "messages": messages, "tools": tools}
        if seed is not None:
            payload["seed"] = seed
        r = http.post(
            "/chat/completions",
            content=orjson.dumps(payload),
            headers={"content-type": "application/json"},
        )
        assert r.status_code == 200, r.text
        out = orjson.loads(r.content)
        check_usage_json(out["usage"])
        choice = out["choices"][0]
        message = choice["message"]
        assert (choice["finish_reason"] == "tool_calls") == bool(message.get("tool_calls"))
        return {
            "content": message.get("content"),
            "tool_calls": message.get("tool_calls") or [],
        }, choice["finish_reason"]

    return ask


def local_ask(
    model: str, tools: list[dict[str, Any]], seed: int | None = None, user: str | None = None
) -> Ask:
    spec = parse_model(model)
    tools_json = orjson.dumps(tools, option=orjson.OPT_SORT_KEYS).decode()

    def ask(messages: list[dict[str, Any]]) -> tuple[dict[str, Any], str]:
        reply = respond(spec, ChatRequest(messages, tools_json, seed, user))
        calls = [
            {
                "id": f"call_{len(messages)}_{i}",
                "type": "function",
                "function": {"name": n, "arguments": a},
            }
            for i, (n, a) in enumerate(reply.calls)
        ]
        return {"content": reply.content, "tool_calls": calls}, "tool_calls" if calls else "stop"

    return ask


@pytest.fixture(scope="module")
def client(server: ReferenceServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=30)


@pytest.fixture(scope="module")
def served() -> Any:
    """The endpoint in its own process (start_reference_server(process=True), which runs
    `poisson-tasks serve-reference`): the bulk sweeps run against it, so the client and the server
    do not share one interpreter lock."""
    with start_reference_server(process=True) as s:
        yield s.base_url


@pytest.fixture(scope="module")
def http(served: str) -> Any:
    with httpx.Client(base_url=served, timeout=30) as h:
        yield h


# --- the oracle and the overshoot policy on every arm of every knob the generator builds ---


@pytest.mark.parametrize("knob", KNOBS_BUILT)
def test_oracle_solves_every_arm_over_http(knob: str, http: httpx.Client) -> None:
    for spec in all_arms(knob):
        for seed in SEEDS:
            b = bundle(spec.id, seed)
            played = play(b, httpx_ask(http, "oracle", b.tools))
            v = played.verdict
            assert v.passed and v.outcome == "passed", (
                spec.id,
                seed,
                v.outcome,
                played.replies[-1],
            )
            assert v.calls == b.min_calls == len(b.reference_calls), (spec.id, seed)
            assert len(played.finishes) == b.reference_turns
            assert played.finishes[-1] == "stop"


@pytest.mark.parametrize("knob", KNOBS_BUILT)
def test_oracle_through_the_openai_client(knob: str, client: openai.OpenAI) -> None:
    for spec in all_arms(knob)[::2]:
        b = bundle(spec.id, 11)
        played = play(b, http_ask(client, "oracle", b.tools, seed=11, user=f"{spec.id}|11|0"))
        assert played.verdict.outcome == "passed", (spec.id, played.replies[-1])


@pytest.mark.parametrize("arm", ["shape:w4", "spread:p4", "faults:f4", "arguments:a8"])
def test_oracle_parallel_makes_independent_calls_together(arm: str, http: httpx.Client) -> None:
    for seed in range(5):
        b = bundle(arm, seed)
        played = play(b, httpx_ask(http, "oracle?parallel=1", b.tools))
        assert played.verdict.outcome == "passed"
        widest = max(len(r["tool_calls"]) for r in played.replies)
        assert widest == {"shape:w4": 4, "spread:p4": 4}.get(arm, 1)


@pytest.mark.parametrize("knob", KNOBS_BUILT)
def test_overshoot_policy_overshoots_below_the_top(knob: str, http: httpx.Client) -> None:
    for spec in all_arms(knob):
        for seed in range(5):
            b = bundle(spec.id, seed)
            v = play(b, httpx_ask(http, "overshoot", b.tools)).verdict
            can = "overshoot" in b.negative_controls
            assert v.outcome == ("overshoot" if can else "passed"), (spec.id, seed, v.outcome)
            assert v.leaky_pass
            if spec.knob == "depth":
                assert v.goal_stages == [8]  # the top of the ladder the block offers


def test_overshoot_policy_on_every_seed_of_depth_below_the_top() -> None:
    for level in (1, 2, 3, 5):
        for seed in SEEDS:
            b = bundle(f"depth:d{level}", seed)
            v = play(b, local_ask("overshoot", b.tools)).verdict
            assert v.outcome == "overshoot" and v.calls == 8


# --- the other scripted failures ------------------------------------------------------------------


@pytest.mark.parametrize("knob", KNOBS_BUILT)
def test_no_call_never_calls_a_tool(knob: str, client: openai.OpenAI) -> None:
    b = bundle(all_arms(knob)[0].id, 0)
    played = play(b, http_ask(client, "no-call", b.tools))
    assert played.verdict.calls == 0 and played.verdict.outcome == "wrong_state"
    assert played.finishes == ["stop"]
    assert "entry code" in played.replies[0]["content"]


def test_text_call_writes_the_oracle_call_as_text(client: openai.OpenAI) -> None:
    b = bundle("depth:d3", 4)
    r = client.chat.completions.create(model="text-call", **chat(b))
    m = r.choices[0].message
    assert r.choices[0].finish_reason == "stop" and not m.tool_calls
    assert m.content is not None and m.content.startswith("<tool_call>")
    body = json.loads(m.content.removeprefix("<tool_call>").removesuffix("</tool_call>"))
    first = b.reference_calls[0]
    assert body == {"name": first.name, "arguments": first.arguments}
    check_usage(r.usage)


def test_garbage_sends_unparseable_arguments(client: openai.OpenAI) -> None:
    for arm in ("depth:d2", "arguments:a4", "spread:p2"):
        b = bundle(arm, 1)
        played = play(b, http_ask(client, "garbage", b.tools), max_turns=b.reference_turns + 2)
        raw = played.replies[0]["tool_calls"][0]["function"]["arguments"]
        with pytest.raises(ValueError):
            json.loads(raw)
        assert played.verdict.outcome == "malformed_call"
        assert played.verdict.malformed_clause == 1


def test_garbage_rate_zero_is_the_oracle(client: openai.OpenAI) -> None:
    b = bundle("faults:f2", 3)
    assert play(b, http_ask(client, "garbage?p_garbage=0", b.tools)).verdict.outcome == "passed"


# --- the noisy policy: observed rates against the analytic formula --------------------------------

NOISY_CASES = [
    # arm, p_wrong_tool, p_early_stop, p_overshoot, max_turns (None: no cap within 64)
    ("depth:d3", 0.15, 0.05, 0.3, None),
    ("faults:f2", 0.2, 0.05, 0.5, None),
    ("shape:w2", 0.1, 0.05, 0.4, 6),
    ("spread:p4", 0.1, 0.03, 0.3, 9),
    ("distractor:r14@k16", 0.3, 0.1, 0.9, 4),
]
EPISODES = 600


def _noisy_model(pw: float, ps: float, po: float) -> str:
    return f"noisy?p_wrong_tool={pw}&p_early_stop={ps}&p_overshoot={po}"


@pytest.mark.parametrize("case", NOISY_CASES, ids=[c[0] for c in NOISY_CASES])
def test_noisy_outcome_rates_match_the_formula(
    case: tuple[str, float, float, float, int | None],
) -> None:
    arm, pw, ps, po, cap = case
    model = _noisy_model(pw, ps, po)
    expected = noisy_expected(arm, pw, ps, po, max_turns=cap or 64)
    seen: Counter[str] = Counter()
    for i in range(EPISODES):
        b = bundle(arm, i % 20)
        seen[
            play(
                b, local_ask(model, b.tools, seed=i, user=f"{arm}|{i % 20}|{i}"), cap or 64
            ).verdict.outcome
        ] += 1
    assert set(seen) <= {"passed", "overshoot", "wrong_state", "turn_limit"}
    for outcome, p in [
        ("passed", expected.passed),
        ("overshoot", expected.overshoot),
        ("wrong_state", expected.wrong_state),
        ("turn_limit", expected.turn_limit),
    ]:
        sigma = math.sqrt(max(p * (1 - p), 1e-4) / EPISODES)
        assert abs(seen[outcome] / EPISODES - p) <= 4 * sigma, (arm, outcome, seen, expected)
    assert 0.05 < expected.passed < 0.95  # the check is not trivially satisfied


def test_noisy_over_http_replays_the_in_process_draws(client: openai.OpenAI) -> None:
    model = _noisy_model(0.3, 0.1, 0.5)
    outcomes: Counter[str] = Counter()
    for i in range(16):
        b = bundle("depth:d3", i % 5)
        over_http = play(b, http_ask(client, model, b.tools, seed=1000 + i))
        in_process = play(b, local_ask(model, b.tools, seed=1000 + i))
        assert over_http.verdict.outcome == in_process.verdict.outcome
        assert over_http.verdict.calls == in_process.verdict.calls
        outcomes[over_http.verdict.outcome] += 1
    assert len(outcomes) >= 2  # the seed changes what happens


def test_seed_ignoring_draws_ignore_the_seed_and_keep_the_noisy_rates() -> None:
    """seed-ignoring (a reference policy, labelled so): one request, sent again with the same seed
    and user tag, gets another reply (noisy's is the same every time); its rates are noisy's."""
    b = bundle("depth:d3", 0)
    first = local_ask("noisy?p_wrong_tool=0.5", b.tools, seed=7, user="depth:d3|0|0")
    again = local_ask("seed-ignoring?p_wrong_tool=0.5", b.tools, seed=7, user="depth:d3|0|0")
    opening = b.messages()
    assert len({json.dumps(first(opening)[0], sort_keys=True) for _ in range(20)}) == 1
    assert len({json.dumps(again(opening)[0], sort_keys=True) for _ in range(20)}) > 1
    expected = noisy_expected("depth:d3", 0.1, 0.1, 0.1)
    passed = sum(
        play(b, local_ask("seed-ignoring", b.tools, seed=1, user="same")).verdict.outcome
        == "passed"
        for _ in range(400)
    )
    sigma = math.sqrt(expected.passed * (1 - expected.passed) / 400)
    assert abs(passed / 400 - expected.passed) <= 4 * sigma, (passed, expected.passed)


def test_noisy_formula_sanity() -> None:
    perfect = noisy_expected("depth:d5", 0, 0, 0)
    assert perfect.passed == 1 and perfect.turn_limit == 0
    assert noisy_expected("depth:d8", 0, 0, 1).passed == 1  # nothing above the goal at d8
    assert noisy_expected("depth:d3", 0, 0, 1).overshoot == 1
    open_ended = noisy_expected("faults:f4", 0.2, 0.1, 0.3)
    capped = noisy_expected("faults:f4", 0.2, 0.1, 0.3, max_turns=400)
    assert open_ended.passed == pytest.approx(capped.passed)
    assert open_ended.wrong_state == pytest.approx(capped.wrong_state)
    r = noisy_rates(3, True, 0.1, 0.1, 0.2, max_turns=5)
    assert r.passed + r.overshoot + r.wrong_state + r.turn_limit == pytest.approx(1)
    q = 0.9 * 0.9 / (1 - 0.9 * 0.1)
    assert noisy_expected("depth:d3", 0.1, 0.1, 0.2).passed == pytest.approx(0.8 * q**3)


@pytest.mark.parametrize("knob", KNOBS_BUILT)
def test_formula_inputs_agree_with_the_bundles(knob: str) -> None:
    for spec in all_arms(knob):
        b = bundle(spec.id, 0)
        assert overshoot_possible(spec) == ("overshoot" in b.negative_controls), spec.id
        assert spec.min_calls == len(b.reference_calls), spec.id


# --- graded: the oracle that gives up after its own first call, at a rate set per level ---------

SEEDED_HISTORY_ARMS = sorted(
    spec.id
    for knob in KNOBS_BUILT
    for spec in all_arms(knob)
    if not isinstance(bundle(spec.id, 0).prompt, str)
)


@pytest.mark.parametrize("arm", SEEDED_HISTORY_ARMS)
def test_graded_gives_up_only_after_a_call_of_its_own(arm: str) -> None:
    """A seeded history's calls are not graded's: at a give-up chance of 1 it still makes its
    first call (the episode is never a no-call one), and gives up once that call is answered."""
    spec = parse_arm_id(arm)
    assert SEEDED_HISTORY_ARMS  # the depth controls, history's levels, faults' control
    for seed in range(3):
        b = bundle(arm, seed)
        model = "graded?p_low=1&p_high=1"
        played = play(b, local_ask(model, b.tools, user=f"{arm}|{seed}|0"))
        assert played.verdict.calls == 1, (arm, seed, played.replies[0])
        expected = "passed" if spec.min_calls == 1 else "wrong_state"
        assert played.verdict.outcome == expected, (arm, seed)


GRADED_CASES = [
    ("depth:d2", "graded?p_low=0.1&p_high=0.8"),
    ("depth:d8", "graded?p_low=0.1&p_high=0.8"),
    ("depth:d2+h5", "graded?p_low=0.1&p_high=0.8"),
    ("depth:d2+h5", "graded?p_low=0.1&p_high=0.8&length_follows=1"),
    ("depth:d1+h8", "graded?p_low=0.5&p_high=0.5"),
    ("faults:f0+len(f4)", "graded?faults_high=0.8&length_follows=1"),
    ("history:t600", "graded?history_low=0.3&history_high=0.6"),
]


@pytest.mark.parametrize("case", GRADED_CASES, ids=[f"{a}-{m}" for a, m in GRADED_CASES])
def test_graded_pass_rates_match_their_expectation(case: tuple[str, str]) -> None:
    """Observed pass rates against graded_expected, within four binomial standard errors; strict
    and leaky agree (graded never overshoots), and every episode makes a tool call."""
    arm, model = case
    expected = graded_expected(arm, model)
    passed = 0
    for i in range(EPISODES):
        b = bundle(arm, i % 20)
        verdict = play(b, local_ask(model, b.tools, user=f"{arm}|{i % 20}|{i}")).verdict
        assert verdict.passed == verdict.leaky_pass and verdict.calls >= 1, (arm, i)
        passed += verdict.passed
    sigma = math.sqrt(max(expected * (1 - expected), 1e-4) / EPISODES)
    assert abs(passed / EPISODES - expected) <= 4 * sigma, (arm, model, passed, expected)


def test_graded_expectation_by_hand() -> None:
    """The arithmetic of the embedded default's comments, written out: the chance is linear in the
    level between depth's lowest (1) and highest (8) candidate, and a one-call task always passes."""
    model = "graded?p_low=0.1&p_high=0.8"
    assert graded_expected("depth:d2", model) == pytest.approx(1 - (0.1 + 0.7 * 1 / 7))
    assert graded_expected("depth:d5", model) == pytest.approx(1 - (0.1 + 0.7 * 4 / 7))
    assert graded_expected("depth:d8", model) == pytest.approx(0.2)
    assert graded_expected("depth:d1", model) == graded_expected("depth:d1+h8", model) == 1.0
    assert graded_expected("depth:d2+h5", model) == pytest.approx(0.8)
    assert graded_expected("depth:d2+h5", f"{model}&length_follows=1") == pytest.approx(0.5)
    with pytest.raises(ValueError, match="graded model"):
        graded_expected("depth:d2", "noisy")


# --- flaky: HTTP faults at declared, predictable rates --------------------------------------------


def test_flaky_faults_land_where_predicted(server: ReferenceServer) -> None:
    model = "flaky?p_500=0.2&p_429=0.2&p_slow=0.2&slow_s=0.4"
    spec = parse_model(model)
    b = bundle("depth:d2", 0)
    timeouts = 0
    with httpx.Client(base_url=server.base_url, timeout=0.15) as http:
        for i in range(40):
            body = orjson.dumps(
                {"model": model, "messages": b.messages(), "tools": b.tools, "seed": i % 25}
            )
            attempt = 1 if i >= 25 else 0  # seeds 0..14 are sent a second time
            want = flaky_fault(hashlib.blake2b(body, digest_size=16).hexdigest(), attempt, spec)
            try:
                r = http.post(
                    "/chat/completions", content=body, headers={"content-type": "application/json"}
                )
            except httpx.ReadTimeout:
                assert want == "slow", i
                timeouts += 1
                continue
            got = {500: "http_500", 429: "http_429", 200: None}[r.status_code]
            assert got == want, (i, got, want)
            if r.status_code != 200:
                assert "error" in r.json()
    assert timeouts > 0


def test_flaky_rates_over_http(http: httpx.Client, client: openai.OpenAI) -> None:
    p500, p429, n = 0.15, 0.1, 500
    model = f"flaky?p_500={p500}&p_429={p429}&p_slow=0"
    b = bundle("history:t300", 2)
    seen: Counter[int] = Counter()
    for i in range(n):
        body = orjson.dumps({"model": model, "messages": b.messages(), "tools": b.tools, "seed": i})
        r = http.post(
            "/chat/completions", content=body, headers={"content-type": "application/json"}
        )
        seen[r.status_code] += 1
        if r.status_code == 429:
            assert r.headers["retry-after-ms"] == "10" and r.headers["retry-after"] == "1"
        if r.status_code == 200:
            check_usage_json(r.json()["usage"])
    assert set(seen) <= {200, 429, 500}
    for status, p in ((500, p500), (429, p429)):
        assert abs(seen[status] / n - p) <= 4 * math.sqrt(p * (1 - p) / n), seen
    errors: Counter[str] = Counter()  # and the openai client sees them as its typed errors
    for i in range(40):
        try:
            client.chat.completions.create(model=model, **chat(b), seed=n + i)
        except openai.RateLimitError:
            errors["429"] += 1
        except openai.InternalServerError:
            errors["500"] += 1
    assert errors["429"] > 0 and errors["500"] > 0


def test_flaky_episodes_pass_with_client_retries(server: ReferenceServer) -> None:
    retrying = openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=8)
    for seed in range(5):
        b = bundle("faults:f2", seed)
        v = play(
            b, http_ask(retrying, "flaky?p_500=0&p_429=0.4&p_slow=0.1&slow_s=0.01", b.tools)
        ).verdict
        assert v.outcome == "passed"


# --- the wire: usage, determinism, auth, models, HTTP details -------------------------------------


def test_usage_is_deterministic_and_caches_the_previous_turn(client: openai.OpenAI) -> None:
    b = bundle("depth:d2", 5)
    first: Any = client.chat.completions.create(model="oracle", **chat(b))
    again = client.chat.completions.create(model="oracle", **chat(b))
    assert first.usage == again.usage and first.id == again.id and first.created == again.created
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    tc = first.choices[0].message.tool_calls[0]
    _, line = apply(
        b.engine, initial_state(b.engine), tc.function.name, json.loads(tc.function.arguments)
    )
    messages = [
        *b.messages(),
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": tc.id, "content": line},
    ]
    second: Any = client.chat.completions.create(
        model="oracle", **{**chat(b), "messages": messages}
    )
    assert second.usage.prompt_tokens_details.cached_tokens == first.usage.prompt_tokens - 3
    assert second.usage.prompt_tokens > first.usage.prompt_tokens


def test_reasoning_tokens_are_reported_inside_completion_tokens(client: openai.OpenAI) -> None:
    b = bundle("depth:d1", 0)
    plain: Any = client.chat.completions.create(model="oracle", **chat(b))
    thinking: Any = client.chat.completions.create(model="oracle?reasoning_tokens=40", **chat(b))
    assert thinking.usage.completion_tokens_details.reasoning_tokens == 40
    assert thinking.usage.completion_tokens == plain.usage.completion_tokens + 40


def test_max_tokens_cuts_the_reply_to_length(client: openai.OpenAI) -> None:
    b = bundle("depth:d1", 0)
    r = client.chat.completions.create(model="oracle", **chat(b), max_tokens=5)
    assert r.choices[0].finish_reason == "length" and not r.choices[0].message.tool_calls
    assert r.usage is not None and r.usage.completion_tokens <= 5


def test_wrong_or_missing_api_key_is_401() -> None:
    with start_reference_server(api_key="s3cret") as s:
        b = bundle("depth:d1", 0)
        for key in ("wrong", ""):
            bad = openai.OpenAI(base_url=s.base_url, api_key=key or "x", max_retries=0)
            if not key:
                r = httpx.post(
                    f"{s.base_url}/chat/completions",
                    json={"model": "oracle", "messages": b.messages()},
                )
                assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
                continue
            with pytest.raises(openai.AuthenticationError) as info:
                bad.chat.completions.create(model="oracle", **chat(b))
            assert info.value.code == "invalid_api_key"
            assert "s3cret" not in str(info.value)
        good = openai.OpenAI(base_url=s.base_url, api_key="s3cret", max_retries=0)
        assert good.chat.completions.create(model="oracle", **chat(b)).choices
        assert httpx.get(f"{s.url}/health").status_code == 200  # open, as vLLM's is


def test_models_health_and_version(server: ReferenceServer, client: openai.OpenAI) -> None:
    assert [m.id for m in client.models.list()] == list(POLICY_NAMES)
    assert client.models.retrieve("noisy").id == "noisy"
    for path in ("/health", "/version"):
        about = httpx.get(server.url + path).json()
        assert about["version"] == __version__ and about["policies"] == list(POLICY_NAMES)
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(
            model="gpt-5-nano", messages=[{"role": "user", "content": "hi"}]
        )
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(
            model="noisy?p_wrong_tool=2", messages=[{"role": "user", "content": "hi"}]
        )
    r = httpx.post(f"{server.base_url}/chat/completions", content=b"{not json")
    assert r.status_code == 400 and "error" in r.json()


def test_server_start_defaults_apply_and_model_string_overrides() -> None:
    with start_reference_server(policy_defaults={"noisy": {"p_early_stop": 1.0}}) as s:
        c = openai.OpenAI(base_url=s.base_url, api_key="x", max_retries=0)
        b = bundle("depth:d2", 0)
        stopped = c.chat.completions.create(model="noisy", **chat(b))
        assert not stopped.choices[0].message.tool_calls
        assert "p_early_stop=1" in stopped.model
        going = c.chat.completions.create(model="noisy?p_early_stop=0&p_wrong_tool=0", **chat(b))
        assert going.choices[0].message.tool_calls
    with pytest.raises(PolicyError):
        start_reference_server(policy_defaults={"noisy": {"p_nope": 1}})


def test_parse_model_errors_name_the_fix() -> None:
    assert parse_model("noisy?p_overshoot=0.5").get("p_overshoot") == 0.5
    assert (
        parse_model("noisy").model
        == "noisy?p_early_stop=0.1&p_overshoot=0.1&p_wrong_tool=0.1&reasoning_tokens=0"
    )
    for bad, words in [
        ("nosy", "policies"),
        ("noisy?p_wrong_tool", "key=value"),
        ("noisy?x=1", "parameters"),
        ("flaky?p_500=0.6&p_429=0.6", "add up"),
        ("oracle?parallel=0.5", "whole number"),
    ]:
        with pytest.raises(PolicyError, match=words):
            parse_model(bad)


def _raw(server: ReferenceServer, payload: bytes, reads: int) -> bytes:
    with socket.create_connection((server.host, server.port), timeout=5) as sock:
        sock.sendall(payload)
        data = b""
        while data.count(b"HTTP/1.1 ") < reads or not data.endswith(b"}"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        return data


def test_keep_alive_and_pipelining_on_one_connection(server: ReferenceServer) -> None:
    get = f"GET /health HTTP/1.1\r\nhost: {server.host}\r\n\r\n".encode()
    body = orjson.dumps({"model": "no-call", "messages": [{"role": "user", "content": "hi"}]})
    post = (
        f"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: {len(body)}\r\n\r\n"
    ).encode() + body
    data = _raw(server, get + post + get, 3)
    assert data.count(b"HTTP/1.1 200 OK") == 3 and data.count(b"connection: keep-alive") == 3
    assert data.index(b"no-call") > data.index(b"policies")  # answered in order


def test_chunked_body_and_connection_close(server: ReferenceServer) -> None:
    body = orjson.dumps({"model": "no-call", "messages": [{"role": "user", "content": "hi"}]})
    half = len(body) // 2
    chunked = (
        f"{half:x}\r\n".encode()
        + body[:half]
        + b"\r\n"
        + f"{len(body) - half:x}\r\n".encode()
        + body[half:]
        + b"\r\n0\r\n\r\n"
    )
    req = (
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n"
        b"transfer-encoding: chunked\r\nconnection: close\r\n\r\n"
    )
    data = _raw(server, req + chunked, 1)
    assert data.startswith(b"HTTP/1.1 200 OK") and b"connection: close" in data
    assert b"entry code" in data
    assert _raw(server, b"NONSENSE\r\n\r\n", 1).startswith(b"HTTP/1.1 400")


def test_async_client_and_close(server: ReferenceServer) -> None:
    import asyncio

    async def main() -> list[str]:
        async with openai.AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0) as c:
            b = bundle("block:k64", 1)
            rs = await asyncio.gather(
                *[c.chat.completions.create(model="oracle", **chat(b)) for _ in range(16)]
            )
            return [r.choices[0].finish_reason for r in rs]

    assert asyncio.run(main()) == ["tool_calls"] * 16
    with start_reference_server() as s:
        port = s.port
    time.sleep(0.05)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_cli_serve_reference_refuses_bad_options() -> None:
    runner = CliRunner()
    result = runner.invoke(cli_app, ["serve-reference", "--param", "noisy.p_wrong_tool=2"])
    assert result.exit_code == 2 and "error:" in result.output and "p_wrong_tool" in result.output
    with start_reference_server() as s:
        busy = runner.invoke(cli_app, ["serve-reference", "--port", str(s.port)])
        assert busy.exit_code == 2 and "pick another port" in busy.output
    with pytest.raises(ReferenceServerError), start_reference_server() as s2:
        start_reference_server(port=s2.port)


def test_arm_helpers_cover_the_design() -> None:
    assert isinstance(parse_arm_id("shape:w2"), ArmSpec)
    assert overshoot_possible(parse_arm_id("shape:w2")) and not overshoot_possible(
        parse_arm_id("shape:w1")
    )


def test_oracle_retries_unavailable_but_never_repeats_a_refused_call() -> None:
    b = bundle("depth:d2", 6)
    ask = local_ask("oracle", b.tools)
    first, _ = ask(b.messages())
    call = first["tool_calls"][0]

    def after(status: str) -> dict[str, Any]:
        line = f"000001 {status:<12} {'0' * 32}"
        history = [
            *b.messages(),
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call["id"], "content": line},
        ]
        return ask(history)[0]

    again = after("unavailable")["tool_calls"][0]["function"]
    assert again == call["function"]  # the same call, made again
    refused = after("bad_token")
    assert not refused["tool_calls"] and "cannot finish" in refused["content"]


def test_a_request_with_no_task_gets_a_reply_not_an_error(http: httpx.Client) -> None:
    text = "hello <|endoftext|> there"
    r = http.post(
        "/chat/completions",
        json={"model": "oracle", "messages": [{"role": "user", "content": text}]},
    )
    assert r.status_code == 200
    out = r.json()
    assert out["choices"][0]["finish_reason"] == "stop" and out["choices"][0]["message"]["content"]
    check_usage_json(out["usage"])


def test_a_server_bug_answers_500_and_keeps_serving(monkeypatch: pytest.MonkeyPatch) -> None:
    from poisson_tasks.reference.app import ReferenceApp

    def boom(self: ReferenceApp, *args: object) -> None:
        raise RuntimeError("boom")

    with start_reference_server() as s, httpx.Client(base_url=s.url) as h:
        monkeypatch.setattr(ReferenceApp, "handle", boom)
        r = h.get("/health")
        assert r.status_code == 500 and "boom" in r.json()["error"]["message"]
        monkeypatch.undo()
        assert h.get("/health").status_code == 200


def test_process_mode_carries_the_key_and_the_defaults() -> None:
    b = bundle("depth:d1", 0)
    defaults = {"noisy": {"p_early_stop": 1.0}}
    with start_reference_server(process=True, api_key="k3y", policy_defaults=defaults) as s:
        assert s.serving
        r = httpx.post(f"{s.base_url}/chat/completions", json={"model": "noisy", **chat(b)})
        assert r.status_code == 401
        good = openai.OpenAI(base_url=s.base_url, api_key="k3y", max_retries=0)
        reply = good.chat.completions.create(model="noisy", **chat(b))
        assert not reply.choices[0].message.tool_calls  # p_early_stop=1 from the defaults
        assert "p_early_stop=1" in reply.model
    assert not s.serving


def test_serve_reference_announces_its_address_policies_and_limits_in_one_line() -> None:
    import signal
    import subprocess
    import sys

    from poisson_tasks.policycatalogue import POLICY_NAMES

    serve = [sys.executable, "-m", "poisson_tasks.cli", "serve-reference"]
    served = subprocess.Popen(
        [*serve, "--port", "0", "--rpm", "1200", "--tpm", "90000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert served.stdout is not None
        line = served.stdout.readline().rstrip("\n")
    finally:
        served.send_signal(signal.SIGINT)
        served.wait(timeout=30)
    head, _, rest = line.partition(" (")
    assert head.startswith("serving reference policies at http://127.0.0.1:")
    assert head.endswith("/v1")
    assert rest == (
        f"{', '.join(POLICY_NAMES)}); 1,200 requests a minute; 90,000 tokens a minute; Ctrl-C stops"
    )
