"""The flake's Python resolution, executed offline (issue 20): uv2nix's own code reads uv.lock for
every venv nix/environments.nix declares, and each venv's packages must equal `uv export --locked`
for the same extras.

    python scripts/ci/nix_resolution.py [--inputs DIR] [--root DIR]

DIR for --inputs defaults to ../shared/nix-inputs beside the repository (the unpacked uv2nix,
pyproject.nix and nixpkgs-lib trees); when it is absent the step prints one line and passes.
Steps, each printed: flake.lock's narHash for uv2nix and pyproject-nix equals `nix hash path` of
the tree used; `nix-instantiate --eval --strict` of scripts/ci/nix_resolution.nix resolves the
overlay and every venv; each venv's name==version set equals uv export's (the project itself and,
for the editable dev shell, the build systems an editable install adds, named apart). Exit 1
naming every difference. Needs nix-bin and uv on PATH.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import Any

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
EVALUATOR = Path(__file__).with_name("nix_resolution.nix")
PROJECT = "poisson-tasks"
# flake.lock node -> the repository name its trees are unpacked under in nix-inputs.
INPUTS = {"uv2nix": "uv2nix", "pyproject-nix": "pyproject.nix"}
NIX = ["nix", "--extra-experimental-features", "nix-command"]


class Failure(Exception):
    """One step failed; the message names what differs."""


def find_tree(inputs: Path, repo: str, rev: str) -> Path | None:
    """The unpacked tree of `repo` at `rev`: `repo@<rev[:8]>`, or the folder the inputs README's
    table lists beside the full revision (`repo@head`)."""
    short = inputs / f"{repo}@{rev[:8]}"
    if short.is_dir():
        return short
    readme = inputs / "README.md"
    if readme.is_file():
        for line in readme.read_text(encoding="utf-8").splitlines():
            m = re.match(r"\|\s*`([^`/]+)/?`\s*\|[^|]*\|\s*([0-9a-f]{40})\s*\|", line)
            if m and m.group(2) == rev and m.group(1).startswith(repo + "@"):
                return inputs / m.group(1)
    return None


def nar_hash(path: Path) -> str:
    out = subprocess.run(
        [*NIX, "hash", "path", "--type", "sha256", "--sri", str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def restore_flattened_symlinks(tree: Path) -> list[str]:
    """Turn back into symlinks the files a copy flattened: a small file whose whole content (no
    newline) is a relative path to an existing file beside it. Returns them, `path -> target`.
    Only trusted when the restored tree then hashes to the locked narHash."""
    restored = []
    for path in sorted(tree.rglob("*")):
        if path.is_symlink() or not path.is_file() or path.stat().st_size > 255:
            continue
        target = path.read_bytes()
        if not re.fullmatch(rb"[\w.][\w./-]*", target):
            continue
        text = target.decode()
        if text.startswith("/") or not (path.parent / text).is_file():
            continue
        path.unlink()
        path.symlink_to(text)
        restored.append(f"{path.relative_to(tree).as_posix()} -> {text}")
    return restored


def locked_tree(inputs: Path, node: str, lock: dict[str, Any], scratch: Path) -> Path:
    """The tree of flake.lock's `node`, checked against its narHash; prints the result line."""
    locked = lock["nodes"][node]["locked"]
    rev, want = str(locked["rev"]), str(locked["narHash"])
    tree = find_tree(inputs, INPUTS[node], rev)
    if tree is None:
        raise Failure(
            f"flake.lock pins {node} at {rev}; {inputs} has no tree for that revision "
            f"(move flake.lock only to a revision whose tree is there)"
        )
    got = nar_hash(tree)
    if got == want:
        print(f"narHash {node} {rev[:8]}: flake.lock {want} == nix hash path {tree.name}")
        return tree
    copy = scratch / tree.name
    shutil.copytree(tree, copy, symlinks=True)
    for p in [copy, *copy.rglob("*")]:
        if p.is_dir() and not p.is_symlink():
            p.chmod(0o755)
    restored = restore_flattened_symlinks(copy)
    fixed = nar_hash(copy) if restored else got
    if fixed != want:
        raise Failure(
            f"narHash {node} {rev[:8]}: flake.lock has {want}, nix hash path {tree.name} "
            f"gives {got}"
            + (f" ({fixed} with {len(restored)} symlinks restored)" if restored else "")
        )
    print(
        f"narHash {node} {rev[:8]}: flake.lock {want} == nix hash path {tree.name} with "
        f"{len(restored)} symlink(s) the copy had flattened restored ({', '.join(restored)}); "
        f"the restored tree is the one evaluated"
    )
    return copy


def evaluate(root: Path, nixlib: Path, pyproject_nix: Path, uv2nix: Path) -> dict[str, Any]:
    """uv2nix's resolution (scripts/ci/nix_resolution.nix) as JSON, or the evaluator's error."""
    cmd = ["nix-instantiate", "--eval", "--strict", "--json", str(EVALUATOR)]
    for name, value in (
        ("nixlib", nixlib),
        ("pyprojectNix", pyproject_nix),
        ("uv2nix", uv2nix),
        ("root", root),
    ):
        cmd += ["--argstr", name, str(value.resolve())]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        errors = [ln.strip() for ln in done.stderr.splitlines() if ln.strip().startswith("error")]
        raise Failure(
            "uv2nix could not resolve uv.lock for nix/environments.nix: "
            + (errors[0] if errors else done.stderr.strip()[-500:])
        )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _extras(spec: dict[str, list[str]]) -> list[str]:
    return sorted(spec.get(PROJECT, []))


