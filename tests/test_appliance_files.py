"""The appliance's files: flake.lock covers flake.nix's inputs, the notebook's cells compile, and
the serving-flags check refuses a compose file that serves other flags than it records."""

from __future__ import annotations

import copy
import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "calibration_model_b.ipynb"


def _checker() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "check_appliance", ROOT / "scripts" / "ci" / "check_appliance.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_flake_lock_pins_every_input_flake_nix_declares() -> None:
    nix = (ROOT / "flake.nix").read_text(encoding="utf-8")
    block = nix[nix.index("inputs = {") : nix.index("outputs =")]
    declared = set(re.findall(r"^    ([\w-]+)(?:\.url)? = ", block, re.M))
    lock = json.loads((ROOT / "flake.lock").read_text(encoding="utf-8"))
    nodes = lock["nodes"]
    assert (
        set(nodes[lock["root"]]["inputs"])
        == declared
        == {
            "nixpkgs",
            "pyproject-nix",
            "uv2nix",
            "pyproject-build-systems",
        }
    )
    for name in declared:
        locked = nodes[name]["locked"]
        assert re.fullmatch(r"[0-9a-f]{40}", locked["rev"]), name
        assert re.fullmatch(r"sha256-[A-Za-z0-9+/]{43}=", locked["narHash"]), name


def test_notebook_is_nbformat_4_and_every_code_cell_compiles() -> None:
    nb = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    assert (nb["nbformat"], nb["nbformat_minor"]) >= (4, 5)
    ids = [c["id"] for c in nb["cells"]]
    assert len(set(ids)) == len(ids)
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert len(code) >= 5
    for i, cell in enumerate(code):
        assert cell["outputs"] == [] and cell["execution_count"] is None, "commit it unexecuted"
        compile("".join(cell["source"]), f"{NOTEBOOK.name}[{i}]", "exec")


def test_notebook_reads_model_revision_and_flags_from_the_vllm_image() -> None:
    nb = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    cell = next("".join(c["source"]) for c in nb["cells"] if "SERVE_FLAGS" in "".join(c["source"]))
    scope: dict[str, Any] = {"SRC": ROOT}
    exec(cell.split('os.environ["HF_HOME"]')[0], scope)
    checker = _checker()
    env = checker._env((ROOT / "docker" / "vllm.Containerfile").read_text(encoding="utf-8"))
    assert scope["REVISION"] == env["MODEL_REVISION"]
    assert scope["FLAGS"][:3] == ["--enable-auto-tool-choice", "--tool-call-parser", "hermes"]
    assert scope["flags_line"] == env["SERVE_FLAGS"]


def _compose() -> dict[str, Any]:
    """The compose binary's normalised view of docker/compose.yaml, for the parts checked."""
    facts = {"type": "volume", "source": "facts", "target": "/facts"}
    return {
        "services": {
            "vllm": {
                "image": "localhost/poisson-tasks-vllm:vllm-0.29.0",
                "environment": None,
                "volumes": [facts],
                "command": None,
            },
            "runner": {
                "environment": {"POISSON_SERVING_SIDECAR": "/facts/serving-facts.json"},
                "volumes": [{**facts, "read_only": True}],
                "depends_on": {"vllm": {"condition": "service_healthy"}},
            },
        }
    }


def test_the_serving_flags_check_passes_and_can_fail() -> None:
    checker = _checker()
    assert checker.main(json.dumps(_compose())) == []
    other = copy.deepcopy(_compose())
    other["services"]["vllm"]["command"] = ["--tool-call-parser", "llama3_json"]
    assert any("must not replace" in p for p in checker.main(json.dumps(other)))
    lost = copy.deepcopy(_compose())
    lost["services"]["runner"]["environment"] = {}
    assert any("POISSON_SERVING_SIDECAR" in p for p in checker.main(json.dumps(lost)))


def test_the_serving_image_check_refuses_what_issue_20_fixed() -> None:
    """The checks of the image's Python layer, its flags and its version can each fail."""
    checker = _checker()
    text = (ROOT / "docker" / "vllm.Containerfile").read_text(encoding="utf-8")
    assert checker._install(text) == []
    assert any(
        "before it is created" in p for p in checker._install(text.replace("mkdir -p /models", ""))
    )
    assert any(
        "--require-hashes" in p for p in checker._install(text.replace("--require-hashes", ""))
    )
    assert any("--extra serve" in p for p in checker._install(text.replace("--extra serve", "")))
    gpu = text.replace('python -c "import vllm;', 'vllm --version; python -c "import vllm;')
    assert any("infers the GPU" in p for p in checker._install(gpu))
    flags = checker._env(text)["SERVE_FLAGS"]
    assert checker._spec_flags(checker.shlex.split(flags)) == []
    longer = flags.replace("--max-model-len 16384", "--max-model-len 32768")
    assert any("16384" in p for p in checker._spec_flags(checker.shlex.split(longer)))
    thinking = flags.replace('"enable_thinking":false', '"enable_thinking":true')
    assert any("thinking" in p for p in checker._spec_flags(checker.shlex.split(thinking)))
    compose = json.loads(json.dumps(_compose()))
    assert checker._serving_declared(text, "0.29.0", compose) == []
    old = checker._serving_declared(text, "0.14.0", compose)
    assert any("uv.lock locks vllm 0.29.0" in p for p in old)
    assert any("notebook" in p for p in old) and any("compose.yaml" in p for p in old)


def test_the_batch_invariant_mode_is_declared_off_recorded_and_checked() -> None:
    """vLLM's batch-invariant mode: off in the image, on only in the variant, recorded as the
    last serving flag either way; each check can fail."""
    checker = _checker()
    text = (ROOT / "docker" / "vllm.Containerfile").read_text(encoding="utf-8")
    env = checker._env(text)
    assert env["VLLM_BATCH_INVARIANT"] == "0"
    served = checker.shlex.split(env["SERVE_FLAGS"])
    facts_env = {
        **env,
        "VLLM_VERSION": "dry-run",
        "PATH": "/nonexistent",
        "SERVE_LOCK": str(ROOT / "uv.lock"),
    }
    server = _compose()["services"]["vllm"]
    assert checker._batch_invariant(env, server, facts_env, served) == []
    on = checker._facts({**facts_env, "VLLM_BATCH_INVARIANT": "1"})
    assert on["flags"][-1] == "VLLM_BATCH_INVARIANT=1" and on["batch_invariant"] is True
    on_by_default = {**env, "VLLM_BATCH_INVARIANT": "1"}
    assert any(
        "off by default" in p
        for p in checker._batch_invariant(on_by_default, server, facts_env, served)
    )
    set_in_compose = {**server, "environment": {"VLLM_BATCH_INVARIANT": "1"}}
    assert any(
        "the variant file turns it on" in p
        for p in checker._batch_invariant(env, set_in_compose, facts_env, served)
    )
