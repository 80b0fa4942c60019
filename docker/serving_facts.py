"""Print the serving-facts JSON the runner's provenance reads (POISSON_SERVING_SIDECAR).

Reads MODEL, MODEL_REVISION and SERVE_FLAGS from the environment, vLLM's version from the
installed package (or VLLM_VERSION, for a dry run), and the GPU from nvidia-smi when present.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess


def _vllm_version() -> str | None:
    if os.environ.get("VLLM_VERSION"):
        return os.environ["VLLM_VERSION"]
    try:
        import vllm  # only inside the serving image

        return str(vllm.__version__)
    except ImportError:
        return None


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


def main() -> None:
    facts = {
        "stack": "vllm",
        "stack_version": _vllm_version(),
        "model": os.environ["MODEL"],
        "weights_revision": os.environ["MODEL_REVISION"],
        "flags": shlex.split(os.environ["SERVE_FLAGS"]),
        "gpu": _gpu(),
    }
    print(json.dumps(facts, indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
