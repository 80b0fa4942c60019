"""docker/slurm/shards.sbatch and merge.sbatch, without a scheduler.

CI submits both to a real SLURM controller (scripts/ci/slurm: the array, a requeue, a cancel and
a resubmission, the scheduler's records). Here, offline and in seconds: the directives a cluster
reads, every variable documented at the top, and the scripts themselves run by bash with the
variables SLURM would set (SERVER=reference): a bad variable is one line and exit 2, a refused
pre-registration exits 2, a server that never answers exits 69, two tasks and the merge make a
card, a task run again resumes its folder against the port it recorded, and a SIGTERM reaches
the runner, which records the stop, before the server is stopped.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_runner import SLOW_CALLS, prereg

from poisson_tasks.calibration import card_from_run
from poisson_tasks.runfolder import EPISODES, HEADER, read_header

ROOT = Path(__file__).resolve().parents[1]
SHARDS = ROOT / "docker" / "slurm" / "shards.sbatch"
MERGE = ROOT / "docker" / "slurm" / "merge.sbatch"
# Variables a script reads that are the shell's or SLURM's own, not the user's to set.
NOT_THE_USERS = {"PATH", "PWD", "TMPDIR", "SECONDS"}


def _directives(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#SBATCH "):
            flag, _, value = line.removeprefix("#SBATCH ").partition("=")
            out[flag] = value
    return out


def test_the_directives_are_what_an_array_and_its_merge_need() -> None:
    shards = _directives(SHARDS)
    assert shards["--array"] == "0-3"
    assert "--requeue" in shards and shards["--open-mode"] == "append"
    assert re.fullmatch(r"\d{2}:\d{2}:\d{2}", shards["--time"])  # an explicit limit
    assert "%A" in shards["--output"] and "%a" in shards["--output"]  # a log per task
    assert shards["--gres"] == "gpu:1"  # the vLLM path, as shipped
    merge = _directives(MERGE)
    assert merge["--kill-on-invalid-dep"] == "yes" and merge["--open-mode"] == "append"
    assert re.fullmatch(r"\d{2}:\d{2}:\d{2}", merge["--time"])
    for path in (SHARDS, MERGE):
        subprocess.run(["bash", "-n", str(path)], check=True)


@pytest.mark.parametrize("path", [SHARDS, MERGE], ids=["shards", "merge"])
def test_every_variable_a_script_reads_is_documented_at_its_top(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    header, _, body = text.partition("#SBATCH")
    documented = set(re.findall(r"^#   ([A-Z][A-Z0-9_]+) ", header, re.MULTILINE))
    read = set(re.findall(r"\$\{?([A-Z][A-Z0-9_]+)", body)) - NOT_THE_USERS
    read = {name for name in read if not name.startswith("SLURM_")}
    assert read, "no variable found: the pattern is wrong"
    assert read <= documented, f"read but not documented: {sorted(read - documented)}"
    assert documented <= read, f"documented but never read: {sorted(documented - read)}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(tmp_path: Path, index: int, count: int, **more: str) -> dict[str, str]:
    """What sbatch --array=0-<count-1> gives task `index`, and the variables the user sets."""
    return {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "SLURM_JOB_ID": str(100 + index),
        "SLURM_ARRAY_JOB_ID": "100",
        "SLURM_ARRAY_TASK_ID": str(index),
        "SLURM_ARRAY_TASK_MIN": "0",
        "SLURM_ARRAY_TASK_MAX": str(count - 1),
        "SLURM_ARRAY_TASK_COUNT": str(count),
        "SERVER": "reference",
        "RUNS": str(tmp_path / "runs"),
        **more,
    }


def _task(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SHARDS)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240
    )


def _one_error_line(done: subprocess.CompletedProcess[str], code: int, says: str) -> None:
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert done.returncode == code, done.stderr
    assert len(errors) == 1 and says in errors[0], done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"SLURM_ARRAY_TASK_ID": ""}, "submit this file as an array job"),
        ({"PREREG": ""}, "set PREREG"),
        ({"PREREG": "missing.yaml"}, "PREREG=missing.yaml is not a file"),
        ({"SERVER": "triton"}, "SERVER=triton: choose vllm, reference or local"),
        ({"SERVER": "vllm", "VLLM_SIF": "none.sif"}, "VLLM_SIF=none.sif is not a file"),
        ({"SERVER": "local"}, "SERVER=local needs GGUF"),
        ({"SERVE_WAIT_S": "ten"}, "SERVE_WAIT_S=ten is not a positive whole number"),
        ({"SHARDS": "0"}, "SHARDS=0 is not a positive whole number"),
        ({"SERVE_PORT": "99999"}, "SERVE_PORT=99999 is not a port"),
        (
            {
                "SLURM_ARRAY_TASK_MIN": "2",
                "SLURM_ARRAY_TASK_MAX": "2",
                "SLURM_ARRAY_TASK_COUNT": "1",
                "SLURM_ARRAY_TASK_ID": "2",
            },
            "set SHARDS=N",
        ),
    ],
)
def test_a_bad_variable_is_one_line_and_exit_2(
    tmp_path: Path, change: dict[str, str], says: str
) -> None:
    study = prereg(tmp_path, tasks=1, attempts=1)
    done = _task(tmp_path, {**_env(tmp_path, 0, 4, PREREG=study.name), **change})
    _one_error_line(done, 2, says)
    assert not (tmp_path / "runs").exists()  # nothing made


def test_a_refused_preregistration_exits_2_before_any_server_starts(tmp_path: Path) -> None:
    study = prereg(tmp_path, tasks=1, attempts=1)
    study.write_text(study.read_text().replace("tasks: 1", "tasks: 0"))
    port = _free_port()
    done = _task(tmp_path, _env(tmp_path, 0, 1, PREREG=study.name, SERVE_PORT=str(port)))
    _one_error_line(done, 2, "design.tasks: must be 1 or more")
    assert not (tmp_path / "runs" / "shard-0").exists()
    with socket.socket() as s, pytest.raises(ConnectionRefusedError):
        s.connect(("127.0.0.1", port))  # no server was left behind


def test_a_server_that_never_answers_exits_69(tmp_path: Path) -> None:
    study = prereg(tmp_path, tasks=1, attempts=1)
    with socket.socket() as taken:  # the port is bound here, so the server cannot bind it
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        done = _task(tmp_path, _env(tmp_path, 0, 1, PREREG=study.name, SERVE_PORT=str(port)))
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert done.returncode == 69, done.stderr
    assert "address already in use" in errors[0]  # the server's own line says why
    assert "the reference server exited before it answered /health" in errors[-1]
    assert len(errors) == 2 and "Traceback" not in done.stderr


def _port_of(folder: Path) -> int:
    url = read_header(folder).preregistration["model"]["base_url"]
    return int(url.rsplit(":", 1)[1].removesuffix("/v1"))


@pytest.mark.slow  # seven tasks and merges, ~10 s on a quiet machine; scripts/ci/slurm: under SLURM
def test_two_tasks_resume_and_merge_into_a_card(tmp_path: Path) -> None:
    study = prereg(tmp_path, tasks=2, attempts=1)
    tasks = [
        subprocess.Popen(
            ["bash", str(SHARDS)],
            cwd=tmp_path,
            env=_env(tmp_path, i, 2, PREREG=study.name),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    for task in tasks:
        _, err = task.communicate(timeout=240)
        assert task.returncode == 0, err
        assert "(shard " in err and "session 0: complete" in err
    shard = [tmp_path / "runs" / f"shard-{i}" for i in range(2)]
    port = _port_of(shard[1])
    assert port != _port_of(shard[0])  # a free port each: two tasks on one node never meet
    # Index 1 resubmitted alone (sbatch --array=1, SHARDS=2): it resumes its folder, on its port.
    alone = {"SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_COUNT": "1", "SHARDS": "2"}
    again = _task(tmp_path, _env(tmp_path, 1, 2, PREREG=study.name, **alone))
    assert again.returncode == 0, again.stderr
    assert "resuming" in again.stderr and "(shard 1/2) is complete already" in again.stderr
    assert "no session was added" in again.stderr  # a complete shard resumed adds no empty session
    assert f"127.0.0.1:{port}/v1" in again.stderr and _port_of(shard[1]) == port
    # The same index under another N is refused by the runner, in one line.
    other = _task(tmp_path, _env(tmp_path, 1, 2, PREREG=study.name, **{**alone, "SHARDS": "3"}))
    _one_error_line(other, 2, "holds shard 1/2 of its study, not 1/3")
    merged = subprocess.run(
        ["bash", str(MERGE)],
        cwd=tmp_path,
        env=_env(tmp_path, 0, 1),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert merged.returncode == 0, merged.stderr
    assert "merged 2 shards" in merged.stdout
    assert (tmp_path / "runs" / "card" / "card.md").is_file()
    assert card_from_run(tmp_path / "runs" / "merged").kind == "reference-policy"
    rerun = subprocess.run(  # a merge job run again cards what it merged
        ["bash", str(MERGE)],
        cwd=tmp_path,
        env=_env(tmp_path, 0, 1),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert rerun.returncode == 0 and "already merged" in rerun.stderr, rerun.stderr


def test_sigterm_reaches_the_runner_before_the_server_stops(tmp_path: Path) -> None:
    # sbatch --signal=B:TERM or scancel --batch signal the script alone: it passes the signal on
    # and waits, so the runner records the stop in its folder (exit 143) and the resume goes on.
    study = prereg(tmp_path, model=SLOW_CALLS, arms=["depth:d3"], tasks=8, attempts=1)
    port = _free_port()
    task = subprocess.Popen(
        ["bash", str(SHARDS)],
        cwd=tmp_path,
        env=_env(tmp_path, 0, 1, PREREG=study.name, SERVE_PORT=str(port)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    folder = tmp_path / "runs" / "shard-0"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and task.poll() is None:
        if (folder / EPISODES).is_file() and (folder / EPISODES).read_bytes().count(b"\n") >= 1:
            break
        time.sleep(0.02)
    os.kill(task.pid, signal.SIGTERM)
    _, err = task.communicate(timeout=120)
    assert task.returncode == 143, err
    session = read_header(folder).sessions[-1]
    assert session.stop_reason == "interrupted" and session.detail == "stopped by SIGTERM", err
    assert (folder / HEADER).is_file() and "shard 0/1: exit 143" in err
    with socket.socket() as s, pytest.raises(ConnectionRefusedError):
        s.connect(("127.0.0.1", port))
