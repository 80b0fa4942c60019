"""Pin N10 across sessions: the one comparison of serving facts, a resumed run refused when its
server changed, and with --accept-serving-change a card that lists every session's serving."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from endpoint_double import MODEL, Answer, serve
from test_real_endpoints import VLLM_MODELS, prereg
from typer.testing import CliRunner

from poisson_tasks import servingpin
from poisson_tasks.calibration import card_from_run, render_document
from poisson_tasks.calibration.cardjson import card_json
from poisson_tasks.cli import app
from poisson_tasks.runfolder import HEADER, ServingRecord, read_header
from poisson_tasks.servingpin import (
    N10_FIELDS,
    ServingFacts,
    compare_serving,
    revisions_agree,
    session_facts,
)

cli = CliRunner()
DECODING = {"temperature": 1.0, "top_p": 1.0, "max_completion_tokens": 256}
VLLM: dict[str, Any] = {
    "provider": "vllm",
    "model": MODEL,
    "stack": "vllm",
    "stack_version": "0.11.0",
    "weights_revision": "0123456789abcdef (verified: vLLM's model root)",
    "flags": ["--max-model-len 8192"],
    "context_window": 8192,
    "base_url": "http://127.0.0.1:1/v1",
}


def serving_facts(serving: dict[str, Any], decoding: dict[str, Any]) -> ServingFacts:
    """N10's facts of a serving written as the runner writes it into run.json."""
    return servingpin.serving_facts(ServingRecord.model_validate(serving), decoding)


def test_the_same_serving_holds_and_the_base_url_or_a_note_is_not_a_change() -> None:
    other = {
        **VLLM,
        "base_url": "http://127.0.0.1:2/v1",
        "weights_revision": "0123456 (declared, not verified)",
    }
    change = compare_serving(serving_facts(VLLM, DECODING), serving_facts(other, DECODING))
    assert change.held and change.describe() == ""


@pytest.mark.parametrize(
    ("key", "value", "field"),
    [
        ("model", "another-model", "model"),
        ("weights_revision", "fedcba9876543210", "revision"),
        ("stack", "sglang", "engine"),
        ("stack_version", "0.12.0", "engine_version"),
        ("flags", ["--max-model-len 4096"], "flags"),
        ("context_window", 4096, "context_window"),
        ("quantization", "fp8", "quantization"),
        ("llamacpp", {"template_sha256": "ab" * 32}, "chat_template"),
    ],
)
def test_each_differing_field_is_named(key: str, value: Any, field: str) -> None:
    change = compare_serving(
        serving_facts(VLLM, DECODING), serving_facts({**VLLM, key: value}, DECODING)
    )
    assert change.fields == (field,)
    label = dict(N10_FIELDS)[field]
    assert change.describe().startswith(label + " ")


def test_sampling_is_part_of_the_pin() -> None:
    change = compare_serving(
        serving_facts(VLLM, DECODING), serving_facts(VLLM, {**DECODING, "temperature": 0.0})
    )
    assert change.fields == ("sampling",)


def test_a_long_value_is_cut_in_the_message() -> None:
    change = compare_serving(
        serving_facts(VLLM, DECODING), serving_facts({**VLLM, "flags": ["x" * 3000]}, DECODING)
    )
    assert len(change.describe()) < 250 and change.describe().endswith("…")


def test_revisions_agree_on_a_prefix_of_seven_and_not_below() -> None:
    assert revisions_agree("0123456789abcdef", "0123456 (declared, not verified)")
    assert revisions_agree("sha256:ABCDEF0123", "abcdef0123456789")
    assert not revisions_agree("012345", "0123456789")
    assert not revisions_agree("0123456789", "0123456780")


def _vllm_routes(version: str) -> dict[str, Answer]:
    return {"/version": Answer(200, {"version": version}), "/v1/models": Answer(200, VLLM_MODELS)}


