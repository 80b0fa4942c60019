"""The pre-registration reader refuses, in one line each, what it cannot read or bound."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from poisson_tasks.errors import PreregistrationError
from poisson_tasks.prereg import MAX_FILE_BYTES, load_preregistration

SMOKE = Path(__file__).resolve().parents[1] / "preregistrations" / "smoke.yaml"
TEXT = SMOKE.read_text(encoding="utf-8")
DOC: dict[str, Any] = yaml.safe_load(TEXT)


def _set(path: str, value: Any) -> bytes:
    doc = copy.deepcopy(DOC)
    *head, last = path.split(".")
    node = doc
    for key in head:
        node = node.setdefault(key, {})
    node[last] = value
    return yaml.safe_dump(doc, sort_keys=False).encode()


CASES: list[tuple[str, bytes, str]] = [
    ("latin-1", TEXT.replace("name:", "name: caf\xe9 #", 1).encode("latin-1"), "not UTF-8 text"),
    ("binary", bytes(range(256)) * 4, "not UTF-8 text"),
    ("too large", b"#" * (MAX_FILE_BYTES + 1), "larger than 1,048,576 bytes"),
    ("alias", b"a: &x [1, 2]\nb: *x\n", "an alias (*x) is refused"),
    ("alias bomb", b"a: &a [lol, lol]\nb: &b [*a, *a]\nc: [*b, *b]\n", "alias"),
    ("duplicate key", (TEXT + "\nname: again\n").encode(), "duplicate key 'name'"),
    ("deep nesting", b"a: " + b"[" * 3000 + b"]" * 3000, "nested"),
    ("4,301 digits", TEXT.replace("tasks:", "tasks: " + "9" * 5000 + " #", 1).encode(), "digits"),
    ("tasks 1e9", _set("design.tasks", 10**9), "design.tasks: 1,000,000,000 is above the limit"),
    ("attempts 1e12", _set("design.attempts", 10**12), "design.attempts"),
    ("integer 2^64", _set("design.tasks", 2**64), "too wide"),
    ("NaN wall clock", _set("budget.wall_clock_s", float("nan")), "not a finite number"),
    ("infinite rate", _set("decoding.temperature", float("inf")), "not a finite number"),
    ("resolution 1e-300", _set("thresholds.resolution", 1e-300), "finest resolution"),
    ("concurrency", _set("execution.concurrency", 10**6), "execution.concurrency"),
    ("seed out of range", _set("design.seeds", [2**40]), "outside 0 to 2147483647"),
    ("unbuildable arm", _set("design.arms", ["history:t50"]), "nearest t0 or t100"),
    ("extra_body 2^70", _set("decoding.extra_body", {"x": 2**70}), "too wide"),
]


@pytest.mark.parametrize(("name", "data", "fragment"), CASES, ids=[c[0] for c in CASES])
def test_bad_files_are_one_line(tmp_path: Path, name: str, data: bytes, fragment: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_bytes(data)
    with pytest.raises(PreregistrationError) as info:
        load_preregistration(path)
    assert any(fragment in p for p in info.value.problems), info.value.problems
    assert all("\n" not in p and len(p) < 400 for p in info.value.problems)


def test_a_directory_is_named(tmp_path: Path) -> None:
    with pytest.raises(PreregistrationError, match="is a directory"):
        load_preregistration(tmp_path)


def test_the_shipped_file_still_loads() -> None:
    assert load_preregistration(SMOKE).episodes > 0
