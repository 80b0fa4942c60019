"""poisson-tasks replay: a seeded sample of a run's scored slots run again into RUN_DIR/replay/,
and the card's Reproducibility section. Against the reference endpoint on loopback: a seeded
policy replays 100% identical; the seed-ignoring policy (a reference policy that ignores the
request's seed, labelled so) does not. Reference-policy figures are baselines, never a model's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml
from endpoint_double import Answer, serve
from test_real_endpoints import VLLM_MODELS
from test_real_endpoints import prereg as double_prereg
from test_runner import prereg

from poisson_tasks.calibration import card_from_run, render_document
from poisson_tasks.calibration.artifact import ReplayShare
from poisson_tasks.calibration.cardjson import card_json, read_card_json
from poisson_tasks.calibration.reproducibility import first_difference, flip_reading, same_messages
from poisson_tasks.calibration.sections.replay import NOT_REPLAYED
from poisson_tasks.cli import run_cli
from poisson_tasks.errors import ReplayError, RunFolderError
from poisson_tasks.prereg import Slot, describe_plan, load_preregistration
from poisson_tasks.reference import ReferenceServer, start_reference_server
from poisson_tasks.runfolder import EPISODES, HEADER, iter_episodes, read_header
from poisson_tasks.runner import replay_run, run_preregistration
from poisson_tasks.runner.merge import merge_shards
from poisson_tasks.runner.replay import REPLAY_RULE, draw_sample
from poisson_tasks.runner.shard import Shard
from poisson_tasks.seeding import replay_seed_phrase

REPO = Path(__file__).resolve().parents[1]
PUBLISHED = REPO / "preregistrations" / "published.yaml"


def _slots(folder: Path) -> list[tuple[str, int, int]]:
    return [(ln.arm_id, ln.seed, ln.attempt) for ln in iter_episodes(folder)]


# ------------------------------------------------------------------ the draw


def test_the_sample_is_drawn_the_same_way_twice_from_the_same_seed() -> None:
    plan = load_preregistration(PUBLISHED)
    scored = plan.slots()
    first = draw_sample(scored, plan, 30, seed=7)
    assert first == draw_sample(list(reversed(scored)), plan, 30, seed=7)  # input order is moot
    assert first != draw_sample(scored, plan, 30, seed=8)
    assert len(set(first)) == 30
    # stratified: 30 over 14 arms is 2 or 3 from every arm
    per_arm = Counter(s.arm_id for s in first)
    assert set(per_arm) == set(plan.arms) and set(per_arm.values()) <= {2, 3}
    # in plan order, so the replay runs arm by arm as the run did
    order = {a: i for i, a in enumerate(plan.arms)}
    assert [order[s.arm_id] for s in first] == sorted(order[s.arm_id] for s in first)


@pytest.mark.slow
def test_the_sample_is_the_same_in_another_process() -> None:
    code = (
        "from poisson_tasks.prereg import load_preregistration\n"
        "from poisson_tasks.runner.replay import draw_sample\n"
        f"plan = load_preregistration({str(PUBLISHED)!r})\n"
        "print([tuple(s) for s in draw_sample(plan.slots(), plan, 25, seed=3)])\n"
    )
    outs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": str(hashseed), "PATH": "/usr/bin:/bin"},
        ).stdout
        for hashseed in (0, 1)
    }
    plan = load_preregistration(PUBLISHED)
    here = str([tuple(s) for s in draw_sample(plan.slots(), plan, 25, seed=3)]) + "\n"
    assert outs == {here}


def test_an_arm_with_few_scored_slots_gives_what_it_has() -> None:
    plan = load_preregistration(PUBLISHED)
    scored = [s for s in plan.slots() if s.arm_id != plan.arms[0]] + [
        Slot(plan.arms[0], plan.seeds[0], 0)
    ]
    sample = draw_sample(scored, plan, 14 * 3, seed=0)
    per_arm = Counter(s.arm_id for s in sample)
    assert per_arm[plan.arms[0]] == 1 and sum(per_arm.values()) == 42


@pytest.mark.parametrize(
    ("sample", "says"),
    [(0, "--sample 0: a replay runs 1 or more"), (-3, "--sample -3"), (13, "more than the 12")],
)
def test_a_bad_sample_size_is_one_error(sample: int, says: str) -> None:
    plan = load_preregistration(PUBLISHED)
    with pytest.raises(ReplayError, match=says.replace("-", r"\-")):
        draw_sample(plan.slots()[:12], plan, sample, seed=0)


# ------------------------------------------------------------------ the comparison


def _line(messages: list[dict[str, object]], outcome: str = "passed") -> dict[str, object]:
    return {"outcome": outcome, "transcript": {"messages": messages, "tool_calls": []}}


def test_the_first_difference_is_located_by_call_and_kind() -> None:
    opening = {"role": "user", "content": "task"}

    def call(args: str, cid: str) -> dict[str, object]:
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": cid, "function": {"name": "f", "arguments": args}}],
        }

    def answer(cid: str) -> dict[str, object]:
        return {"role": "tool", "tool_call_id": cid, "content": "ok"}

    run = _line([opening, call("{}", "a"), answer("a"), {"role": "assistant", "content": "done"}])
    # another server's random call ids do not make a transcript differ
    same = _line([opening, call("{}", "z"), answer("z"), {"role": "assistant", "content": "done"}])
    assert same_messages(run, same) and first_difference(run, same) is None
    text = _line([opening, call("{}", "a"), answer("a"), {"role": "assistant", "content": "Done"}])
    assert first_difference(run, text) == (2, "text")
    calls = _line([opening, call('{"x":1}', "a"), answer("a")])
    assert first_difference(run, calls) == (1, "call")
    longer = _line([*run["transcript"]["messages"], call("{}", "b")])  # type: ignore[index]
    assert first_difference(run, longer) == (3, "end")


def test_the_first_difference_counts_model_calls_not_the_seeded_history() -> None:
    # issue 34 item 7: on a control arm the opening messages hold seeded assistant calls, which
    # were counted as model calls (a difference at the model's first call read "model call 8")
    seeded = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"}]
    for i in range(3):
        seeded += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": f"h{i}", "function": {"name": "read", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": f"h{i}", "content": "000001 ok"},
        ]
    seeded.append({"role": "user", "content": "now the task"})

    def episode(reply: str) -> dict[str, object]:
        messages = [*seeded, {"role": "assistant", "content": reply}]
        return {
            "outcome": "passed",
            "transcript": {"messages": messages, "tool_calls": [], "opening_messages": 9},
        }

    assert first_difference(episode("done"), episode("Done")) == (1, "text")
    older = episode("done")  # a line from before opening_messages: its first request's size
    older["transcript"] = {  # type: ignore[index]
        **older["transcript"],  # type: ignore[dict-item]
        "opening_messages": None,
        "request_messages": [9],
    }
    assert first_difference(older, episode("Done")) == (1, "text")


# ------------------------------------------------------------------ on real behaviour


def _section(doc: str) -> str:
    start = doc.index("## Reproducibility")
    return doc[start : doc.index("\n## ", start + 1)]


def _policy_run(tmp_path: Path, server: ReferenceServer, policy: str) -> Path:
    """A finished 3-task, 2-attempt run of `policy` with the replays' mistake rates."""
    path = prereg(
        tmp_path,
        model=f"{policy}?p_wrong_tool=0.3&p_early_stop=0&p_overshoot=0.3",
        base_url=server.base_url,
        tasks=3,
        attempts=2,
    )
    run = tmp_path / "run"
    run_preregistration(path, run, show_progress=False)
    return run


