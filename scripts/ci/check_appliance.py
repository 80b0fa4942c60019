"""Static checks of the appliance files (issue 12, Must show 1), with one line per failure.

    python scripts/ci/check_appliance.py COMPOSE_CONFIG_JSON

COMPOSE_CONFIG_JSON is `compose -f docker/compose.yaml config --format json` (the compose
binary's normalised view of the file). Checks: the vLLM image pins its base by version and digest
and the model by a 40-hex revision; the runner's BASE is pinned by digest; compose does not
override the serving flags, and the flags the serving-facts file records (what the runner's
provenance reads) are exactly the flags the server is started with; the runner reads the facts
file from the volume the server writes it to.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
DIGEST = r"@sha256:[0-9a-f]{64}"


def _arg(text: str, name: str) -> str:
    m = re.search(rf"^ARG {name}=(\S+)$", text, re.M)
    if not m:
        raise SystemExit(f"FAIL: no `ARG {name}=...` default")
    return m.group(1)


def _env(text: str) -> dict[str, str]:
    """ENV key=value pairs of a Containerfile (continuation lines joined, quotes removed,
    ${ARG} replaced by the ARG's default)."""
    args = dict(re.findall(r"^ARG (\w+)=(\S+)$", text, re.M))
    joined = text.replace("\\\n", " ")
    out: dict[str, str] = {}
    for line in joined.splitlines():
        if line.startswith("ENV "):
            for item in shlex.split(line[4:]):
                key, _, value = item.partition("=")
                out[key] = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), ""), value)
    return out


def main(compose_json: str) -> list[str]:
    problems: list[str] = []
    vllm = (DOCKER / "vllm.Containerfile").read_text(encoding="utf-8")
    runner = (DOCKER / "runner.Containerfile").read_text(encoding="utf-8")

    image = _arg(vllm, "VLLM_IMAGE")
    if not re.fullmatch(rf"[\w./-]*vllm/vllm-openai:v\d+\.\d+\.\d+{DIGEST}", image):
        problems.append(
            f"vllm.Containerfile: VLLM_IMAGE {image} is not pinned by version and digest"
        )
    if not re.search(r"^FROM \$\{VLLM_IMAGE\}$", vllm, re.M):
        problems.append("vllm.Containerfile: FROM must use ${VLLM_IMAGE}")
    revision = _arg(vllm, "MODEL_REVISION")
    if not re.fullmatch(r"[0-9a-f]{40}", revision):
        problems.append(f"vllm.Containerfile: MODEL_REVISION {revision} is not 40 hex digits")
    base = _arg(runner, "BASE")
    if not re.fullmatch(rf"[\w./-]*python:3\.\d+-slim[\w.-]*{DIGEST}", base):
        problems.append(f"runner.Containerfile: BASE {base} is not a slim Python image by digest")

    env = _env(vllm)
    if env.get("HF_HUB_OFFLINE") != "1":
        problems.append("vllm.Containerfile: the server must run with HF_HUB_OFFLINE=1")
    declared = shlex.split(env.get("SERVE_FLAGS", ""))
    for flag in ("--enable-auto-tool-choice", "--tool-call-parser"):
        if flag not in declared:
            problems.append(f"vllm.Containerfile: SERVE_FLAGS lacks {flag}")
    if len(re.findall(r"--tool-call-parser|--enable-auto-tool-choice", vllm)) != 2:
        problems.append("vllm.Containerfile: the tool-calling flags must be declared once")

    services: dict[str, Any] = json.loads(compose_json)["services"]
    server, run = services["vllm"], services["runner"]
    override = (server.get("environment") or {}).get("SERVE_FLAGS")
    if server.get("command") or server.get("entrypoint"):
        problems.append("compose.yaml: the vllm service must not replace the image's command")
    served = shlex.split(override) if override is not None else declared

    facts_env = {**os.environ, **env, "VLLM_VERSION": "dry-run", "PATH": "/nonexistent"}
    if override is not None:
        facts_env["SERVE_FLAGS"] = override
    facts = json.loads(
        subprocess.run(
            [sys.executable, str(DOCKER / "serving_facts.py")],
            env=facts_env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    if facts["flags"] != served:
        problems.append(f"serving flags differ: served {served}, recorded {facts['flags']}")
    if facts["weights_revision"] != revision:
        problems.append("the serving-facts file does not record MODEL_REVISION")

    sidecar = (run.get("environment") or {}).get("POISSON_SERVING_SIDECAR", "")
    facts_path = env.get("SERVING_FACTS", "")
    if not sidecar or Path(sidecar) != Path(facts_path):
        problems.append(
            f"compose.yaml: runner POISSON_SERVING_SIDECAR {sidecar!r} is not the server's "
            f"SERVING_FACTS {facts_path!r}"
        )
    mounts = {
        (v.get("source"), v.get("target")) for s in (server, run) for v in s.get("volumes", [])
    }
    if not any(t == str(Path(facts_path).parent) for _, t in mounts):
        problems.append("compose.yaml: no volume carries the serving-facts file to the runner")
    if run.get("depends_on", {}).get("vllm", {}).get("condition") != "service_healthy":
        problems.append("compose.yaml: the runner must wait for the server to be healthy")
    return problems


if __name__ == "__main__":
    found = main(Path(sys.argv[1]).read_text(encoding="utf-8"))
    for p in found:
        print("FAIL:", p)
    if found:
        sys.exit(1)
    print("appliance files: pinned base images, 40-hex model revision, one set of serving flags")
