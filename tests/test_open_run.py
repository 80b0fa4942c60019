"""open_run on every run folder the repository ships (the published cards' records, the local
model's smoke run): written by earlier builds, each still opens, and what it registers is
recomputed from the document as stored, never from a re-validation of it.

The local model's folder is why: its stored pre-registration holds two threshold fields
(bootstrap_resamples, bootstrap_seed) that this build's schema no longer writes, so the typed plan
dumps to another document; a header that kept only the typed form would lose its own hash.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from poisson_tasks.bundle import digest
from poisson_tasks.runfolder import open_run

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = sorted(p.parent for p in (ROOT / "calibration").glob("*/run.json"))
SHIPPED = [*PUBLISHED, ROOT / "tests" / "data" / "local-smollm2"]


@pytest.mark.parametrize("folder", SHIPPED, ids=lambda p: p.name)
def test_a_shipped_folder_opens_and_registers_its_stored_document(folder: Path) -> None:
    run = open_run(folder)
    assert run.registered.preregistration_hash == run.header.preregistration_hash
    assert run.registered.preregistration_hash == digest(run.header.preregistration)
    assert run.thresholds == run.header.thresholds
    assert run.registered.concurrency == run.header.concurrency
    assert run.plan.arms == tuple(run.header.arms)  # the typed plan still validates
    assert run.plan.seeds == tuple(run.header.seeds)


def test_the_typed_plan_is_a_view_and_the_stored_document_the_record() -> None:
    run = open_run(ROOT / "tests" / "data" / "local-smollm2")
    typed = run.plan.preregistration.model_dump(mode="json")
    assert typed != run.header.preregistration  # fields this build no longer writes
    assert digest(typed) != run.header.preregistration_hash