def uv_export(root: Path, extras: list[str], environ: dict[str, str]) -> set[str]:
    """`uv export --locked` for these extras, as name==version in the marker environment."""
    cmd = ["uv", "export", "--locked", "--quiet", "--format", "requirements-txt", "--no-hashes"]
    cmd += ["--no-header", "--no-annotate", "--no-emit-project"]
    for extra in extras:
        cmd += ["--extra", extra]
    done = subprocess.run(cmd, cwd=root, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise Failure(f"`{' '.join(cmd)}` failed: {done.stderr.strip()[-500:]}")
    pins = set()
    for line in done.stdout.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "-")):
            continue
        req = Requirement(line)
        if req.marker is None or Marker(str(req.marker)).evaluate(dict(environ)):
            (spec,) = req.specifier
            pins.add(f"{canonicalize_name(req.name)}=={spec.version}")
    return pins


def compare(venv: str, extras: list[str], nix: set[str], uv: set[str]) -> str | None:
    """None when equal, else the difference named both ways."""
    if nix == uv:
        return None
    only_nix, only_uv = sorted(nix - uv), sorted(uv - nix)
    flags = " ".join(f"--extra {e}" for e in extras) or "(no extras)"
    return (
        f"venv {venv}: uv2nix's packages differ from uv export --locked {flags}: "
        f"only in uv2nix: {', '.join(only_nix) or 'none'}; only in uv export: "
        f"{', '.join(only_uv) or 'none'}"
    )


def _build_systems(root: Path) -> set[str]:
    pyproject = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    return {
        str(canonicalize_name(Requirement(r).name))
        for r in pyproject.get("build-system", {}).get("requires", [])
    }


def check(root: Path, inputs: Path) -> list[str]:
    """Every step's problems (empty when the flake's resolution equals uv export's)."""
    lock = json.loads((root / "flake.lock").read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory(prefix="nix-resolution-") as tmp:
        trees = {}
        problems = []
        for node in INPUTS:
            try:
                trees[node] = locked_tree(inputs, node, lock, Path(tmp))
            except Failure as exc:
                problems.append(str(exc))
        if problems:
            return problems
        try:
            result = evaluate(root, inputs / "nixpkgs-lib", trees["pyproject-nix"], trees["uv2nix"])
        except Failure as exc:
            return [str(exc)]
    overlay: dict[str, dict[str, Any]] = result["overlay"]
    extras = _extras(result["overlaySpec"])
    not_wheels = sorted(n for n, p in overlay.items() if p["format"] not in ("wheel", "local"))
    print(
        f"overlay (mkPyprojectOverlay, spec {PROJECT}[{','.join(extras)}]): {len(overlay)} "
        f"packages resolved, "
        + (f"{len(not_wheels)} from sdist" if not_wheels else "every one a wheel but the project")
    )
    build_systems = _build_systems(root)
    for venv, members in sorted(result["venvs"].items()):
        spec = result["specs"][venv]
        extras = _extras(spec["spec"])
        names = set(members)
        apart = []
        if PROJECT not in names:
            problems.append(f"venv {venv}: {PROJECT} itself is not in the venv")
        names.discard(PROJECT)
        if spec["editable"]:
            for name in sorted(names & build_systems):
                version = overlay.get(name, {}).get("version")
                apart.append(
                    f"{name}=={version} (uv.lock)"
                    if version
                    else f"{name} (pyproject-build-systems)"
                )
            names -= build_systems
        missing = sorted(n for n in names if n not in overlay)
        if missing:
            problems.append(f"venv {venv}: not from uv.lock: {', '.join(missing)}")
        sdists = sorted(n for n in names if overlay.get(n, {}).get("format") == "pyproject")
        if sdists:
            problems.append(f"venv {venv}: built from sdist, not a wheel: {', '.join(sdists)}")
        nix = {f"{n}=={overlay[n]['version']}" for n in names if n in overlay}
        try:
            uv = uv_export(root, extras, result["environ"])
        except Failure as exc:
            problems.append(str(exc))
            continue
        flags = " ".join(f"--extra {e}" for e in extras) or "(no extras)"
        outputs = ", ".join(spec["outputs"])
        print(
            f"venv {venv} ({outputs}): resolved, {len(nix)} packages + {PROJECT}"
            + (f" + build systems of the editable install: {', '.join(apart)}" if apart else "")
        )
        diff = compare(venv, extras, nix, uv)
        if diff:
            problems.append(diff)
        else:
            print(f"venv {venv}: name==version set equal to uv export --locked {flags} ({len(uv)})")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument("--inputs", type=Path, default=None)
    args = parser.parse_args(argv)
    inputs = args.inputs or Path(
        os.environ.get("NIX_INPUTS", args.root / ".." / "shared" / "nix-inputs")
    )
    if not inputs.is_dir():
        print(
            f"nix resolution: skipped: {inputs} is absent (the unpacked uv2nix/pyproject.nix trees)"
        )
        return 0
    for tool in ("nix", "nix-instantiate", "uv"):
        if shutil.which(tool) is None:
            print(f"FAIL: {tool} is not on PATH (apt-get install nix-bin; uv from PyPI)")
            return 1
    print(
        f"nix resolution: inputs {inputs.resolve()}, {subprocess.run(['nix', '--version'], capture_output=True, text=True, check=True).stdout.strip()}"
    )
    problems = check(args.root.resolve(), inputs)
    for p in problems:
        print("FAIL:", p)
    if problems:
        return 1
    print("nix resolution: every environment the flake builds resolves, equal to uv export")
    return 0


if __name__ == "__main__":
    sys.exit(main())
