"""`run --shard i/n`: the partition of a plan's slots, and a shard folder as a run folder.

Every run here is against the reference endpoint on loopback (reference-policy figures are
baselines of the instrument, never a model's results).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from test_runner import prereg

from poisson_tasks.arms import parse_arm_id
from poisson_tasks.errors import RunFolderError, ShardError
from poisson_tasks.prereg import load_preregistration
from poisson_tasks.reference import ReferenceServer
from poisson_tasks.runfolder import iter_episodes, read_header
from poisson_tasks.runner import run_preregistration
from poisson_tasks.runner.shard import (
    SHARD_RULE,
    Shard,
    budget_share,
    partition,
    plan_hash,
    shard_slots,
    slots_digest,
)

CLI = [sys.executable, "-m", "poisson_tasks.cli"]
REPO = Path(__file__).resolve().parents[1]
PUBLISHED = REPO / "preregistrations" / "published.yaml"
SMOKE = REPO / "preregistrations" / "smoke.yaml"


@pytest.mark.parametrize("count", [1, 2, 3, 4, 7, 16, 60, 840])
def test_every_slot_is_in_exactly_one_shard_balanced_by_arm_and_calls(count: int) -> None:
    plan = load_preregistration(PUBLISHED)
    shards = partition(plan, count)
    assert len(shards) == count
    together = Counter(s for shard in shards for s in shard)
    assert together == Counter(plan.slots())  # every slot once, none twice, none invented
    where = {s: i for i, s in enumerate(plan.slots())}
    for shard in shards:  # each shard in plan order, a task's attempts together
        order = [where[s] for s in shard]
        assert order == sorted(order)
        tasks = Counter((s.arm_id, s.seed) for s in shard)
        assert set(tasks.values()) == {plan.attempts}
    for arm in plan.arms:  # every shard holds each arm's tasks within one
        per_shard = [len({s.seed for s in shard if s.arm_id == arm}) for shard in shards]
        assert max(per_shard) - min(per_shard) <= 1, (arm, per_shard)
    weight = {a: parse_arm_id(a).reference_turns for a in plan.arms}
    calls = [sum(weight[s.arm_id] for s in shard) for shard in shards]
    heaviest_task = max(weight.values()) * plan.attempts
    assert max(calls) - min(calls) <= heaviest_task, calls


def test_the_partition_is_the_same_in_every_process() -> None:
    code = (
        "from poisson_tasks.prereg import load_preregistration;"
        "from poisson_tasks.runner.shard import partition, slots_digest;"
        f"p = load_preregistration({str(PUBLISHED)!r});"
        "print([slots_digest(s) for s in partition(p, 7)])"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("0", "12345")
    }
    assert len(outputs) == 1
    plan = load_preregistration(PUBLISHED)
    assert outputs.pop().strip() == str([slots_digest(s) for s in partition(plan, 7)])


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("x", "is not i/n"),
        ("1", "is not i/n"),
        ("-1/4", "is not i/n"),
        ("1/4/2", "is not i/n"),
        ("4/4", "runs from 0 to 3"),
        ("0/0", "must be 1 or more"),
    ],
)
def test_a_bad_shard_is_one_line(text: str, says: str) -> None:
    with pytest.raises(ShardError, match=says):
        Shard.parse(text)


def test_more_shards_than_tasks_is_refused() -> None:
    plan = load_preregistration(SMOKE)  # 4 arms x 50 tasks
    with pytest.raises(ShardError, match="at most 200 shards"):
        shard_slots(plan, Shard(0, 201))
    assert len(shard_slots(plan, Shard(199, 200))) == plan.attempts


def test_the_plan_hash_leaves_out_only_the_endpoint_address(tmp_path: Path) -> None:
    one = load_preregistration(prereg(tmp_path, base_url="http://127.0.0.1:1/v1"))
    two = load_preregistration(prereg(tmp_path, base_url="http://127.0.0.1:2/v1"))
    other = load_preregistration(prereg(tmp_path, base_url="http://127.0.0.1:1/v1", tasks=4))
    dump = lambda p: p.preregistration.model_dump(mode="json")  # noqa: E731
    assert one.preregistration_hash != two.preregistration_hash
    assert plan_hash(dump(one)) == plan_hash(dump(two))
    assert plan_hash(dump(one)) != plan_hash(dump(other))


def test_a_budget_share_is_the_cap_over_n() -> None:
    plan = load_preregistration(SMOKE)
    share = budget_share(plan.preregistration.budget.model_copy(update={"dollars": 3.0}), 4)
    assert (share.tokens, share.dollars, share.wall_clock_s) == (1_500_000, 0.75, 300.0)
    assert budget_share(plan.preregistration.budget, 7).tokens == 857_142  # rounded down


def test_a_shard_folder_records_its_shard_and_runs_only_its_slots(
    tmp_path: Path, server: ReferenceServer
) -> None:
    path = prereg(tmp_path, base_url=server.base_url, tasks=3, attempts=2)
    plan = load_preregistration(path)
    out = tmp_path / "s1"
    summary = run_preregistration(path, out, show_progress=False, shard=Shard(1, 2))
    mine = shard_slots(plan, Shard(1, 2))
    assert summary.planned == len(mine) == summary.scored
    assert summary.shard == "1/2" and summary.complete
    assert Counter((ln.arm_id, ln.seed, ln.attempt) for ln in iter_episodes(out)) == Counter(mine)
    header = read_header(out)
    assert header.shard is not None
    assert (header.shard.index, header.shard.count, header.shard.rule) == (1, 2, SHARD_RULE)
    assert header.shard.slots == len(mine)
    assert header.shard.slots_sha256 == slots_digest(mine)
    assert header.shard.plan_hash == plan_hash(plan.preregistration.model_dump(mode="json"))
    assert header.shard.budget["tokens"] == plan.preregistration.budget.tokens // 2
    assert header.sessions[0].budget == header.shard.budget
    # a whole run's run.json keeps its bytes: no shard key at all
    whole = tmp_path / "whole"
    run_preregistration(path, whole, show_progress=False)
    assert "shard" not in json.loads((whole / "run.json").read_text())


def test_a_shard_stops_at_its_share_of_the_token_cap(
    tmp_path: Path, server: ReferenceServer
) -> None:
    # The study's cap, 40,000 tokens, is about two shards' worth of spend: cut in 4, each shard
    # stops at 10,000 where a whole run would have gone on.
    path = prereg(
        tmp_path,
        base_url=server.base_url,
        tasks=8,
        attempts=2,
        budget={"tokens": 40_000, "wall_clock_s": 120},
        execution={"concurrency": 1, "max_retries": 1, "backoff_s": 0.001, "backoff_max_s": 0.01},
    )
    summary = run_preregistration(path, tmp_path / "s0", show_progress=False, shard=Shard(0, 4))
    assert summary.stop_reason == "token_budget"
    assert not summary.complete
    assert 10_000 <= summary.tokens < 10_000 + 8_000  # stopped at the share, plus one episode


def test_a_shard_folder_resumes_as_its_own_shard_only(
    tmp_path: Path, server: ReferenceServer
) -> None:
    path = prereg(tmp_path, base_url=server.base_url, tasks=2, attempts=1)
    out = tmp_path / "s0"
    run_preregistration(path, out, show_progress=False, shard=Shard(0, 2))
    with pytest.raises(RunFolderError, match="holds shard 0/2 of its study, not 1/2"):
        run_preregistration(path, out, resume=True, show_progress=False, shard=Shard(1, 2))
    with pytest.raises(RunFolderError, match="holds shard 0/2 of its study: resume it with"):
        run_preregistration(path, out, resume=True, show_progress=False)
    whole = tmp_path / "whole"
    run_preregistration(path, whole, show_progress=False)
    with pytest.raises(RunFolderError, match="holds a whole run, not shard 0/2"):
        run_preregistration(path, whole, resume=True, show_progress=False, shard=Shard(0, 2))
    # the command line reads the shard from run.json when --resume has no --shard
    done = subprocess.run(
        [*CLI, "run", "--resume", str(out), "--quiet"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "(shard 0/2) is complete already" in done.stderr  # complete: no session is opened
    assert len(read_header(out).sessions) == 1


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--shard", "2/2"], "error: --shard 2/2: the index runs from 0 to 1"),
        (["--shard", "0/99"], "error: 99 shards cannot cut this plan"),
    ],
)
def test_a_bad_shard_on_the_command_line_writes_nothing(
    tmp_path: Path, args: list[str], says: str
) -> None:
    path = prereg(tmp_path, tasks=2)
    out = tmp_path / "never"
    done = subprocess.run(
        [*CLI, "run", str(path), "--out", str(out), "--quiet", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [done.stderr.strip()]  # one line
    assert done.stderr.startswith(says), done.stderr
    assert not out.exists()
