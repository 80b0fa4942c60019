"""CI (issue 36): docker/slurm/shards.sbatch and merge.sbatch submitted to a real SLURM controller
(the one-node cluster of scripts/ci/slurm-cluster; SLURM_CONF names it).

    python scripts/ci/check_slurm.py WORKDIR

1. The array: shards.sbatch as shipped (--array=0-3) with SERVER=reference, its GPU and size
   overridden on the command line as docs/scale.md tells a CPU cluster's user, over the smoke
   design's four arms at 100 tasks (800 episodes); merge.sbatch after it (afterok).
2. Faults as a cluster delivers them, while the array runs: task 1 is requeued (scontrol requeue)
   and task 2 cancelled (scancel), each once its folder holds episodes; index 2 is resubmitted
   alone (sbatch --array=2, SHARDS=4) with a second merge after the tasks that stand. The first
   merge is cancelled by the scheduler (DependencyNeverSatisfied), the second runs.
3. The scheduler's records (scontrol show job): every index COMPLETED once in the end, the
   requeued task with Restarts=1, the cancelled one CANCELLED, the second merge COMPLETED. The two
   interrupted folders each hold a session stopped by SIGTERM and the session that resumed them.
4. The merged card against the card of the same design run whole on one machine, under
   calibration.sameness: equal; every slot of the plan has exactly one line.
5. Final exits: a refused pre-registration's task and a task stopped by its budget share each end
   FAILED once (ExitCode 2:0, 3:0, Restarts=0) and are not requeued.

Reference-policy figures are baselines of the instrument, never a model's results.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from poisson_tasks.calibration import card_from_run
from poisson_tasks.calibration.sameness import TIME_AND_PLACEMENT, compare_cards

ROOT = Path(__file__).resolve().parents[2]
SHARDS_SBATCH = ROOT / "docker" / "slurm" / "shards.sbatch"
MERGE_SBATCH = ROOT / "docker" / "slurm" / "merge.sbatch"
SMOKE = ROOT / "preregistrations" / "smoke.yaml"
TASKS = 100  # per arm: 800 episodes, 200 a shard, so a task runs long enough to be interrupted
# A CPU task: no GPU, one core, a small memory and an explicit limit, over the file's directives.
CPU_TASK = ["--gres=gpu:0", "--cpus-per-task=1", "--mem=1G", "--time=00:10:00"]
WAIT_S = 600.0


LOGS: list[Path] = []  # the folder of the jobs' logs, once known


def fail(message: str) -> None:
    for folder in LOGS:  # every job's own log, to see why
        for log in sorted(folder.glob("poisson-*.log")):
            print(f"--- {log.name}\n{log.read_text(encoding='utf-8', errors='replace')}")
    raise SystemExit(f"FAIL: {message}")


def slurm(*args: str) -> str:
    done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        fail(f"{' '.join(args)}: exit {done.returncode}: {done.stderr.strip()}")
    return done.stdout.strip()


def records(job: str) -> list[dict[str, str]]:
    """`scontrol show job` one record a line (-o), each as its KEY=VALUE fields."""
    out: list[dict[str, str]] = []
    for line in slurm("scontrol", "-o", "show", "job", job).splitlines():
        fields: dict[str, str] = {}
        last = ""
        for word in line.split():
            key, sep, value = word.partition("=")
            if sep:
                fields[key] = value
                last = key
            elif last:  # a value with a space in it
                fields[last] += " " + word
        out.append(fields)
    return out


def record(job: str) -> dict[str, str]:
    (one,) = records(job)
    return one


SHOWN = (
    "JobId",
    "ArrayJobId",
    "ArrayTaskId",
    "JobName",
    "JobState",
    "Reason",
    "Dependency",
    "Requeue",
    "Restarts",
    "ExitCode",
    "RunTime",
    "StartTime",
    "EndTime",
)


def show(fields: dict[str, str]) -> str:
    return " ".join(f"{k}={fields[k]}" for k in SHOWN if k in fields)


def wait_for(what: str, ready: Callable[[], bool], timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            fail(f"{what}: not within {timeout:.0f} s")
        time.sleep(0.05)


def lines(folder: Path) -> int:
    try:
        with (folder / "episodes.jsonl").open("rb") as fh:
            return sum(1 for _ in fh)
    except FileNotFoundError:
        return 0


def state(job: str) -> str:
    return record(job)["JobState"]


def ended(job: str) -> bool:
    return all(
        r["JobState"] not in ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING", "REQUEUED")
        for r in records(job)
    )


def sbatch(work: Path, script: Path, *options: str, env: dict[str, str]) -> str:
    export = ",".join(["ALL", *(f"{k}={v}" for k, v in env.items())])
    return slurm(
        "sbatch", "--parsable", f"--chdir={work}", f"--export={export}", *options, str(script)
    )


def preregistration(path: Path, name: str, **sections: dict[str, object]) -> Path:
    """The smoke design with some fields of its sections changed, written to `path`."""
    doc = yaml.safe_load(SMOKE.read_text(encoding="utf-8"))
    doc["name"] = name
    for section, fields in sections.items():
        doc[section].update(fields)
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def expect(job: str, **wanted: str) -> dict[str, str]:
    fields = record(job)
    print("  " + show(fields))
    for key, value in wanted.items():
        if fields.get(key) != value:
            fail(f"job {job}: {key}={fields.get(key)}, expected {value}")
    return fields


def sessions(folder: Path) -> list[dict[str, Any]]:
    header = json.loads((folder / "run.json").read_text(encoding="utf-8"))
    return list(header["sessions"])


def interrupted_then_resumed(folder: Path, what: str) -> None:
    stops = [(s["stop_reason"], s["detail"], s["episodes_written"]) for s in sessions(folder)]
    print(f"  {folder.name}: sessions {stops}")
    if len(stops) != 2 or stops[0][0] != "interrupted" or "SIGTERM" not in str(stops[0][1]):
        fail(f"{folder.name}: the {what} did not land mid-run (sessions {stops})")
    if stops[1][0] != "complete":
        fail(f"{folder.name}: the resumed session did not complete ({stops[1]})")


def main() -> None:
    work = Path(sys.argv[1]).resolve()
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    runs = work / "runs"
    LOGS.append(work)

    study = preregistration(
        work / "slurm-ci.yaml", "slurm-ci", design={"tasks": TASKS}, budget={"tokens": 20_000_000}
    )
    env = {"SERVER": "reference", "PREREG": str(study), "RUNS": str(runs)}

    print(f"-- the array: {SHARDS_SBATCH.relative_to(ROOT)} x 4, SERVER=reference, {study.name}")
    started = time.monotonic()
    array = sbatch(work, SHARDS_SBATCH, *CPU_TASK, env=env)
    merge1 = sbatch(work, MERGE_SBATCH, f"--dependency=afterok:{array}", env={"RUNS": str(runs)})
    print(f"  array job {array} (tasks {array}_0 to {array}_3); merge job {merge1} afterok:{array}")
    whole = subprocess.Popen(  # the same design on one machine, in-process endpoint
        [
            sys.executable,
            "-m",
            "poisson_tasks.cli",
            "run",
            str(study),
            "--out",
            str(work / "whole"),
            "--quiet",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )

    print("-- faults while the array runs")
    shard = [runs / f"shard-{i}" for i in range(4)]
    wait_for(
        f"{array}_1 running with episodes written",
        lambda: state(f"{array}_1") == "RUNNING" and lines(shard[1]) > 0,
    )
    slurm("scontrol", "requeue", f"{array}_1")
    print(f"  scontrol requeue {array}_1 with {lines(shard[1])} of 200 lines in {shard[1].name}")
    wait_for(
        f"{array}_2 running with episodes written",
        lambda: state(f"{array}_2") == "RUNNING" and lines(shard[2]) > 0,
    )
    slurm("scancel", f"{array}_2")
    print(f"  scancel {array}_2 with {lines(shard[2])} of 200 lines in {shard[2].name}")
    wait_for(f"{array}_2 cancelled", lambda: state(f"{array}_2") == "CANCELLED")
    again = sbatch(work, SHARDS_SBATCH, "--array=2", *CPU_TASK, env={**env, "SHARDS": "4"})
    stand = f"{array}_0:{array}_1:{array}_3:{again}"
    merge2 = sbatch(work, MERGE_SBATCH, f"--dependency=afterok:{stand}", env={"RUNS": str(runs)})
    print(
        f"  index 2 resubmitted: job {again} (sbatch --array=2, SHARDS=4); "
        f"merge job {merge2} afterok:{stand}"
    )

    wait_for(f"merge job {merge2} to end", lambda: ended(merge2))
    wait_for(f"merge job {merge1} to end", lambda: ended(merge1))
    print(f"-- the scheduler's records, {time.monotonic() - started:.1f} s after the submission")
    expect(f"{array}_0", JobState="COMPLETED", ExitCode="0:0", Restarts="0")
    expect(f"{array}_1", JobState="COMPLETED", ExitCode="0:0", Restarts="1")
    expect(f"{array}_2", JobState="CANCELLED")
    expect(f"{array}_3", JobState="COMPLETED", ExitCode="0:0", Restarts="0")
    expect(again, JobState="COMPLETED", ExitCode="0:0", ArrayTaskId="2")
    expect(merge1, JobState="CANCELLED", Reason="DependencyNeverSatisfied")
    expect(merge2, JobState="COMPLETED", ExitCode="0:0")
    for index in (1, 2):
        interrupted_then_resumed(shard[index], "requeue" if index == 1 else "cancel")
    for log in (f"{array}-1", f"{array}-2", f"{again}-2"):  # --open-mode=append: every run's lines
        print(f"  poisson-shards-{log}.log:")
        for line in (work / f"poisson-shards-{log}.log").read_text(encoding="utf-8").splitlines():
            print(f"    {line}")
    for index in (0, 3):
        if [s["stop_reason"] for s in sessions(shard[index])] != ["complete"]:
            fail(f"{shard[index].name}: expected one complete session")

    print("-- the merged card against the one-machine card")
    _, err = whole.communicate(timeout=WAIT_S)
    if whole.returncode != 0:
        fail(f"the whole run: {err}")
    merged = runs / "merged"
    slots = {
        (line["arm_id"], line["seed"], line["attempt"])
        for line in map(json.loads, (merged / "episodes.jsonl").open(encoding="utf-8"))
    }
    print(f"  {merged}: {lines(merged)} lines, {len(slots)} distinct slots of {8 * TASKS}")
    if not lines(merged) == len(slots) == 8 * TASKS:
        fail("a slot is missing or has more than one line")
    card = card_from_run(merged)
    after = sum(int(s["episodes_written"]) for i in (1, 2) for s in sessions(shard[i])[1:])
    disclosed = sum(c.resumed for c in card.cells)
    print(
        f"  the merged card discloses the resume: {disclosed} episodes made after it "
        f"(the resumed sessions wrote {after})"
    )
    if disclosed != after or "resumed" not in {c.key for c in card.statements.does_not_claim}:
        fail("the merged card does not disclose the resumed sessions")
    comparison = compare_cards(card, card_from_run(work / "whole"))
    excluded = ", ".join(e.path for e in TIME_AND_PLACEMENT)
    print(
        f"  merged card (merge job {merge2}) against the whole run's (less {excluded}): "
        f"{comparison.line()}"
    )
    if not comparison.equal:
        fail("the merged card is not the one-machine card")
    written = json.loads((runs / "card" / "card.json").read_text(encoding="utf-8"))
    if written["kind"] != "reference-policy":
        fail(f"the merge job's card is a {written['kind']} card")

    print("-- final exits end FAILED once, never requeued")
    refused = preregistration(work / "refused.yaml", "refused", design={"tasks": 0})
    stopped = preregistration(work / "budget.yaml", "budget", budget={"tokens": 40_000})
    jobs = {
        "refused pre-registration": sbatch(
            work,
            SHARDS_SBATCH,
            "--array=0",
            *CPU_TASK,
            env={**env, "PREREG": str(refused), "RUNS": str(work / "refused")},
        ),
        "budget share": sbatch(
            work,
            SHARDS_SBATCH,
            "--array=0",
            *CPU_TASK,
            env={**env, "PREREG": str(stopped), "RUNS": str(work / "budget")},
        ),
    }
    for job in jobs.values():
        wait_for(f"job {job} to end", partial(ended, job))
    time.sleep(5)  # two passes of the scheduler (sched_interval=2): nothing requeues them
    for (what, job), code in zip(jobs.items(), ("2:0", "3:0"), strict=True):
        print(f"  {what}:")
        expect(job, JobState="FAILED", ExitCode=code, Restarts="0", Requeue="1")
        for line in (work / f"poisson-shards-{job}-0.log").read_text(encoding="utf-8").splitlines():
            print(f"    {line}")
    print(f"slurm checks took {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
