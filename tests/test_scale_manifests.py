"""docker/k8s, docker/slurm and docker/compose.shards.yaml: a study cut across machines.

The schema check of the Kubernetes objects runs in CI (scripts/ci/shards, kubernetes-validate's
Kubernetes JSON schemas); here, what ties the files together: the index becomes --shard, n is
one number everywhere, the Service answers the pre-registration's base_url, and the commands the
Job's pods run do what they say, run here with the real CLI against the reference endpoint.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from poisson_tasks.calibration import card_from_run
from poisson_tasks.runfolder import read_header

ROOT = Path(__file__).resolve().parents[1]
K8S = ROOT / "docker" / "k8s"
SLURM = ROOT / "docker" / "slurm"
QWEN = ROOT / "preregistrations" / "published-qwen3-8b-vllm.yaml"


def _objects() -> dict[tuple[str, str], dict[str, Any]]:
    out = {}
    for path in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            out[(doc["kind"], doc["metadata"]["name"])] = doc
    return out


def _env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env", [])}


def test_the_indexed_job_runs_one_shard_per_completion_index() -> None:
    job = _objects()[("Job", "poisson-shards")]
    spec = job["spec"]
    (runner,) = spec["template"]["spec"]["containers"]
    assert spec["completionMode"] == "Indexed"
    assert spec["completions"] == spec["parallelism"] == int(_env(runner)["SHARDS"])
    command = " ".join(runner["args"])
    assert '--shard "${JOB_COMPLETION_INDEX}/${SHARDS}"' in command
    assert '--resume "$folder"' in command  # a restarted pod resumes its folder
    rules = {r["action"]: r for r in spec["podFailurePolicy"]["rules"]}
    assert rules["FailIndex"]["onExitCodes"]["values"] == [1, 3]  # an alarm, a limit: no retry
    assert rules["FailJob"]["onExitCodes"]["values"] == [2]  # bad input: stop the Job
    assert spec["template"]["spec"]["restartPolicy"] == "Never"


def test_the_vllm_service_answers_the_preregistrations_base_url() -> None:
    objects = _objects()
    service, deployment = objects[("Service", "vllm")], objects[("Deployment", "vllm")]
    url = urlsplit(yaml.safe_load(QWEN.read_text(encoding="utf-8"))["model"]["base_url"])
    assert (url.hostname, url.port) == (service["metadata"]["name"], 8000)
    assert service["spec"]["ports"][0]["port"] == url.port
    pod = deployment["spec"]["template"]
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    (server,) = pod["spec"]["containers"]
    assert server["resources"]["limits"]["nvidia.com/gpu"] == 1  # one replica per GPU
    assert server["ports"][0]["containerPort"] == 8000


def test_every_job_mounts_the_one_claim() -> None:
    objects = _objects()
    claim = objects[("PersistentVolumeClaim", "poisson-runs")]
    assert "ReadWriteMany" in claim["spec"]["accessModes"]
    for name in ("poisson-shards", "poisson-merge"):
        volumes = objects[("Job", name)]["spec"]["template"]["spec"]["volumes"]
        claims = [
            v["persistentVolumeClaim"]["claimName"] for v in volumes if "persistentVolumeClaim" in v
        ]
        assert claims == ["poisson-runs"]


def _pod_command(job: dict[str, Any], root: Path) -> str:
    """A Job's shell command with its mount points moved under `root`."""
    (container,) = job["spec"]["template"]["spec"]["containers"]
    return (
        " ".join(container["args"])
        .replace("/runs", str(root / "runs"))
        .replace("/prereg", str(root / "prereg"))
    )


def test_the_pods_commands_cut_resume_and_merge(tmp_path: Path) -> None:
    # The Job's own command strings, run by sh with the real CLI: four indices of the smoke design
    # (in-process reference endpoint), one of them run twice (a restarted pod), then the merge Job.
    objects = _objects()
    (tmp_path / "prereg").mkdir()
    (tmp_path / "runs").mkdir()
    shutil.copy(ROOT / "preregistrations" / "smoke.yaml", tmp_path / "prereg" / "smoke.yaml")
    bin_dir = Path(sys.executable).parent
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "SHARDS": "4",
        "PREREG": "smoke.yaml",
    }
    shards = _pod_command(objects[("Job", "poisson-shards")], tmp_path)
    pods = [
        subprocess.Popen(
            ["sh", "-c", shards],
            env={**env, "JOB_COMPLETION_INDEX": str(i)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(4)
    ]
    for pod in pods:
        _, err = pod.communicate(timeout=240)
        assert pod.returncode == 0, err
    again = subprocess.run(
        ["sh", "-c", shards],
        env={**env, "JOB_COMPLETION_INDEX": "2"},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert again.returncode == 0 and "(shard 2/4) is complete already" in again.stderr
    merge = subprocess.run(
        ["sh", "-c", _pod_command(objects[("Job", "poisson-merge")], tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert merge.returncode == 0, merge.stderr
    assert "merged 4 shards" in merge.stdout
    header = read_header(tmp_path / "runs" / "merged")
    # one session per shard: the restarted pod found its shard complete and opened none
    assert header.merged is not None and len(header.sessions) == 4
    assert (tmp_path / "runs" / "card" / "card.md").is_file()
    assert card_from_run(tmp_path / "runs" / "merged").kind == "reference-policy"


def test_the_slurm_array_is_indexed_from_zero_and_parses() -> None:
    script = (SLURM / "shards.sbatch").read_text(encoding="utf-8")
    assert "#SBATCH --array=0-" in script
    assert '--shard "$index/$count"' in script
    assert 'index="$SLURM_ARRAY_TASK_ID"' in script and 'count="$SLURM_ARRAY_TASK_COUNT"' in script
    assert '--resume "$folder"' in script
    merge = (SLURM / "merge.sbatch").read_text(encoding="utf-8")
    assert 'shards=("$RUNS"/shard-*)' in merge
    assert 'poisson-tasks merge "${shards[@]}" --out "$RUNS/merged"' in merge
    for path in (SLURM / "shards.sbatch", SLURM / "merge.sbatch"):
        subprocess.run(["bash", "-n", str(path)], check=True)


def test_the_committed_compose_file_is_the_generators_output() -> None:
    spec = importlib.util.spec_from_file_location(
        "compose_shards", ROOT / "docker" / "compose_shards.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    committed = (ROOT / "docker" / "compose.shards.yaml").read_text(encoding="utf-8")
    assert committed == module.compose(4)
    services = yaml.safe_load(committed.replace("!override", ""))["services"]
    assert [s for s in services if s.startswith("shard-")] == [f"shard-{i}" for i in range(4)]
    for i in range(4):
        command = services[f"shard-{i}"]["command"][0]
        assert f"--shard {i}/4" in command and f"--resume /out/shard-{i}" in command
        assert services[f"vllm-{i}"]["networks"][f"shard-{i}"]["aliases"] == ["vllm"]
        assert services[f"vllm-{i}"]["deploy"]["resources"]["reservations"]["devices"][0][
            "device_ids"
        ] == [str(i)]
    assert set(services["merge"]["depends_on"]) == {f"shard-{i}" for i in range(4)}
