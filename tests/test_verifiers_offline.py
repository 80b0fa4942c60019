"""The verifiers-null harness from a pip-installed environment, offline: nothing fetched at run time.

pip installs uv.lock's verifiers side (`uv export --extra verifiers`, with hashes) and this
project's wheel into a fresh venv from a local wheelhouse, with no index. A one-task study of four
arms then runs through the verifiers-null harness with no uv on PATH, an empty uv cache, a fresh
HOME and every outbound connection sent to a closed loopback port: every episode must be scored,
and the card must name `uv.lock:` (the environment hash covers the harness's chat program, which
runs on the environment's own interpreter: export/harness.py).

The wheelhouse is built with the network by scripts/ci/verifiers-eval (scripts/ci/wheelhouse.py),
which names it in POISSON_TASKS_WHEELHOUSE; without it the test is skipped. Marker `verifiers`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

pytest.importorskip("verifiers", reason="needs the verifiers extra: pip install '.[verifiers]'")
pytestmark = pytest.mark.verifiers

ROOT = Path(__file__).resolve().parents[1]
WHEELHOUSE = os.environ.get("POISSON_TASKS_WHEELHOUSE")
CLOSED = "http://127.0.0.1:9"  # the discard port: nothing listens, a connection is refused at once
ARMS = ["depth:d1", "depth:d3", "depth:d1+h8", "depth:d2+h5"]


def _offline_env(venv: Path, home: Path) -> dict[str, str]:
    """A clean environment with no index, no uv, an empty uv cache and no way off the machine."""
    env = {
        "PATH": f"{venv / 'bin'}:/usr/bin:/bin",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "UV_OFFLINE": "1",
        "UV_CACHE_DIR": str(home / "uv-cache"),
        "UV_PYTHON_DOWNLOADS": "never",
        "PIP_NO_INDEX": "1",
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
        "POISSON_TASKS_UV_LOCK": str(ROOT / "uv.lock"),
    }
    for name in ("http_proxy", "https_proxy", "all_proxy"):
        env[name] = env[name.upper()] = CLOSED
    return env


def _prereg(path: Path) -> Path:
    doc = {
        "format": "poisson-tasks/preregistration@1",
        "name": "offline-verifiers-null",
        "model": {"provider": "reference", "model": "oracle"},
        "decoding": {
            "temperature": 1.0,
            "top_p": 1.0,
            "reasoning_effort": "low",
            "max_completion_tokens": 2048,
        },
        "design": {
            "arms": ARMS,
            "tasks": 1,
            "attempts": 1,
            "seed_string": "offline",
            "slack": 4,
            "horizon": 8,
            "harness": "verifiers-null",
        },
        "budget": {"tokens": 2_000_000, "wall_clock_s": 900},
        "execution": {"concurrency": 4, "max_retries": 1, "backoff_s": 0.05, "backoff_max_s": 1},
    }
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def _run(argv: list[str], env: dict[str, str], cwd: Path) -> str:
    proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, f"{' '.join(argv[:4])} exited {proc.returncode}:\n{proc.stderr}"
    return proc.stdout


@pytest.mark.skipif(WHEELHOUSE is None, reason="POISSON_TASKS_WHEELHOUSE not set")
def test_a_pip_install_runs_the_null_harness_offline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wheels = Path(str(WHEELHOUSE))
    assert (wheels / "requirements.txt").is_file(), f"no requirements.txt in {wheels}"
    (project,) = sorted(wheels.glob("poisson_tasks-*.whl"))
    venv, home = tmp_path / "venv", tmp_path / "home"
    home.mkdir()
    env = _offline_env(venv, home)
    _run([sys.executable, "-m", "venv", str(venv)], env, tmp_path)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-index"]
    pip += ["--no-compile", "--no-deps", "--only-binary=:all:"]
    locked = [
        "--require-hashes",
        "--find-links",
        str(wheels),
        "-r",
        str(wheels / "requirements.txt"),
    ]
    _run([*pip, *locked], env, tmp_path)
    _run([*pip, str(project)], env, tmp_path)
    assert shutil.which("uv", path=env["PATH"]) is None, "uv is on the test's PATH"
    assert not (venv / "bin" / "uv").exists()

    prereg = _prereg(tmp_path / "offline.yaml")
    run, out = tmp_path / "run", tmp_path / "card"
    poisson = str(venv / "bin" / "poisson-tasks")
    _run(
        [poisson, "card", str(prereg), "--run-dir", str(run), "--out", str(out), "--quiet"],
        env,
        home,
    )

    lines = [json.loads(x) for x in (run / "episodes.jsonl").read_text().splitlines() if x]
    assert sorted(x["arm_id"] for x in lines) == sorted(ARMS)
    outcomes = {x["arm_id"]: (x["outcome"], x.get("error")) for x in lines}
    assert all(o == "passed" for o, _ in outcomes.values()), outcomes
    card = json.loads((out / "card.json").read_text())
    lock_hash = "uv.lock:" + hashlib.sha256((ROOT / "uv.lock").read_bytes()).hexdigest()
    assert lock_hash in json.dumps(card["provenance"]), card["provenance"]
    shown = [x for x in (out / "card.md").read_text().splitlines() if "environment hash" in x]
    assert shown and lock_hash in shown[0], shown
    with capsys.disabled():
        print(f"\noffline study: {len(lines)} episodes, outcomes {sorted(outcomes.items())}")
        print(f"offline card: {shown[0]}")
    # nothing was fetched or installed on the way: no uv appeared, its cache stayed empty
    cache = home / "uv-cache"
    assert not cache.exists() or not any(cache.iterdir()), sorted(cache.iterdir())
    assert not list(home.rglob("uv")), list(home.rglob("uv"))


def test_the_chat_programs_packages_are_declared_and_installed() -> None:
    """Every package the null harness's chat program names is a dependency of the project or of
    its verifiers extra (so uv.lock pins it), and this environment satisfies each one."""
    from packaging.requirements import Requirement
    from verifiers.v1.harnesses.utils.launch import CHAT_PROGRAM_SOURCE

    from poisson_tasks.export.harness import missing_requirements, program_requirements

    needed = program_requirements(CHAT_PROGRAM_SOURCE)
    assert {r.name for r in needed} >= {"openai", "mcp"}, needed
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    declared = {
        Requirement(d).name
        for d in [*project["dependencies"], *project["optional-dependencies"]["verifiers"]]
    }
    assert {r.name for r in needed} <= declared, sorted({r.name for r in needed} - declared)
    assert missing_requirements(needed) == []


def test_an_unmet_requirement_is_named() -> None:
    from packaging.requirements import Requirement

    from poisson_tasks.export.harness import missing_requirements, program_requirements

    source = '# /// script\n# dependencies = ["mcp==0.0.1", "no-such-package-here"]\n# ///\n'
    reqs = program_requirements(source)
    assert [str(r) for r in reqs] == ["mcp==0.0.1", "no-such-package-here"]
    problems = missing_requirements(reqs)
    assert problems[0].startswith("mcp==0.0.1 (installed: ")
    assert problems[1] == "no-such-package-here (not installed)"
    assert missing_requirements([Requirement("mcp>=1")]) == []
