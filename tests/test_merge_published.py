"""The published noisy design (14 arms x 60 tasks x 5 attempts, 4,200 episodes) run on one machine
and in 4 shards, each against its own reference endpoint on loopback, merged: the same card, less
time and placement (calibration.sameness). Slow: two runs of 4,200 episodes (a few minutes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from poisson_tasks.calibration import card_from_run
from poisson_tasks.calibration.sameness import compare_cards
from poisson_tasks.prereg import load_preregistration
from poisson_tasks.reference import start_reference_server
from poisson_tasks.runner import run_preregistration
from poisson_tasks.runner.merge import merge_shards
from poisson_tasks.runner.shard import Shard

NOISY = Path(__file__).resolve().parents[1] / "preregistrations" / "published-reference-noisy.yaml"


@pytest.mark.slow
def test_the_published_noisy_design_in_four_shards_is_the_one_machine_card(
    tmp_path: Path,
) -> None:
    run_preregistration(NOISY, tmp_path / "whole", show_progress=False)
    shards = []
    for index in range(4):
        with start_reference_server("127.0.0.1", 0) as server:
            plan = load_preregistration(NOISY, base_url=server.base_url)
            out = tmp_path / f"shard-{index}"
            summary = run_preregistration(plan, out, show_progress=False, shard=Shard(index, 4))
            assert summary.complete and summary.planned == 1050
            shards.append(out)
    merged = merge_shards(shards, tmp_path / "merged")
    assert (merged.slots, merged.lines) == (4200, 4200)
    comparison = compare_cards(
        card_from_run(tmp_path / "merged"), card_from_run(tmp_path / "whole")
    )
    assert comparison.equal, comparison.line()