def test_a_seeded_policy_replays_identical_and_the_card_says_so(
    tmp_path: Path, server: ReferenceServer
) -> None:
    run = _policy_run(tmp_path, server, "noisy")
    before = card_from_run(run)
    assert before.reproducibility is None
    assert NOT_REPLAYED in render_document(before)
    summary = replay_run(run, 8, seed=1, show_progress=False)
    assert summary.complete and summary.planned == 8 and summary.replay_of == str(run)
    header = read_header(run / "replay")
    assert header.replay is not None and header.replay.rule == REPLAY_RULE
    assert len(_slots(run / "replay")) == 8
    artifact = card_from_run(run)
    rep = artifact.reproducibility
    assert rep is not None
    assert rep.replayed == 8 and rep.not_yet_replayed == 0
    assert rep.identical_transcript.count == rep.same_tool_calls.count == 8
    assert rep.same_verdict.count == 8 and rep.different_verdict.count == 0
    assert rep.first_differences == [] and rep.serving_differences == []
    assert rep.identical_transcript.high == 1.0 and rep.identical_transcript.low < 1.0
    doc = render_document(artifact)
    section = _section(doc)
    print(section)
    assert "| identical transcript | 8 | 1.000 |" in section
    assert "held (a like-for-like re-run)" in section
    assert read_card_json(card_json(artifact)) == artifact
    assert "reproducibility" in json.loads(card_json(artifact))
    # the run's own figures are as they were before the replay
    assert before.cells == artifact.cells


