"""runner.nulltrace: a verifiers null-harness trace read as the same verdict verify() gives.

The traces here are built the way the null harness records them (traces.jsonl's `nodes`, with the
tool server answering from the engine and the harness answering calls that never reach it), so
these run without the verifiers extra; the CI step with the extra checks real traces.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from poisson_tasks.arms import CONTROL_ARMS, KNOBS
from poisson_tasks.bundle import Episode, TaskBundle, ToolCall
from poisson_tasks.domain.engine import apply, initial_state
from poisson_tasks.generator import generate
from poisson_tasks.runner.nulltrace import read_turns, scores, verdict_info
from poisson_tasks.runner.verifiers_null import read_traces
from poisson_tasks.verifier import OUTCOMES, FormatReport, verify

LEVELS = ["depth:d3", "faults:f2", "history:t300"]
CONTROLS = [a for k in KNOBS for a in CONTROL_ARMS[k]]


def _args_text(call: ToolCall) -> str:
    if call.arguments is None:
        return call.raw_arguments or ""
    return json.dumps(call.arguments)


def null_trace(
    bundle: TaskBundle,
    turns: list[list[ToolCall]],
    *,
    final_text: str | None = "Done.",
    stop: str = "agent_completed",
) -> dict[str, Any]:
    """A trace as the null harness writes it: the tool server answers from its own ledger; a call
    whose arguments are not a JSON object, or that names no tool of the block, gets the harness's
    error text and never reaches the server."""
    nodes: list[dict[str, Any]] = []

    def add(message: dict[str, Any], sampled: bool = False) -> None:
        nodes.append(
            {"parent": len(nodes) - 1 if nodes else None, "message": message, "sampled": sampled}
        )

    for m in bundle.messages():
        add(m)
    state = initial_state(bundle.engine)
    names = set(bundle.tool_names)
    for t, turn in enumerate(turns):
        calls = [
            {"id": f"c{t}_{i}", "type": "function", "name": c.name, "arguments": _args_text(c)}
            for i, c in enumerate(turn)
        ]
        add({"role": "assistant", "content": None, "tool_calls": calls}, sampled=True)
        for wire, call in zip(calls, turn, strict=True):
            if call.arguments is None:
                answer = "error: invalid JSON in tool arguments; resend the call with valid JSON"
            elif call.name not in names:
                answer = f"error: unknown tool {call.name!r}"
            else:
                state, answer = apply(bundle.engine, state, call.name, call.arguments)
            add({"role": "tool", "tool_call_id": wire["id"], "content": answer, "name": call.name})
    if final_text is not None and stop == "agent_completed":
        add({"role": "assistant", "content": final_text}, sampled=True)
    return {"nodes": nodes, "stop_condition": stop, "errors": [], "calls": []}


def _episodes(bundle: TaskBundle) -> dict[str, Episode]:
    ref = Episode(turns=[[c] for c in bundle.reference_calls])
    return {"reference": ref, **bundle.negative_controls}


def _same(bundle: TaskBundle, ep: Episode, info: dict[str, Any], fmt: FormatReport) -> None:
    v = verify(bundle, ep.turns, ep.ended_with_reply, ep.turn_limit_hit, fmt)
    assert info["outcome"] == v.outcome
    assert info["passed"] == v.passed and info["leaky_pass"] == v.leaky_pass
    assert info["malformed_clause"] == v.malformed_clause
    assert info["goal_stages"] == v.goal_stages
    assert info["final_state"] == [list(r) for r in v.final_state]


@pytest.mark.parametrize("arm", [*LEVELS, *CONTROLS])
@pytest.mark.parametrize("seed", [0, 1])
def test_every_control_episode_reads_as_verify_gives(arm: str, seed: int) -> None:
    bundle = generate(arm, seed)
    for name, ep in _episodes(bundle).items():
        turns = [list(t) for t in ep.turns]
        stop = "max_turns" if ep.turn_limit_hit else "agent_completed"
        info = verdict_info(bundle, null_trace(bundle, turns, stop=stop))
        _same(bundle, ep, info, FormatReport())
        if name == "reference":
            assert info["outcome"] == "passed"


def test_unknown_tool_and_bad_json_are_malformed_and_stop_the_replay_check() -> None:
    bundle = generate("faults:f2", 3)
    ref = [[c] for c in bundle.reference_calls]
    for bad in (
        ToolCall(name="no_such_tool", arguments={"record_id": "x"}),
        ToolCall(name=bundle.reference_calls[0].name, arguments=None, raw_arguments='{"a": '),
    ):
        turns = [[bad], *ref]
        info = verdict_info(bundle, null_trace(bundle, turns))
        v = verify(bundle, turns, True, False)
        assert info["outcome"] == v.outcome == "malformed_call"
        assert info["malformed_clause"] == v.malformed_clause
        # The harness answered the bad call itself, so the engine's later lines carry other
        # sequence numbers than the replay's: that is the documented difference, not a mismatch.
        assert info["final_state"] == [list(r) for r in v.final_state]


def test_a_tool_answer_that_differs_from_the_replay_is_replay_mismatch() -> None:
    bundle = generate("depth:d3", 0)
    turns = [[c] for c in bundle.reference_calls]
    wire = null_trace(bundle, turns)
    tool_nodes = [n for n in wire["nodes"] if n["message"]["role"] == "tool"]
    tool_nodes[1]["message"]["content"] = "000002 ok           " + "0" * 32
    info = verdict_info(bundle, wire)
    assert info["outcome"] == "replay_mismatch" and not info["passed"]


def test_a_tool_call_written_as_text_is_format_clause_1() -> None:
    bundle = generate("depth:d3", 0)
    call = bundle.reference_calls[0]
    text = "<tool_call>\n" + json.dumps({"name": call.name, "arguments": call.arguments}) + "\n"
    info = verdict_info(bundle, null_trace(bundle, [], final_text=text + "</tool_call>"))
    assert info["outcome"] == "malformed_call" and info["malformed_clause"] == 1
    assert info["unparsed_text_calls"] == 1


def test_plain_text_reply_without_a_call_is_the_models_failure() -> None:
    bundle = generate("depth:d3", 0)
    info = verdict_info(bundle, null_trace(bundle, [], final_text="Which record?"))
    assert info["outcome"] == "wrong_state" and info["tool_calls"] == 0
    assert info["model_calls"] == 1


@pytest.mark.parametrize(
    ("stop", "errors", "calls", "outcome"),
    [
        ("provider_error", [{"type": "ProviderError", "message": "upstream 500"}], [], "api_error"),
        (
            "agent_completed",
            [],
            [{"error": {"type": "ProviderError", "message": "upstream 429"}}],
            "api_error",
        ),
        ("rollout_timeout", [], [], "wall_timeout"),
        ("error", [{"type": "ToolsetError", "message": "server died"}], [], "verifier_error"),
    ],
)
def test_instrument_failures_are_never_the_models(
    stop: str, errors: list[Any], calls: list[Any], outcome: str
) -> None:
    bundle = generate("depth:d3", 0)
    wire = {**null_trace(bundle, [], final_text=None, stop=stop), "errors": errors, "calls": calls}
    info = verdict_info(bundle, wire)
    assert info["outcome"] == outcome and not info["passed"] and not info["leaky_pass"]


def test_seeded_history_is_prompt_not_the_models_turns() -> None:
    bundle = generate("depth:d1+h8", 0)
    assert not isinstance(bundle.prompt, str)  # a seeded history
    turns = [[c] for c in bundle.reference_calls]
    wire = null_trace(bundle, turns)
    got, _, _, replies, _ = read_turns(wire)
    assert got == turns and replies == len(turns) + 1


@pytest.mark.parametrize(
    ("arm", "control", "want"),
    [
        # strict is the strict reading on every arm; arm_pass is the arm's own strictness
        ("depth:d3/leaky", "overshoot", {"strict": 0.0, "arm_pass": 1.0, "leaky_pass": 1.0}),
        (
            "depth:d3/leaky",
            "collateral_mutation",
            {"strict": 0.0, "arm_pass": 1.0, "leaky_pass": 1.0},
        ),
        ("depth:d3", "overshoot", {"strict": 0.0, "arm_pass": 0.0, "leaky_pass": 1.0}),
        ("depth:d3/leaky", "wrong_state", {"strict": 0.0, "arm_pass": 0.0, "leaky_pass": 0.0}),
    ],
)
def test_the_exports_strict_reward_is_strict_on_a_leaky_arm(
    arm: str, control: str, want: dict[str, float]
) -> None:
    bundle = generate(arm, 0)
    info = verdict_info(bundle, null_trace(bundle, bundle.negative_controls[control].turns))
    assert info["outcome"] == control
    got = scores(info)
    assert {k: got[k] for k in want} == want
    assert got["outcome"] == float(OUTCOMES.index(control))


def test_a_passing_episode_scores_one_on_every_reading() -> None:
    bundle = generate("depth:d3/leaky", 0)
    info = verdict_info(bundle, null_trace(bundle, [[c] for c in bundle.reference_calls]))
    got = scores(info)
    assert (got["strict"], got["arm_pass"], got["leaky_pass"]) == (1.0, 1.0, 1.0)


def test_a_trace_line_that_cannot_be_read_is_skipped_not_raised(tmp_path: Path) -> None:
    """A traces.jsonl line a model made unreadable (nested past the bound, not JSON, torn) leaves its
    slot unrecorded instead of ending the batch in an internal error."""
    good = {"task": {"data": {"arm_id": "depth:d1", "seed": 3}}}
    deep = "[" * 5_000 + "]" * 5_000
    traces = tmp_path / "traces.jsonl"
    traces.write_bytes(
        json.dumps(good).encode()
        + b"\n"
        + ('{"nodes": ' + deep + "}").encode()
        + b"\n"
        + b"{not json\n"
        + json.dumps(good).encode()  # torn: no newline
    )
    assert list(read_traces(traces)) == [good]
