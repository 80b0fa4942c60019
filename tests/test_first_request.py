"""Pin N13 from the records: each line's first request counted by the server and by the pinned
tokenizer, per arm on the card, and whether the server's less the pinned count holds across the
arms of each contrast (within two tokens)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from endpoint_double import Answer, Seen, serve
from test_real_endpoints import prereg
from typer.testing import CliRunner

from poisson_tasks.arms import parse_arm_id
from poisson_tasks.calibration import card_from_run, render_document
from poisson_tasks.calibration.cardjson import card_json, read_card_json
from poisson_tasks.calibration.published import rebuild_published
from poisson_tasks.cli import app
from poisson_tasks.reference.wire import request_tokens
from poisson_tasks.runfolder import iter_episodes

cli = CliRunner()
ARMS = ["history:t0", "history:t300", "history:t600"]
DESIGN = {"arms": ARMS, "horizon": max(parse_arm_id(a).max_turns(0) for a in ARMS)}


def _run(tmp_path: Path, script: Any = None) -> Path:
    out = tmp_path / "run"
    with serve(script) as double:
        path = prereg(tmp_path, double.base_url, tasks=3, design=DESIGN)
        res = cli.invoke(app, ["run", str(path), "--out", str(out), "--quiet"])
    assert res.exit_code == 0, res.output
    return out


def test_each_line_records_both_counts_of_its_first_request(tmp_path: Path) -> None:
    run = _run(tmp_path)
    for line in iter_episodes(run):
        opening = line.transcript["messages"][: line.transcript["opening_messages"]]
        first = line.transcript["responses"][0]["usage"]["prompt_tokens"]
        assert line.usage.first_request_tokens == first
        assert line.usage.first_request_pinned_tokens is not None
        assert line.usage.first_request_pinned_tokens > len(opening)
    artifact = card_from_run(run)
    pin = artifact.first_request
    assert pin is not None and pin.status == "measured"
    assert [a.arm_id for a in pin.arms] == ARMS and all(a.tasks == 3 for a in pin.arms)
    assert all(a.offset_median == 0 for a in pin.arms)  # the double counts as the reference does
    (contrast,) = pin.contrasts
    assert contrast.knob == "history" and contrast.held and contrast.held_seeds == 3
    doc = render_document(artifact)
    assert "- N13, realised first-request input tokens" in doc
    assert "| `history` | 3 | held on 3 of 3 seeds |" in doc
    assert read_card_json(card_json(artifact)) == artifact


def _inflate_seeded(seen: Seen, oracle: dict[str, Any]) -> Answer | None:
    """A server whose tokenizer makes history:t600's request 25 tokens longer than the pinned
    one does (and counts the other arms' as the pinned tokenizer does)."""
    if str(seen.body.get("user", "")).startswith("history:t600|"):
        body = json.loads(json.dumps(oracle))
        body["usage"]["prompt_tokens"] += 25
        return Answer(200, body)
    return None


def test_a_server_counting_one_arm_otherwise_is_not_held_and_named(tmp_path: Path) -> None:
    artifact = card_from_run(_run(tmp_path, _inflate_seeded))
    pin = artifact.first_request
    assert pin is not None
    offsets = {a.arm_id: a.offset_median for a in pin.arms}
    assert offsets == {"history:t0": 0, "history:t300": 0, "history:t600": 25}
    (contrast,) = pin.contrasts
    assert contrast.held is False and contrast.held_seeds == 0 and contrast.widest == 25
    assert contrast.widest_offsets["history:t600"] == 25
    assert "not held on 3 of 3 seeds: server less pinned spreads up to 25 tokens" in (
        render_document(artifact)
    )


def _no_usage(seen: Seen, oracle: dict[str, Any]) -> Answer:
    body = json.loads(json.dumps(oracle))
    body.pop("usage")
    return Answer(200, body)


def test_a_server_without_usage_has_nothing_to_set_beside(tmp_path: Path) -> None:
    artifact = card_from_run(_run(tmp_path, _no_usage))
    assert artifact.first_request is not None
    assert artifact.first_request.status == "no_server_count"
    assert "the server reported no usage on any first request" in render_document(artifact)


def test_records_written_before_the_counts_read_not_recorded(tmp_path: Path) -> None:
    # a run folder whose lines were written before the runner recorded the counts: the same
    # lines less the two usage fields (the published records carry them since their re-run)
    run = _run(tmp_path)
    episodes = run / "episodes.jsonl"
    older = []
    for raw in episodes.read_text().splitlines():
        line = json.loads(raw)
        del line["usage"]["first_request_tokens"], line["usage"]["first_request_pinned_tokens"]
        older.append(json.dumps(line))
    episodes.write_text("\n".join(older) + "\n")
    artifact = card_from_run(run)
    assert artifact.first_request is not None and artifact.first_request.status == "not_recorded"
    assert "episode lines predate the first-request counts" in render_document(artifact)


def test_the_published_records_carry_the_counts() -> None:
    artifact = rebuild_published("reference-noisy")
    assert artifact.first_request is not None and artifact.first_request.status == "measured"


def test_the_pinned_count_is_the_reference_endpoints_own_prompt_count() -> None:
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "u v w"}]
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    assert request_tokens(messages, tools) > request_tokens(messages, [])
    assert request_tokens(messages, []) == request_tokens(list(messages), ())