def test_the_seed_ignoring_policy_replays_below_100_percent(
    tmp_path: Path, server: ReferenceServer
) -> None:
    run = _policy_run(tmp_path, server, "seed-ignoring")
    replay_run(run, 12, show_progress=False)
    rep = card_from_run(run).reproducibility
    assert rep is not None and rep.replayed == 12
    print(
        f"seed-ignoring: identical {rep.identical_transcript.count}/12, same calls "
        f"{rep.same_tool_calls.count}/12, same verdict {rep.same_verdict.count}/12"
    )
    assert rep.identical_transcript.count < 12
    assert rep.same_verdict.count + rep.different_verdict.count == rep.replayed
    assert sum(d.episodes for d in rep.first_differences) == 12 - rep.identical_transcript.count


def test_a_replay_against_a_changed_server_is_marked_on_the_card(tmp_path: Path) -> None:
    routes = {
        "/version": Answer(200, {"version": "0.11.0"}),
        "/v1/models": Answer(200, VLLM_MODELS),
    }
    with serve(routes=routes) as double:
        path = double_prereg(
            tmp_path, double.base_url, provider="vllm", revision="0123456789abcdef", tasks=3
        )
        run = tmp_path / "run"
        run_preregistration(path, run, show_progress=False)
        double.routes["/version"] = Answer(200, {"version": "0.12.0"})  # upgraded in between
        replay_run(run, 2, show_progress=False)
    rep = card_from_run(run).reproducibility
    assert rep is not None
    assert rep.serving_differences == ["engine version 0.11.0 -> 0.12.0"]
    assert rep.run_serving["engine version"] == "0.11.0"
    assert rep.replay_serving["engine version"] == "0.12.0"
    section = _section(render_document(card_from_run(run)))
    assert "not held (engine version 0.11.0 -> 0.12.0)" in section
    assert "not a like-for-like re-run" in section


def test_an_interrupted_replay_resumes_its_own_sample(
    tmp_path: Path, server: ReferenceServer
) -> None:
    path = prereg(
        tmp_path, model="noisy?p_early_stop=0", base_url=server.base_url, tasks=3, attempts=2
    )
    run = tmp_path / "run"
    run_preregistration(path, run, show_progress=False)
    replay_run(run, 6, seed=2, show_progress=False)
    folder = run / "replay"
    planned = sorted(tuple(s) for s in read_header(folder).replay.slots)  # type: ignore[union-attr]
    # as a kill -9 leaves it: two lines kept, a torn third, the session still "running"
    raw = (folder / EPISODES).read_bytes().splitlines(keepends=True)
    (folder / EPISODES).write_bytes(b"".join(raw[:2]) + raw[2][:40])
    header = json.loads((folder / HEADER).read_text())
    header["sessions"][-1]["stop_reason"] = "running"
    (folder / HEADER).write_text(json.dumps(header))
    assert card_from_run(run).reproducibility.not_yet_replayed == 4  # type: ignore[union-attr]
    # another seed draws another sample: refused in one line, nothing written
    with pytest.raises(ReplayError, match="--sample 6 --seed 2"):
        replay_run(run, 6, seed=3, show_progress=False)
    # `run --resume` on the replay folder would run the whole plan there: refused
    with pytest.raises(RunFolderError, match="continue it with poisson-tasks replay"):
        run_preregistration(path, folder, resume=True, show_progress=False)
    summary = replay_run(run, 6, seed=2, show_progress=False)
    assert summary.session == 1 and summary.written == 4 and summary.complete
    assert sorted(_slots(folder)) == planned  # every sampled slot once, none twice
    assert read_header(folder).sessions[0].stop_reason == "interrupted"
    rep = card_from_run(run).reproducibility
    assert rep is not None and rep.replayed == 6 and rep.identical_transcript.count == 6


