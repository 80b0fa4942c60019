"""open_run on every run folder the repository ships (the published cards' records, the local
model's smoke run): written by earlier builds, each still opens, and what it registers is
recomputed from the document as stored, never from a re-validation of it.

The local model's folder is why: its stored pre-registration holds two threshold fields
(bootstrap_resamples, bootstrap_seed) that this build's schema no longer writes, so the typed plan
dumps to another document; a header that kept only the typed form would lose its own hash.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from poisson_tasks.bundle import digest
from poisson_tasks.errors import RunFolderError
from poisson_tasks.runfolder import HEADER, ServingRecord, open_run, read_header

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


# ------------------------------------------------------------------ the serving record


@pytest.mark.parametrize("folder", SHIPPED, ids=lambda p: p.name)
def test_a_shipped_folders_serving_is_typed_and_written_back_as_it_was(folder: Path) -> None:
    """The header's serving and each session's own read into runfolder.ServingRecord, and dump to
    the very JSON the folder holds (a key given as null stays, a key not given stays absent)."""
    raw = json.loads((folder / HEADER).read_text(encoding="utf-8"))
    header = open_run(folder).header
    assert isinstance(header.serving, ServingRecord)
    assert header.serving.model_dump(mode="json") == raw["serving"]
    for session, stored in zip(header.sessions, raw["sessions"], strict=True):
        written = session.model_dump(mode="json")
        assert written.get("serving") == stored.get("serving")


def test_a_serving_key_this_build_does_not_know_is_kept() -> None:
    stored = {"provider": "vllm", "revision": None, "details": {}, "tensor_parallel": 2}
    record = ServingRecord.model_validate(stored)
    assert record.revision is None and record.context_window is None
    assert record.model_dump(mode="json") == stored
    assert ServingRecord().model_dump(mode="json") == {}  # a header written with no serving


@pytest.mark.parametrize(
    ("key", "value"),
    [("context_window", "8192"), ("context_window", 0), ("stack_version", 11), ("flags", "-x")],
)
def test_a_serving_fact_of_another_type_refuses_the_folder(
    tmp_path: Path, key: str, value: object
) -> None:
    """A reader takes each fact as the type the runner writes; a folder edited otherwise is
    refused in one line, never printed as a guess (a string "8192" is not a context window)."""
    folder = tmp_path / "run"
    shutil.copytree(SHIPPED[-1], folder)
    raw = json.loads((folder / HEADER).read_text(encoding="utf-8"))
    raw["serving"][key] = value
    (folder / HEADER).write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(RunFolderError, match=r"run\.json is damaged or from another version"):
        read_header(folder)
