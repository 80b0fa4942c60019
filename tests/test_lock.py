"""uv.lock: what it may contain, and that it still matches pyproject.toml."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYPI = "https://pypi.org/simple"
FILES = "https://files.pythonhosted.org/"


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _lock() -> dict[str, object]:
    return tomllib.loads((ROOT / "uv.lock").read_text(encoding="utf-8"))


def _packages() -> list[dict[str, object]]:
    packages = _lock()["package"]
    assert isinstance(packages, list)
    return packages


def test_every_locked_package_comes_from_the_canonical_index() -> None:
    for pkg in _packages():
        source = pkg["source"]
        assert isinstance(source, dict)
        if pkg["name"] == "poisson-tasks":
            assert source == {"editable": "."}, source
            continue
        assert source == {"registry": PYPI}, (
            f"{pkg['name']}: {source} (local index or path in uv.lock)"
        )


def test_no_machine_local_url_or_path_anywhere_in_the_lock() -> None:
    text = (ROOT / "uv.lock").read_text(encoding="utf-8")
    for bad in (
        "file://",
        "/opt/",
        "/tmp/",
        "/home/",
        "/root/",
        "/work/",
        "path = ",
        "directory = ",
    ):
        assert bad not in text, f"uv.lock contains {bad!r}: lock against PyPI only"
    for pkg in _packages():
        for key in ("sdist",):
            if key in pkg:
                assert str(pkg[key]["url"]).startswith(FILES), pkg[key]  # type: ignore[index]
        for wheel in pkg.get("wheels", []):  # type: ignore[attr-defined]
            assert str(wheel["url"]).startswith(FILES), wheel
            assert str(wheel["hash"]).startswith("sha256:"), wheel


def test_lock_is_restricted_to_linux_x86_64_and_matches_pyproject() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    envs = project["tool"]["uv"]["environments"]
    assert envs == ["sys_platform == 'linux' and platform_machine == 'x86_64'"]
    lock = _lock()
    markers = lock["supported-markers"]
    assert isinstance(markers, list) and markers
    assert all(
        "sys_platform == 'linux'" in m and "platform_machine == 'x86_64'" in m for m in markers
    )
    (me,) = [p for p in _packages() if p["name"] == "poisson-tasks"]
    locked = {str(d["name"]) for d in me["metadata"]["requires-dist"]}  # type: ignore[index]
    declared = set(project["project"]["dependencies"])
    for extra in project["project"]["optional-dependencies"].values():
        declared |= set(extra)
    names = {_canonical(str(re.match(r"[A-Za-z0-9._-]+", d).group(0))) for d in declared}  # type: ignore[union-attr]
    assert names == {_canonical(n) for n in locked}, (
        "pyproject.toml and uv.lock disagree: run `uv lock`"
    )
