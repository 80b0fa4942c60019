"""Print the serving-facts JSON the runner's provenance reads (POISSON_SERVING_SIDECAR).

Reads MODEL, MODEL_REVISION, SERVE_FLAGS and VLLM_BATCH_INVARIANT (vLLM's batch-invariant mode, a
declared setting: recorded as the last serving flag, `VLLM_BATCH_INVARIANT=0` or `=1`, so pin N10
compares it and the card prints it) from the environment, vLLM's version from the
installed distribution (or VLLM_VERSION, for a dry run), the sha256 of the lock the server's
packages were installed from (SERVE_LOCK, set by docker/vllm.Containerfile and the notebook), and
the GPU from nvidia-smi when present.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
from importlib import metadata


def _vllm_version() -> str | None:
    if os.environ.get("VLLM_VERSION"):
        return os.environ["VLLM_VERSION"]
    try:
        return metadata.version("vllm")  # only inside the serving environment
    except metadata.PackageNotFoundError:
        return None


def _packages_lock() -> str | None:
    """`uv.lock:<sha256>` of the lock the server's packages came from, when SERVE_LOCK names it."""
    path = os.environ.get("SERVE_LOCK")
    if not path:
        return None
    with open(path, "rb") as f:
        return "uv.lock:" + hashlib.sha256(f.read()).hexdigest()


def _gpu() -> dict[str, str] | None:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    out = subprocess.run(
        [smi, "--query-gpu=name,driver_version", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    if not out:
        return None
    name, _, driver = out.splitlines()[0].partition(",")
    return {"name": name.strip(), "driver": driver.strip()}


BATCH_INVARIANT = "VLLM_BATCH_INVARIANT"


def batch_invariant() -> str:
    """The batch-invariant mode as vLLM is started with it: "1" on, "0" off (unset is off)."""
    value = os.environ.get(BATCH_INVARIANT, "0").strip() or "0"
    if value not in ("0", "1"):
        raise SystemExit(f"{BATCH_INVARIANT}={value!r}: declare 0 (off) or 1 (on)")
    return value


def main() -> None:
    mode = batch_invariant()
    facts = {
        "stack": "vllm",
        "stack_version": _vllm_version(),
        "model": os.environ["MODEL"],
        "weights_revision": os.environ["MODEL_REVISION"],
        "flags": [*shlex.split(os.environ["SERVE_FLAGS"]), f"{BATCH_INVARIANT}={mode}"],
        "batch_invariant": mode == "1",
        "packages_lock": _packages_lock(),
        "gpu": _gpu(),
    }
    print(json.dumps(facts, indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