def test_the_preregistered_replay_runs_after_the_run(
    tmp_path: Path, server: ReferenceServer
) -> None:
    path = prereg(
        tmp_path,
        model="noisy?p_early_stop=0",
        base_url=server.base_url,
        tasks=2,
        attempts=1,
        design={"replay": {"sample": 3, "seed": 5}},
    )
    run = tmp_path / "run"
    summary = run_preregistration(path, run, show_progress=False)
    assert summary.replay is not None and summary.replay.planned == 3
    replay = read_header(run / "replay").replay
    assert replay is not None and (replay.sample, replay.seed) == (3, 5)
    rep = card_from_run(run).reproducibility
    assert rep is not None and rep.replayed == 3


def test_bad_input_on_the_command_line_is_one_line_and_writes_nothing(
    tmp_path: Path, server: ReferenceServer, capsys: pytest.CaptureFixture[str]
) -> None:
    path = prereg(tmp_path, base_url=server.base_url, tasks=2, attempts=1)
    run = tmp_path / "run"
    run_preregistration(path, run, show_progress=False)
    (run / "run.lock").unlink()  # as a merged folder has none: a refusal must not make one
    before = sorted(p.name for p in run.iterdir())
    capsys.readouterr()
    for args, says in (
        ([str(run), "--sample", "99"], "error: --sample 99 is more than the 4 scored slots"),
        ([str(run), "--sample", "0"], "error: --sample 0: a replay runs 1 or more"),
        ([str(run), "--sample", "-1"], "error: --sample -1: a replay runs 1 or more"),
        ([str(tmp_path / "no"), "--sample", "1"], "is not a run folder (no such folder)"),
        ([str(tmp_path), "--sample", "1"], "is not a run folder (run.json is missing)"),
        ([str(run / "replay"), "--sample", "1"], "is not a run folder (no such folder)"),
    ):
        assert run_cli(["replay", *args, "--quiet"]) == 2
        err = capsys.readouterr().err
        assert err.strip().splitlines() == [err.strip()], err  # one line
        assert err.startswith("error: ") and says in err, err
    assert not (run / "replay").exists()
    assert sorted(p.name for p in run.iterdir()) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([path.name, "run"])


def test_a_merged_shard_folder_replays(tmp_path: Path, server: ReferenceServer) -> None:
    path = prereg(tmp_path, model="noisy?p_early_stop=0", base_url=server.base_url, tasks=2)
    shards = [tmp_path / f"s{i}" for i in range(2)]
    for index, folder in enumerate(shards):
        run_preregistration(path, folder, show_progress=False, shard=Shard(index, 2))
    merged = tmp_path / "merged"
    merge_shards(shards, merged)
    summary = replay_run(merged, 4, show_progress=False)
    assert summary.complete and summary.planned == 4
    rep = card_from_run(merged).reproducibility
    assert rep is not None and rep.replayed == 4 and rep.identical_transcript.count == 4


def test_the_flip_rate_sentence_reads_the_interval_against_the_resolution() -> None:
    few = flip_reading(ReplayShare(count=0, share=0.0, low=0.0, high=0.185), 0.15, True)
    assert "replay more slots" in few
    many = flip_reading(ReplayShare(count=0, share=0.0, low=0.0, high=0.01), 0.15, True)
    assert "below the 0.15" in many and "does not make a called difference" in many
    flips = flip_reading(ReplayShare(count=10, share=0.25, low=0.166, high=0.472), 0.15, False)
    assert "may be the serving's nondeterminism" in flips
    assert "served otherwise than the run" in flips


