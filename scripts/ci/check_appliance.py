"""Static checks of the appliance files (issue 12, Must show 1), with one line per failure.

    python scripts/ci/check_appliance.py COMPOSE_CONFIG_JSON

COMPOSE_CONFIG_JSON is `compose -f docker/compose.yaml config --format json` (the compose
binary's normalised view of the file). Checks: the vLLM image pins its base by version and digest
(the x86_64 manifest, as uv.lock is linux x86_64 only) and the model by a 40-hex revision; the
vLLM version is the one uv.lock's serve extra locks, and the compose image tag, the notebook and
the pre-registration name the same; the image installs the server's packages from uv.lock (`uv
export --extra serve`, hashes required, uv pinned by sha256) and creates /models before writing
into it; the serving flags are the spec's (FP8, 16,384 context, hermes, thinking off); the
runner's BASE is pinned by digest; compose does not override the serving flags, and the flags the
serving-facts file records (what the runner's provenance reads) are exactly the flags the server
is started with, with the lock's sha256; the runner reads the facts file from the volume the
server writes it to. vLLM's batch-invariant mode is a declared setting: the image declares
VLLM_BATCH_INVARIANT=0 (off), compose.yaml leaves it so, the variant
compose.batch-invariant.yaml sets it to 1 and nothing else, the notebook declares it, and the
serving-facts file records it as the last serving flag in each case.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
DIGEST = r"@sha256:[0-9a-f]{64}"
NOTEBOOK = ROOT / "notebooks" / "calibration_model_b.ipynb"
BATCH_VARIANT = DOCKER / "compose.batch-invariant.yaml"
BATCH_INVARIANT = "VLLM_BATCH_INVARIANT"
PREREG = ROOT / "preregistrations" / "published-qwen3-8b-vllm.yaml"
# The spec's Qwen3-8B serving (reading-a-card.md): FP8 weights, a 16,384-token context, the hermes
# tool parser, thinking off; the flag and value that declare each.
SPEC_SERVING = {
    "--quantization": "fp8",
    "--max-model-len": "16384",
    "--tool-call-parser": "hermes",
}


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


def _locked_vllm() -> str | None:
    """The vllm version uv.lock locks (the serve extra's), or None."""
    lock = tomllib.loads((ROOT / "uv.lock").read_text(encoding="utf-8"))
    versions = {str(p["version"]) for p in lock.get("package", []) if p.get("name") == "vllm"}
    return versions.pop() if len(versions) == 1 else None


def _serving_declared(vllm: str, version: str, compose: dict[str, Any]) -> list[str]:
    """vLLM's version and the spec's serving, the same wherever the serving is declared."""
    problems = []
    locked = _locked_vllm()
    if locked != version:
        problems.append(f"uv.lock locks vllm {locked}, the image's base is v{version}")
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    serve = pyproject["project"]["optional-dependencies"].get("serve", [])
    if not any(re.match(rf"vllm=={re.escape(version)}\s*;", r) for r in serve):
        problems.append(f"pyproject.toml: the serve extra does not pin vllm=={version}")
    tag = str(compose["services"]["vllm"].get("image", ""))
    if not tag.endswith(f":vllm-{version}"):
        problems.append(
            f"compose.yaml: the vllm service's image {tag!r} is not tagged vllm-{version}"
        )
    notebook = "".join(
        "".join(c["source"]) for c in json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    )
    if f'assert VLLM == "{version}"' not in notebook or '"--extra", "serve"' not in notebook:
        problems.append(f"notebook: does not install vllm {version} from uv.lock's serve extra")
    if f"vLLM {version}" not in PREREG.read_text(encoding="utf-8"):
        problems.append(f"{PREREG.name}: does not name vLLM {version}")
    return problems


def _install(vllm: str) -> list[str]:
    """The image's Python layer: uv.lock's serve extra, by hash, and /models made before use."""
    problems = []
    if not re.search(r"^FROM \$\{VLLM_IMAGE\} AS packages$", vllm, re.M):
        problems.append(
            "vllm.Containerfile: the first stage must be `FROM ${VLLM_IMAGE} AS packages`"
        )
    if not re.search(r"^FROM packages$", vllm, re.M):
        problems.append("vllm.Containerfile: the serving stage must build FROM packages")
    joined = vllm.replace("\\\n", " ")
    export = re.search(r"uv export [^&]*--locked[^&]*--extra serve[^&]*-o (\S+)", joined)
    installs = re.findall(r"pip install [^&]*--require-hashes[^&]*-r (\S+)", joined)
    if not export or export.group(1) not in installs:
        problems.append(
            "vllm.Containerfile: the server's packages must be installed --require-hashes from "
            "`uv export --locked --extra serve`"
        )
    if not re.fullmatch(r"[0-9a-f]{64}", _arg(vllm, "UV_SHA256")):
        problems.append("vllm.Containerfile: UV_SHA256 is not a sha256")
    if re.search(r"^RUN .*\bvllm --version", joined, re.M):
        problems.append(
            "vllm.Containerfile: `vllm --version` fails in a build (it infers the GPU first); "
            "import vllm instead"
        )
    made = joined.find("mkdir -p /models")
    written = joined.find("> /models/")
    if written >= 0 and not 0 <= made < written:
        problems.append("vllm.Containerfile: /models is written before it is created")
    return problems


def _spec_flags(declared: list[str]) -> list[str]:
    problems = []
    for flag, value in SPEC_SERVING.items():
        at = [i for i, f in enumerate(declared) if f == flag]
        if len(at) != 1 or at[0] + 1 >= len(declared) or declared[at[0] + 1] != value:
            problems.append(
                f"vllm.Containerfile: SERVE_FLAGS must serve {flag} {value} (the spec's)"
            )
    kwargs = (
        declared.index("--default-chat-template-kwargs")
        if "--default-chat-template-kwargs" in declared
        else -1
    )
    try:
        thinking = json.loads(declared[kwargs + 1]).get("enable_thinking") if kwargs >= 0 else None
    except (IndexError, ValueError):
        thinking = None
    if thinking is not False:
        problems.append(
            "vllm.Containerfile: SERVE_FLAGS must turn thinking off (enable_thinking false)"
        )
    return problems


def _prereg(model: str, revision: str) -> list[str]:
    doc = yaml.safe_load(PREREG.read_text(encoding="utf-8"))
    problems = []
    if (doc["model"]["model"], doc["model"]["revision"]) != (model, revision):
        problems.append(f"{PREREG.name}: model and revision differ from the image's")
    kwargs = (doc["decoding"].get("extra_body") or {}).get("chat_template_kwargs") or {}
    if kwargs.get("enable_thinking") is not False:
        problems.append(f"{PREREG.name}: must send chat_template_kwargs enable_thinking: false")
    return problems


def _facts(env: dict[str, str]) -> dict[str, Any]:
    """What docker/serving_facts.py records under `env` (a dry run: no vLLM, no GPU)."""
    done = subprocess.run(
        [sys.executable, str(DOCKER / "serving_facts.py")],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    facts: dict[str, Any] = json.loads(done.stdout)
    return facts


def _batch_invariant(
    env: dict[str, str], server: dict[str, Any], facts_env: dict[str, str], served: list[str]
) -> list[str]:
    """The batch-invariant mode: declared off in the image, left off by compose.yaml, turned on
    by the variant alone, declared in the notebook, and recorded as a serving flag each way."""
    problems = []
    if env.get(BATCH_INVARIANT) != "0":
        problems.append(f"vllm.Containerfile: must declare {BATCH_INVARIANT}=0 (off by default)")
    if BATCH_INVARIANT in (server.get("environment") or {}):
        problems.append(f"compose.yaml: {BATCH_INVARIANT} is set; the variant file turns it on")
    variant = yaml.safe_load(BATCH_VARIANT.read_text(encoding="utf-8"))
    if variant != {"services": {"vllm": {"environment": {BATCH_INVARIANT: "1"}}}}:
        problems.append(
            f'{BATCH_VARIANT.name}: must set only services.vllm.environment.{BATCH_INVARIANT}: "1"'
        )
    notebook = "".join(
        "".join(c["source"]) for c in json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    )
    if "BATCH_INVARIANT = False" not in notebook or f'"{BATCH_INVARIANT}": ' not in notebook:
        problems.append(f"notebook: does not declare {BATCH_INVARIANT} (off by default)")
    for mode in ("0", "1"):
        recorded = _facts({**facts_env, BATCH_INVARIANT: mode})
        if recorded["flags"] != [*served, f"{BATCH_INVARIANT}={mode}"]:
            problems.append(
                f"{BATCH_INVARIANT}={mode}: the serving-facts file records flags "
                f"{recorded['flags']}, not the served flags and the mode"
            )
        if recorded.get("batch_invariant") is not (mode == "1"):
            problems.append(f"{BATCH_INVARIANT}={mode}: batch_invariant is not recorded")
    return problems


def main(compose_json: str) -> list[str]:
    problems: list[str] = []
    vllm = (DOCKER / "vllm.Containerfile").read_text(encoding="utf-8")
    runner = (DOCKER / "runner.Containerfile").read_text(encoding="utf-8")
    compose: dict[str, Any] = json.loads(compose_json)

    image = _arg(vllm, "VLLM_IMAGE")
    pinned = re.fullmatch(rf"[\w./-]*vllm/vllm-openai:v(\d+\.\d+\.\d+)-x86_64{DIGEST}", image)
    if not pinned:
        problems.append(
            f"vllm.Containerfile: VLLM_IMAGE {image} is not the x86_64 image pinned by version "
            "and digest"
        )
    else:
        problems += _serving_declared(vllm, pinned.group(1), compose)
    problems += _install(vllm)
    revision = _arg(vllm, "MODEL_REVISION")
    if not re.fullmatch(r"[0-9a-f]{40}", revision):
        problems.append(f"vllm.Containerfile: MODEL_REVISION {revision} is not 40 hex digits")
    problems += _prereg(_arg(vllm, "MODEL"), revision)
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
    problems += _spec_flags(declared)

    services: dict[str, Any] = compose["services"]
    server, run = services["vllm"], services["runner"]
    override = (server.get("environment") or {}).get("SERVE_FLAGS")
    if server.get("command") or server.get("entrypoint"):
        problems.append("compose.yaml: the vllm service must not replace the image's command")
    served = shlex.split(override) if override is not None else declared

    lock = ROOT / "uv.lock"
    facts_env = {
        **os.environ,
        **env,
        "VLLM_VERSION": "dry-run",
        "PATH": "/nonexistent",
        "SERVE_LOCK": str(lock),
    }
    if override is not None:
        facts_env["SERVE_FLAGS"] = override
    facts = _facts(facts_env)
    mode = str(facts_env.get(BATCH_INVARIANT, "0"))
    if facts["flags"] != [*served, f"{BATCH_INVARIANT}={mode}"]:
        problems.append(f"serving flags differ: served {served}, recorded {facts['flags']}")
    problems += _batch_invariant(env, server, facts_env, served)
    if facts["weights_revision"] != revision:
        problems.append("the serving-facts file does not record MODEL_REVISION")
    if facts.get("packages_lock") != "uv.lock:" + hashlib.sha256(lock.read_bytes()).hexdigest():
        problems.append("the serving-facts file does not record the sha256 of SERVE_LOCK")
    if not env.get("SERVE_LOCK"):
        problems.append("vllm.Containerfile: SERVE_LOCK must name the lock the packages came from")

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
    print(
        "appliance files: pinned base images, 40-hex model revision, one set of serving flags "
        "(the spec's), vLLM from uv.lock's serve extra at the image's version everywhere, "
        "batch-invariant mode declared (off; on in compose.batch-invariant.yaml) and recorded"
    )