def test_a_resume_against_a_server_whose_version_changed_is_refused_then_accepted(
    tmp_path: Path,
) -> None:
    run = tmp_path / "run"
    with serve(routes=_vllm_routes("0.11.0")) as double:
        small = prereg(
            tmp_path,
            double.base_url,
            provider="vllm",
            revision="0123456789abcdef",
            tasks=4,
            budget={"tokens": 4_000},
        )
        first = cli.invoke(app, ["run", str(small), "--out", str(run), "--quiet"])
        assert first.exit_code == 3, first.output  # stopped on its token cap, to be resumed
        header_before = (run / HEADER).read_bytes()
        episodes_before = (run / "episodes.jsonl").read_bytes()
        double.routes.update(_vllm_routes("0.12.0"))  # the server was upgraded in between
        big = prereg(
            tmp_path,
            double.base_url,
            provider="vllm",
            revision="0123456789abcdef",
            tasks=4,
            budget={"tokens": 50_000_000},
        )
        refused = cli.invoke(app, ["run", str(big), "--resume", str(run), "--quiet"])
        assert refused.exit_code == 2
        lines = refused.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ")
        assert "engine version 0.11.0 -> 0.12.0" in lines[0]
        assert "--accept-serving-change" in lines[0]
        assert (run / HEADER).read_bytes() == header_before  # nothing written
        assert (run / "episodes.jsonl").read_bytes() == episodes_before
        accepted = cli.invoke(
            app,
            ["run", str(big), "--resume", str(run), "--quiet", "--accept-serving-change"],
        )
        assert accepted.exit_code == 0, accepted.output
    header = read_header(run)
    facts = session_facts(header)
    assert [f.engine_version for f in facts] == ["0.11.0", "0.12.0"]
    artifact = card_from_run(run)
    assert artifact.provenance.pooled_servings
    assert [s.serving_differs for s in artifact.provenance.sessions] == [[], ["engine_version"]]
    doc = render_document(artifact)
    assert "the figures pool several servings" in doc
    assert "  - session #0: self-served, vllm 0.11.0" in doc
    assert "  - session #1: self-served, vllm 0.12.0" in doc
    assert "not as session #0: engine version 0.11.0 -> 0.12.0" in doc
    assert "N10, the serving pin" in doc and "not held: session #1" in doc
    claims = [c.key for c in artifact.statements.does_not_claim]
    assert "pooled_servings" in claims
    sessions = json.loads(card_json(artifact))["provenance"]["sessions"]
    assert "serving" not in sessions[0] and sessions[1]["serving"]["stack_version"] == "0.12.0"


def test_the_flag_without_resume_is_one_error(tmp_path: Path) -> None:
    with serve() as double:
        path = prereg(tmp_path, double.base_url)
        res = cli.invoke(
            app, ["run", str(path), "--out", str(tmp_path / "r"), "--accept-serving-change"]
        )
    assert res.exit_code == 2 and res.stderr.count("error:") == 1
    assert "--accept-serving-change goes with --resume" in res.stderr
    assert not (tmp_path / "r").exists()


def test_an_unchanged_server_resumes_without_the_flag_and_the_card_keeps_one_serving(
    tmp_path: Path,
) -> None:
    run = tmp_path / "run"
    with serve(routes=_vllm_routes("0.11.0")) as double:
        rev = "0123456789abcdef"
        small = prereg(
            tmp_path,
            double.base_url,
            provider="vllm",
            revision=rev,
            tasks=4,
            budget={"tokens": 4_000},
        )
        assert cli.invoke(app, ["run", str(small), "--out", str(run), "--quiet"]).exit_code == 3
        big = prereg(
            tmp_path,
            double.base_url,
            provider="vllm",
            revision=rev,
            tasks=4,
            budget={"tokens": 50_000_000},
        )
        res = cli.invoke(app, ["run", str(big), "--resume", str(run), "--quiet"])
        assert res.exit_code == 0, res.output
    artifact = card_from_run(run)
    assert not artifact.provenance.pooled_servings
    assert "pooled_servings" not in [c.key for c in artifact.statements.does_not_claim]
    assert "N10, the serving pin" in render_document(artifact)
    assert "held across the run's 2 sessions" in render_document(artifact)
