"""Cards on the user's own tools: the tool file's checks, the block, how a call is scored, the
pin ledger's report and the card's closing lines, end to end on the reference endpoint."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from poisson_tasks.bundle import ToolCall
from poisson_tasks.cli import app
from poisson_tasks.domain.engine import apply, initial_state, line_status
from poisson_tasks.errors import ToolFileError
from poisson_tasks.generator import generate
from poisson_tasks.owntools import (
    MAX_BYTES,
    kept_reads,
    load_tool_file,
    scored_calls,
    with_own_tools,
)
from poisson_tasks.prereg import load_preregistration
from poisson_tasks.verifier import verify

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "own-tools-40.json"


def _tool(
    name: str, props: dict[str, Any] | None = None, required: list[str] | None = None
) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name} tool",
            "parameters": {
                "type": "object",
                "properties": props if props is not None else {"id": {"type": "string"}},
                "required": required if required is not None else ["id"],
                "additionalProperties": False,
            },
        },
    }


def test_the_example_file_holds_forty_valid_tools() -> None:
    tools = load_tool_file(EXAMPLE)
    assert len(tools.tools) == 40 and len(set(tools.names)) == 40
    # realistic: optional and non-string parameters are part of it
    kinds = {
        p.get("type") for t in tools.tools for p in t.parameters.get("properties", {}).values()
    }
    assert {"string", "integer", "number", "boolean", "array", "object"} <= kinds


def _bad_files(tmp: Path) -> dict[str, tuple[Path, str]]:
    out: dict[str, tuple[Path, str]] = {}
    dup = tmp / "dup.json"
    dup.write_text(json.dumps([_tool("get_order"), _tool("get_order")]))
    out["duplicate"] = (
        dup,
        "tools[1].name: 'get_order' repeats tools[0]; tool names must be unique",
    )
    schema = tmp / "schema.json"
    schema.write_text(json.dumps([_tool("get_order", {"id": {"type": "text"}}, ["id"])]))
    out["schema"] = (
        schema,
        "tools[0].parameters.properties.id.type: 'text' is not a JSON-schema type",
    )
    stage = tmp / "stage.json"
    stage.write_text(json.dumps([_tool("get_order"), _tool("review_invoice")]))
    out["stage"] = (stage, "tools[1].name: 'review_invoice' is a stage tool name the tasks use")
    big = tmp / "big.json"
    one = _tool("get_order")
    one["function"]["description"] = "x" * (5 * 1024 * 1024)
    big.write_text(json.dumps([one]))
    out["size"] = (big, f"more than the {MAX_BYTES:,} bytes a tool file may hold")
    return out


@pytest.mark.parametrize("case", ["duplicate", "schema", "stage", "size"])
def test_a_bad_tool_file_is_refused_with_one_clear_line(tmp_path: Path, case: str) -> None:
    path, expected = _bad_files(tmp_path)[case]
    doc = yaml.safe_load((ROOT / "preregistrations" / "own-tools-reference.yaml").read_text())
    doc["design"]["own_tools"] = path.name
    prereg = tmp_path / "p.yaml"
    prereg.write_text(yaml.safe_dump(doc))
    res = CliRunner().invoke(app, ["validate", str(prereg)])
    assert res.exit_code == 2
    lines = [ln for ln in res.stderr.splitlines() if ln]
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"error: design.own_tools: {path.name}: ")
    assert expected in lines[0]


def test_more_problems_give_one_line_each(tmp_path: Path) -> None:
    bad = tmp_path / "t.json"
    bad.write_text(
        json.dumps(
            [_tool("a b"), _tool("x", {"id": {"type": "string"}}, ["nope"]), {"type": "web"}]
        )
    )
    with pytest.raises(ToolFileError) as exc:
        load_tool_file(bad)
    assert len(exc.value.problems) == 3


def test_the_block_keeps_the_task_and_swaps_the_reads() -> None:
    tools = load_tool_file(EXAMPLE)
    for arm in ("depth:d3", "spread:p4", "faults:f2", "block:k32", "history:t600"):
        plain = generate(arm, 3)
        own = with_own_tools(plain, tools)
        names = [t["function"]["name"] for t in own.tools]
        keep = kept_reads(plain)
        assert set(tools.names) <= set(names)
        for i, b in enumerate(plain.engine.bindings):  # stage tools stay where they were
            if b.kind == "stage":
                assert names[i] == b.name
        dropped = {b.name for b in plain.engine.bindings if b.kind == "read"} - keep
        assert not dropped & set(names)
        assert own.goal == plain.goal and own.initial_state == plain.initial_state
        assert own.reference_calls == plain.reference_calls and own.task_id != plain.task_id
        verdict = verify(own, [[c] for c in own.reference_calls], True, False)
        assert verdict.outcome == "passed", (arm, verdict)


def _episode(extra: ToolCall) -> tuple[str, str, int | None]:
    """The reference solution with one user-tool call first, scored as the runner scores it."""
    tools = load_tool_file(EXAMPLE)
    bundle = with_own_tools(generate("depth:d2", 0), tools)
    turns = [scored_calls([extra], tools)] + [[c] for c in bundle.reference_calls]
    _, line = apply(
        bundle.engine, initial_state(bundle.engine), turns[0][0].name, turns[0][0].arguments
    )
    v = verify(bundle, turns, True, False)
    return line_status(line), v.outcome, v.malformed_clause


@pytest.mark.parametrize(
    ("arguments", "status", "outcome", "clause"),
    [
        ({"customer_id": "C-1"}, "ok", "passed", None),  # optional parameters left out
        (
            {"customer_id": "C-1", "status": "paid", "page": 2, "page_size": 50},
            "ok",
            "passed",
            None,
        ),
        ({"status": "paid"}, "bad_args", "malformed_call", 3),  # a required one missing
        ({"customer_id": "C-1", "colour": "red"}, "bad_args", "malformed_call", 4),  # not allowed
        ({"customer_id": "C-1", "page": "two"}, "bad_args", "passed", None),  # wrong type
        ({"customer_id": "C-1", "status": "lost"}, "bad_args", "passed", None),  # outside enum
    ],
)
def test_a_user_tool_call_is_scored_against_the_users_schema(
    arguments: dict[str, Any], status: str, outcome: str, clause: int | None
) -> None:
    got = _episode(ToolCall(name="list_orders", arguments=arguments))
    assert got == (status, outcome, clause)


def test_a_user_tool_call_mutates_nothing() -> None:
    tools = load_tool_file(EXAMPLE)
    bundle = with_own_tools(generate("depth:d2", 0), tools)
    state = initial_state(bundle.engine)
    call = scored_calls(
        [ToolCall(name="cancel_order", arguments={"order_id": "SO-1", "reason": "other"})], tools
    )[0]
    after, line = apply(bundle.engine, state, call.name, call.arguments)
    assert line_status(line) == "ok" and after.rows == state.rows


def test_a_design_without_own_tools_dumps_as_before() -> None:
    plan = load_preregistration(ROOT / "preregistrations" / "smoke.yaml")
    assert "own_tools" not in plan.preregistration.model_dump(mode="json")["design"]
    assert plan.own_tools is None


def test_an_own_tools_card_from_the_reference_endpoint(tmp_path: Path) -> None:
    doc = yaml.safe_load((ROOT / "preregistrations" / "own-tools-reference.yaml").read_text())
    # a path relative to the pre-registration, as the shipped one gives it (../examples/...)
    doc["design"].update(tasks=3, attempts=1, own_tools=os.path.relpath(EXAMPLE, tmp_path))
    prereg = tmp_path / "p.yaml"
    prereg.write_text(yaml.safe_dump(doc))
    run_dir = tmp_path / "run"
    res = CliRunner().invoke(app, ["card", str(prereg), "--run-dir", str(run_dir), "--quiet"])
    assert res.exit_code == 0, res.output
    card = res.stdout
    assert "The tool block holds the user's own 40 tools" in card
    assert "They are the user's, not written for these tasks" in card
    assert "do not read beside the published cards" in card
    assert "could not be held on the user's tools: N4" in card
    assert "- own tools: 40 from own-tools-40.json, sha256" in card
    assert f"40 tools from {EXAMPLE.name} (sha256" in card and "../" not in card  # issue 34 item 5
    header = json.loads((run_dir / "run.json").read_text())
    assert header["own_tools"]["sha256"] == load_tool_file(EXAMPLE).sha256
    assert header["preregistration"]["design"]["own_tools_sha256"] == header["own_tools"]["sha256"]
    again = CliRunner().invoke(app, ["card", str(run_dir)])
    assert again.stdout == card
    # the tools the model saw are the user's
    first = json.loads((run_dir / "episodes.jsonl").read_text().splitlines()[0])
    assert first["transcript"]["messages"]  # the request's tools are not stored, the bundle's are
    bundle = with_own_tools(generate(first["arm_id"], first["seed"]), load_tool_file(EXAMPLE))
    assert first["task_id"] == bundle.task_id


def test_generate_plan_reports_the_ledger_on_the_users_tools() -> None:
    res = CliRunner().invoke(
        app, ["generate", "--plan", str(ROOT / "preregistrations" / "own-tools-reference.yaml")]
    )
    assert res.exit_code == 0, res.output
    assert "pin ledger on the user's tools: 10 contrasts checked" in res.stdout
    assert "  changed   N5 (the block's token count)" in res.stdout
    assert "  not held  N4 " in res.stdout