def test_a_server_that_moved_is_replayed_at_its_new_address(
    tmp_path: Path, server: ReferenceServer
) -> None:
    path = prereg(tmp_path, model="noisy?p_early_stop=0", base_url=server.base_url, tasks=2)
    run = tmp_path / "run"
    run_preregistration(path, run, show_progress=False)
    with start_reference_server("127.0.0.1", 0) as moved:  # the same server, restarted elsewhere
        summary = replay_run(run, 3, show_progress=False, base_url=moved.base_url)
    assert summary.complete
    stored = read_header(run / "replay").preregistration["model"]["base_url"]
    assert stored == moved.base_url != server.base_url
    rep = card_from_run(run).reproducibility
    assert rep is not None and rep.serving_differences == []  # the address is not pin N10
    assert rep.identical_transcript.count == 3


def test_a_replay_whose_format_alarm_rings_says_so_in_one_error_line(
    tmp_path: Path, server: ReferenceServer, capsys: pytest.CaptureFixture[str]
) -> None:
    # issue 34 item 7: `replay` exited 1 with no `error:` line when its format alarm rang
    # (`run` prints one); the text-call policy writes every call as text (format clause 1)
    path = prereg(tmp_path, model="text-call", base_url=server.base_url, tasks=2, attempts=1)
    run = tmp_path / "run"
    assert run_cli(["run", str(path), "--out", str(run), "--quiet"]) == 1
    said = capsys.readouterr().err
    assert next(x for x in said.splitlines() if x.startswith("error: ")).startswith(
        "error: 4 of 4 scored episodes broke format clause 1"
    )
    assert run_cli(["replay", str(run), "--sample", "2", "--quiet"]) == 1
    out, err = capsys.readouterr()
    errors = [x for x in err.splitlines() if x.startswith("error: ")]
    assert len(errors) == 1 and errors[0].startswith(
        "error: 2 of 2 scored episodes broke format clause 1"
    )
    assert f"in the replay in {run / 'replay'}" in errors[0]
    assert "## Reproducibility" in out


def test_the_section_says_which_seeds_the_run_and_its_replay_sent(
    tmp_path: Path, server: ReferenceServer
) -> None:
    # issue 34 item 7: the section said "per-attempt seeds" while llama.cpp had been sent none
    said = {}
    for name, decoding in (("plain", {}), ("seeded", {"seed": "derived"})):
        folder = tmp_path / name
        path = prereg(
            folder.parent,
            name=name,
            model="oracle",
            base_url=server.base_url,
            tasks=2,
            attempts=1,
            decoding=decoding,
        )
        run_preregistration(path, folder, show_progress=False)
        replay_run(folder, 1, show_progress=False)
        said[name] = _section(render_document(card_from_run(folder)))
    assert (
        "with its decoding and no seed, as the run sent none (the reference policies"
        in (said["plain"])
    )
    assert "per-attempt seeds" not in said["plain"]
    assert (
        "with its decoding and the per-attempt seeds the run sent (decoding.seed: derived;"
        in (said["seeded"])
    )
    llama = replay_seed_phrase("llamacpp", derived=False)
    assert "fresh draw" in llama and "llama.cpp's server samples from it" in llama


def test_validate_says_when_a_server_that_takes_a_seed_is_sent_none(tmp_path: Path) -> None:
    local = REPO / "preregistrations" / "local-smollm2.yaml"
    doc = yaml.safe_load(local.read_text(encoding="utf-8"))
    assert run_cli(["validate", str(local)]) == 0
    del doc["decoding"]["seed"]
    path = tmp_path / "no-seed.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    plan = load_preregistration(path)
    (line,) = [x for x in describe_plan(plan).splitlines() if x.startswith("  seed ")]
    assert "none sent, although llama.cpp's server samples from it" in line
    assert "write decoding.seed: derived" in line
