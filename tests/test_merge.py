"""`merge`: shard folders of one study put back into the run folder one machine would have made.

Every run is against the reference endpoint (or, for the serving pin, a vLLM-shaped double) on
loopback; reference-policy figures are baselines of the instrument, never a model's results.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from endpoint_double import Answer, serve
from test_real_endpoints import VLLM_MODELS
from test_real_endpoints import prereg as double_prereg
from test_runner import prereg

from poisson_tasks.bundle import digest
from poisson_tasks.calibration import card_from_run, render_document
from poisson_tasks.calibration.sameness import compare_cards
from poisson_tasks.errors import MergeError, RunFolderError
from poisson_tasks.reference import ReferenceServer, start_reference_server
from poisson_tasks.runfolder import EPISODES, HEADER, LOCK, iter_episodes, read_header
from poisson_tasks.runner import run_preregistration
from poisson_tasks.runner.merge import merge_shards
from poisson_tasks.runner.shard import Shard
from poisson_tasks.view import write_view

CLI = [sys.executable, "-m", "poisson_tasks.cli"]
N = 4


@pytest.fixture(scope="module")
def servers() -> Iterator[list[ReferenceServer]]:
    """Four reference endpoints on loopback, one per shard."""
    started = [start_reference_server("127.0.0.1", 0) for _ in range(N)]
    try:
        yield started
    finally:
        for server in started:
            server.close()


def _plan_file(tmp_path: Path, name: str = "study.yaml", **kw: Any) -> Path:
    folder = tmp_path / name.removesuffix(".yaml")
    folder.mkdir(exist_ok=True)
    return prereg(
        folder,
        model="noisy?p_early_stop=0",
        arms=["depth:d1", "depth:d3", "depth:d1+h8", "depth:d2+h5"],
        tasks=3,
        attempts=2,
        **kw,
    )


@pytest.fixture(scope="module")
def study(
    tmp_path_factory: pytest.TempPathFactory, servers: list[ReferenceServer]
) -> dict[str, Any]:
    """One plan run whole (in-process endpoint) and in 4 shards (each against its own endpoint)."""
    root = tmp_path_factory.mktemp("study")
    path = _plan_file(root)
    whole = root / "whole"
    run_preregistration(path, whole, show_progress=False)
    shards = []
    for i, server in enumerate(servers):
        shard_file = _plan_file(root, f"shard{i}.yaml", base_url=server.base_url)
        out = root / f"s{i}"
        run_preregistration(shard_file, out, show_progress=False, shard=Shard(i, N))
        shards.append(out)
    return {"root": root, "file": path, "whole": whole, "shards": shards}


def test_four_shards_merge_into_the_card_one_machine_makes(study: dict[str, Any]) -> None:
    out = study["root"] / "merged"
    summary = merge_shards(list(reversed(study["shards"])), out)  # any order of folders
    assert (summary.shards, summary.slots, summary.lines) == (N, 24, 24)
    whole, merged = card_from_run(study["whole"]), card_from_run(out)
    comparison = compare_cards(merged, whole)
    assert comparison.equal, comparison.line()

    # the same episodes, line by line, less their seconds and sessions
    def strip(line: Any) -> dict[str, Any]:
        doc = line.model_dump(mode="json")
        for key in ("timing", "session"):
            doc.pop(key)
        doc["transcript"].pop("response_seconds", None)  # seconds, as timing
        return doc

    key = lambda d: (d["arm_id"], d["seed"], d["attempt"])  # noqa: E731
    assert sorted(map(strip, iter_episodes(out)), key=key) == sorted(
        map(strip, iter_episodes(study["whole"])), key=key
    )
    header = read_header(out)
    assert header.merged is not None and header.shard is None
    assert [s.index for s in header.merged.shards] == list(range(N))
    assert (
        header.merged.shards[0].budget["tokens"] == header.preregistration["budget"]["tokens"] // N
    )
    # the shards reached four addresses: the merged pre-registration keeps none, so its hash is
    # the file's own (run in-process, with no base_url)
    assert header.preregistration["model"]["base_url"] is None
    assert header.preregistration_hash == read_header(study["whole"]).preregistration_hash
    assert [s.index for s in header.sessions] == list(range(N))
    lines = list(iter_episodes(out))
    assert Counter(ln.session for ln in lines) == Counter(
        {i: s.episodes for i, s in enumerate(header.merged.shards)}
    )
    card = render_document(merged)
    assert "- shards: 4, merged" in card
    assert "episodes in flight at once in each of 4 shards" in card


def test_a_merged_folder_is_viewed_like_any_run_folder(study: dict[str, Any]) -> None:
    out = study["root"] / "merged-view"
    merge_shards(study["shards"], out)
    report = write_view(study["root"] / "merged.html", out)
    assert report.episodes == 24 and report.refusal is None and not report.task_problems


def test_a_merged_folder_is_not_resumed(study: dict[str, Any]) -> None:
    out = study["root"] / "merged-resume"
    merge_shards(study["shards"], out)
    with pytest.raises(RunFolderError, match="is the merge of 4 shard folders"):
        run_preregistration(study["file"], out, resume=True, show_progress=False)
    with pytest.raises(MergeError, match="is already a merge of 4 shards"):
        merge_shards([out], study["root"] / "again")


def _copy(study: dict[str, Any], i: int, name: str) -> Path:
    dst = study["root"] / name
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(study["shards"][i], dst)
    return dst


def _refused(study: dict[str, Any], folders: list[Path], says: str) -> None:
    out = study["root"] / "refused"
    with pytest.raises(MergeError) as caught:
        merge_shards(folders, out)
    message = str(caught.value)
    assert says in message, message
    assert "\n" not in message
    assert not out.exists()
    assert not [p for p in study["root"].iterdir() if p.name.startswith(".refused.merging")]


def test_a_missing_shard_is_named(study: dict[str, Any]) -> None:
    shards = study["shards"]
    _refused(study, [shards[0], shards[1], shards[3]], "shard 2/4 is missing: given 0, 1, 3")


def test_a_shard_given_twice_is_named(study: dict[str, Any]) -> None:
    shards = study["shards"]
    _refused(study, [*shards, shards[1]], "shard 1/4 is given twice")


def test_a_missing_slot_is_named_with_its_shard_and_the_resume(study: dict[str, Any]) -> None:
    cut = _copy(study, 2, "s2-cut")
    lines = (cut / EPISODES).read_bytes().splitlines(keepends=True)
    (cut / EPISODES).write_bytes(b"".join(lines[:-2]) + lines[-1][:10])  # killed mid-line
    shards = [*study["shards"][:2], cut, study["shards"][3]]
    _refused(study, shards, "2 of the plan's 24 slots are missing (first: ")
    _refused(
        study,
        shards,
        f"shard 2/4 lacks 2): a shard stopped before it was done; continue it "
        f"with poisson-tasks run --resume {cut}",
    )


def test_a_duplicated_slot_is_named(study: dict[str, Any]) -> None:
    doubled = _copy(study, 1, "s1-doubled")
    first = (study["shards"][0] / EPISODES).read_bytes().splitlines(keepends=True)[0]
    with (doubled / EPISODES).open("ab") as fh:
        fh.write(first)
    slot = json.loads(first)
    shards = [study["shards"][0], doubled, *study["shards"][2:]]
    _refused(
        study,
        shards,
        f"slot {slot['arm_id']} seed {slot['seed']} attempt {slot['attempt']} is duplicated: "
        f"shard 0/4 ({study['shards'][0]}) and shard 1/4 ({doubled}) both hold it",
    )
    twice = _copy(study, 1, "s1-twice")
    own = (twice / EPISODES).read_bytes().splitlines(keepends=True)[0]
    with (twice / EPISODES).open("ab") as fh:
        fh.write(own)
    again = json.loads(own)
    _refused(
        study,
        [study["shards"][0], twice, *study["shards"][2:]],
        f"{again['arm_id']} seed {again['seed']} attempt {again['attempt']} was already scored at "
        "line 1",
    )


def test_a_shard_of_another_preregistration_is_named(
    study: dict[str, Any], servers: list[ReferenceServer]
) -> None:
    other = study["root"] / "other-run"
    path = _plan_file(
        study["root"],
        "other.yaml",
        base_url=servers[3].base_url,
        decoding={
            "temperature": 0.7,
            "top_p": 1.0,
            "reasoning_effort": "low",
            "max_completion_tokens": 2048,
        },
    )
    run_preregistration(path, other, show_progress=False, shard=Shard(3, N))
    _refused(
        study,
        [*study["shards"][:3], other],
        f"shard 3/4 ({other}) was made by another pre-registration than shard 0/4 "
        f"({study['shards'][0]}) (it differs in decoding.temperature)",
    )


@pytest.mark.parametrize(
    ("field", "says"),
    [
        ("generator_hash", "was run with another build of the generator (generator_hash 0000"),
        ("engine_hash", "was run with another build of the engine"),
        ("environment_hash", "was run with another environment"),
    ],
)
def test_a_shard_of_another_build_is_named(study: dict[str, Any], field: str, says: str) -> None:
    # The header of a copy is edited to stand for a shard run by another build (the one way to
    # hold two builds in one test); the merge reads only what run.json records.
    built = _copy(study, 2, f"s2-{field}")
    header = json.loads((built / HEADER).read_text())
    header[field] = "0" * 64
    (built / HEADER).write_text(json.dumps(header))
    _refused(
        study, [*study["shards"][:2], built, study["shards"][3]], f"shard 2/4 ({built}) {says}"
    )


def test_a_shard_served_by_another_vllm_version_is_named(tmp_path: Path) -> None:
    shards = []
    for i, version in enumerate(("0.29.0", "0.28.1")):
        routes = {
            "/version": Answer(200, {"version": version}),
            "/v1/models": Answer(200, VLLM_MODELS),
        }
        with serve(routes=routes) as double:
            path = double_prereg(
                tmp_path, double.base_url, provider="vllm", revision="0123456789abcdef", tasks=2
            )
            out = tmp_path / f"v{i}"
            run_preregistration(path, out, show_progress=False, shard=Shard(i, 2))
            shards.append(out)
    with pytest.raises(MergeError) as caught:
        merge_shards(shards, tmp_path / "merged")
    assert (
        f"shard 1/2 ({shards[1]}) session 0 was served differently from shard 0/2 ({shards[0]}) "
        "session 0: engine version 0.29.0 -> 0.28.1 (pin N10"
    ) in str(caught.value)
    assert not (tmp_path / "merged").exists()


def test_a_folder_that_is_not_a_shard_is_named(study: dict[str, Any], tmp_path: Path) -> None:
    _refused(study, [study["whole"], *study["shards"][1:]], "is not a shard folder")
    _refused(study, [tmp_path / "nowhere"], "is not a run folder (no such folder)")
    with pytest.raises(MergeError, match="give the shard folders"):
        merge_shards([], tmp_path / "m")


def test_a_shard_being_written_is_refused(study: dict[str, Any]) -> None:
    busy = _copy(study, 0, "s0-busy")
    fd = os.open(busy / LOCK, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        _refused(study, [busy, *study["shards"][1:]], "is being written by a poisson-tasks run")
    finally:
        os.close(fd)


def test_merge_refuses_an_out_that_holds_anything(study: dict[str, Any]) -> None:
    with pytest.raises(RunFolderError, match="already holds a run"):
        merge_shards(study["shards"], study["whole"])


def test_a_failed_write_leaves_nothing_behind(
    study: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import poisson_tasks.runner.merge as merge

    def full(fd: int, data: bytes) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(merge, "write_all", full)
    _refused(study, study["shards"], "the merged folder cannot be written: No space left on device")


def test_the_command_line_merges_and_refuses_in_one_line(study: dict[str, Any]) -> None:
    out = study["root"] / "merged-cli"
    done = subprocess.run(
        [*CLI, "merge", *map(str, study["shards"]), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"merged 4 shards into {out}: 24 slots, 24 episode lines")
    card = subprocess.run([*CLI, "card", str(out)], capture_output=True, text=True, timeout=120)
    assert card.returncode == 0 and "Reference-policy card" in card.stdout
    bad = subprocess.run(
        [*CLI, "merge", *map(str, study["shards"][:3]), "--out", str(study["root"] / "m3")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2
    assert bad.stderr.startswith("error: shard 3/4 is missing: given 0, 1, 2")
    assert len(bad.stderr.strip().splitlines()) == 1


# ------------------------------------------------------------------ a shard folder from elsewhere
# Each copy's run.json (or a line) is edited to stand for a folder damaged or forged on another
# machine: merge reads it as input, bounds every count by the plan before sizing anything by it,
# and refuses in one line, writing nothing.


def _forged(
    study: dict[str, Any], name: str, change: Any, rehash: bool = False, i: int = 1
) -> list[Path]:
    forged = _copy(study, i, name)
    header = json.loads((forged / HEADER).read_text())
    change(header)
    if rehash:  # the document's own hash kept consistent with the edit
        header["preregistration_hash"] = digest(header["preregistration"])
    (forged / HEADER).write_text(json.dumps(header))
    shards = list(study["shards"])
    shards[i] = forged
    return shards


def test_a_forged_count_of_shards_is_bounded_by_the_plan_before_anything_is_sized(
    study: dict[str, Any],
) -> None:
    """A count of 10^12 made the merge allocate until the machine ran out of memory; it is now
    refused by the plan's own bound (12 tasks: 4 arms x 3 seeds), under a 2 GiB address-space
    limit, before anything is sized by it."""
    shards = _forged(study, "s1-count", lambda h: h["shard"].update(count=10**12))
    header = shards[1] / HEADER
    _refused(study, shards, f"{header}: shard.count 1000000000000 is not 1 to the plan's 12 tasks")
    limit = "import resource; resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            f"{limit}; import sys; from poisson_tasks.cli import run_cli; sys.exit(run_cli())",
            "merge",
            str(shards[1]),
            "--out",
            str(study["root"] / "m-count"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"error: {header}: shard.count 1000000000000 is not 1")


@pytest.mark.parametrize(
    ("name", "change", "says"),
    [
        ("zero", lambda h: h["shard"].update(count=0), "shard.count 0 is not 1 to the plan's 12"),
        ("index", lambda h: h["shard"].update(index=7), "shard.index 7 is outside 0 to 3"),
        ("negative", lambda h: h["shard"].update(index=-1), "shard.index -1 is outside 0 to 3"),
        ("sessions", lambda h: h.update(sessions=[]), "records no session"),
        ("plan", lambda h: h["shard"].update(plan_hash="0" * 64), "shard.plan_hash is not the"),
        ("budget", lambda h: h["shard"]["budget"].update(tokens=1), "shard.budget is not the"),
        ("digest", lambda h: h["shard"].update(slots_sha256="0" * 64), "another cut of the plan"),
        ("rule", lambda h: h["shard"].update(rule="x@9"), "was cut by the rule x@9"),
    ],
)
def test_a_shard_record_that_does_not_hold_is_named(
    study: dict[str, Any], name: str, change: Any, says: str
) -> None:
    _refused(study, _forged(study, f"s1-{name}", change), says)


def test_an_edited_stored_preregistration_is_refused_as_resume_refuses_it(
    study: dict[str, Any],
) -> None:
    """The turn limit edited in one shard's stored pre-registration, its plan hash kept: the
    merge recomputes the plan hash from the document (and the document's own hash) and refuses."""

    def turn_limit(header: dict[str, Any]) -> None:
        header["preregistration"]["design"]["turn_limit"] = 9

    kept = _forged(study, "s1-turns", turn_limit)
    _refused(study, kept, "preregistration_hash is not the hash of the pre-registration it stores")
    rehashed = _forged(study, "s1-turns-rehashed", turn_limit, rehash=True)
    _refused(
        study,
        rehashed,
        f"{rehashed[1] / HEADER}: shard.plan_hash is not the plan hash of the pre-registration it "
        "stores",
    )
    with pytest.raises(RunFolderError, match=r"shard\.plan_hash is not the plan hash"):
        run_preregistration(study["file"], rehashed[1], resume=True, show_progress=False)


def _edit_line(folder: Path, change: Any) -> None:
    lines = (folder / EPISODES).read_bytes().splitlines(keepends=True)
    doc = json.loads(lines[0])
    change(doc)
    lines[0] = json.dumps(doc).encode() + b"\n"
    (folder / EPISODES).write_bytes(b"".join(lines))


def test_a_line_naming_a_session_its_folder_does_not_record_is_named(
    study: dict[str, Any],
) -> None:
    forged = _copy(study, 1, "s1-session")
    _edit_line(forged, lambda doc: doc.update(session=5))
    _refused(
        study,
        [study["shards"][0], forged, *study["shards"][2:]],
        f"{forged / EPISODES}:1 names session 5, which its run.json does not record (it records "
        "sessions 0 to 0)",
    )


def test_a_line_outside_the_plan_or_at_odds_with_its_arm_is_named(study: dict[str, Any]) -> None:
    for name, change, says in (
        ("s1-arm", lambda d: d.update(arm_id="depth:d8"), "arm 'depth:d8' is not in run.json's"),
        ("s1-seed", lambda d: d.update(seed=12345), "seed 12345 is not in run.json's seed list"),
        ("s1-attempt", lambda d: d.update(attempt=9), "attempt 9 is outside 0..1"),
        ("s1-calls", lambda d: d.update(min_calls=7), "min_calls 7 disagrees with"),
    ):
        forged = _copy(study, 1, name)
        _edit_line(forged, change)
        _refused(study, [study["shards"][0], forged, *study["shards"][2:]], says)


def test_a_failed_merge_leaves_no_folder_it_made(
    study: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import poisson_tasks.runner.merge as merge

    def full(fd: int, data: bytes) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(merge, "write_all", full)
    out = study["root"] / "new" / "deeper" / "merged"
    with pytest.raises(MergeError, match="No space left on device"):
        merge_shards(study["shards"], out)
    assert not (study["root"] / "new").exists()


def test_merge_into_a_merged_folder_gives_advice_that_works(study: dict[str, Any]) -> None:
    out = study["root"] / "merged-twice"
    merge_shards(study["shards"], out)
    with pytest.raises(RunFolderError) as info:
        merge_shards(study["shards"], out)
    assert str(info.value) == (
        f"{out} already holds the merge of 4 shard folders, which is not continued: choose a new "
        "--out folder (to redo the merge, move it away first)"
    )


def test_a_shard_written_to_while_it_is_merged_is_refused(
    study: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A line changed after the checks read it (a writer that takes no lock, on a shared file
    system) is never merged: the files are hashed again before the merged folder is renamed in."""
    import poisson_tasks.runner.merge as merge

    changed = _copy(study, 1, "s1-changing")
    checked = merge._merged_header

    def then_changed(shards: Any, names: Any) -> Any:
        data = bytearray((changed / EPISODES).read_bytes())
        at = data.index(b'"task_id":"') + len(b'"task_id":"')
        data[at] = ord("0") if data[at] != ord("0") else ord("1")  # same length, still a line
        (changed / EPISODES).write_bytes(bytes(data))
        return checked(shards, names)

    monkeypatch.setattr(merge, "_merged_header", then_changed)
    _refused(
        study,
        [study["shards"][0], changed, *study["shards"][2:]],
        f"{changed / EPISODES}: changed while it was merged",
    )
