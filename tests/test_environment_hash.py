"""environment_hash names its source: the flake, a checked uv.lock, or "not from a lock"."""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from pathlib import Path

import pytest
from synthetic_runs import header, line, write_run

from poisson_tasks.calibration import card_from_run, render_document
from poisson_tasks.hashes import PROVENANCE_ENV, environment_source, lock_mismatches

LOCK = Path(__file__).resolve().parents[1] / "uv.lock"


def _installed_from(lock_text: str) -> dict[str, str]:
    """An environment made exactly from the lock (one version of each package, no project)."""
    out: dict[str, str] = {}
    for pkg in tomllib.loads(lock_text)["package"]:
        if pkg["name"] != "poisson-tasks":
            out.setdefault(pkg["name"], pkg["version"])
    return out


def _bump_pyyaml(text: str) -> tuple[str, str]:
    m = re.search(r'name = "pyyaml"\nversion = "([^"]+)"', text)
    assert m, "uv.lock has no pyyaml entry"
    new = m.group(1) + ".post9"
    return text.replace(m.group(0), f'name = "pyyaml"\nversion = "{new}"'), new


def test_changing_one_pin_in_uv_lock_changes_the_environment_hash(tmp_path: Path) -> None:
    text = LOCK.read_text(encoding="utf-8")
    a = tmp_path / "a" / "uv.lock"
    b = tmp_path / "b" / "uv.lock"
    a.parent.mkdir()
    b.parent.mkdir()
    a.write_text(text, encoding="utf-8")
    changed, new = _bump_pyyaml(text)
    b.write_text(changed, encoding="utf-8")
    env_a = _installed_from(text)
    env_b = {**env_a, "pyyaml": new}

    first = environment_source(a, env_a)
    second = environment_source(b, env_b)
    assert first.hash == "uv.lock:" + hashlib.sha256(a.read_bytes()).hexdigest()
    assert second.hash.startswith("uv.lock:") and second.hash != first.hash
    assert first.note == "the installed distributions match uv.lock"


def test_an_environment_that_differs_from_the_lock_is_not_from_a_lock(tmp_path: Path) -> None:
    text = LOCK.read_text(encoding="utf-8")
    changed, _ = _bump_pyyaml(text)
    lock = tmp_path / "uv.lock"
    lock.write_text(changed, encoding="utf-8")
    got = environment_source(lock, _installed_from(text))
    assert got.hash.startswith("distributions:")
    assert "pyyaml" in got.note
    extra = {**_installed_from(text), "left-pad": "1.0"}
    assert lock_mismatches(text, extra) == ["left-pad==1.0 is not in uv.lock"]
    missing = {k: v for k, v in _installed_from(text).items() if k != "pydantic"}
    assert lock_mismatches(text, missing) == ["pydantic (locked) is not installed"]
    nolock = environment_source(tmp_path / "absent" / "uv.lock", {"pyyaml": "6.0"})
    assert nolock.hash == "distributions:" + hashlib.sha256(b"pyyaml==6.0\n").hexdigest()


def test_a_card_built_outside_any_lock_says_so(tmp_path: Path) -> None:
    head = header(["depth:d1"], range(4), 1)
    assert head.environment_hash.startswith("distributions:")
    write_run(tmp_path, head, [line("depth:d1", s, 0) for s in range(4)])
    md = render_document(card_from_run(tmp_path, published=[]))
    (row,) = [r for r in md.splitlines() if r.startswith("- environment hash:")]
    assert "not from a lock" in row

    locked = tmp_path / "locked"
    write_run(
        locked,
        head.model_copy(update={"environment_hash": "uv.lock:" + "1" * 64}),
        [line("depth:d1", s, 0) for s in range(4)],
    )
    md = render_document(card_from_run(locked, published=[]))
    (row,) = [r for r in md.splitlines() if r.startswith("- environment hash:")]
    assert "from uv.lock" in row and "not from a lock" not in row


def test_the_flake_provenance_file_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    digest = hashlib.sha256(b"a flake.lock").hexdigest()
    prov = tmp_path / "provenance.json"
    prov.write_text(json.dumps({"flake_lock_sha256": digest, "rev": "dirty"}), encoding="utf-8")
    monkeypatch.setenv(PROVENANCE_ENV, str(prov))
    assert environment_source().hash == "flake:" + digest
    prov.write_text(
        "{}", encoding="utf-8"
    )  # not what the flake writes: fall back to the lock check
    assert not environment_source().hash.startswith("flake:")
