"""A pre-registration holds plain JSON values, and its sizes are bounded while it is read.

What is registered is what run.json stores, what the plan is hashed over and what a request
sends, all as JSON; a YAML type JSON has no value for (`!!binary`, `!!set`, ...) is refused in one
line by `validate`, and `run` writes nothing. A list longer than its bound is refused at the first
item over it, before the rest of the file is parsed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import date
from pathlib import Path
from typing import Any

import pytest
import yaml

from poisson_tasks.errors import PreregistrationError
from poisson_tasks.prereg import (
    MAX_ARMS,
    MAX_ITEMS,
    MAX_VALUES,
    YAML_LIMITS,
    load_preregistration,
    validate_preregistration,
)
from poisson_tasks.yamlfile import YamlLimits, YamlRefused, load_json_yaml

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "preregistrations" / "smoke.yaml"
TEXT = SMOKE.read_text(encoding="utf-8")
CLI = [sys.executable, "-m", "poisson_tasks.cli"]


def _with_extra_body(tmp_path: Path, value: str) -> Path:
    """The smoke study with `extra_body: {x: VALUE}`, VALUE written as YAML text."""
    path = tmp_path / "p.yaml"
    body = f"  max_completion_tokens: 2048\n  extra_body:\n    x: {value}\n"
    path.write_text(TEXT.replace("  max_completion_tokens: 2048\n", body, 1), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ("!!binary aGVsbG8=", "!!binary (bytes)"),
        ("!!set {a: null, b: null}", "!!set"),
        ("!!omap [{a: 1}]", "!!omap"),
        ("!!pairs [{a: 1}, {a: 2}]", "!!pairs"),
        ("!!timestamp 2025-01-01", "!!timestamp (a date or time)"),
    ],
)
def test_a_value_json_cannot_hold_is_refused_in_one_line(
    tmp_path: Path, value: str, named: str
) -> None:
    path = _with_extra_body(tmp_path, value)
    with pytest.raises(PreregistrationError) as info:
        load_preregistration(path)
    [problem] = info.value.problems
    assert problem.startswith(f"{path}: decoding.extra_body.x: a {named} value is not a JSON value")
    line = path.read_text(encoding="utf-8").splitlines().index(f"    x: {value}") + 1
    assert f"(line {line}, column 8)" in problem and "\n" not in problem


def test_run_writes_nothing_for_a_value_that_is_not_json(tmp_path: Path) -> None:
    path = _with_extra_body(tmp_path, "!!binary aGVsbG8=")
    out = tmp_path / "run"
    done = subprocess.run(
        [*CLI, "run", str(path), "--out", str(out), "--quiet"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "is not a JSON value" in done.stderr
    assert not out.exists()


def test_an_unquoted_date_is_the_string_it_looks_like(tmp_path: Path) -> None:
    """Registered, stored and sent as one value: the string, never a date object that the
    stored JSON would turn into a string and a request could not send."""
    plan = load_preregistration(_with_extra_body(tmp_path, "2025-01-01"))
    body = plan.preregistration.decoding.extra_body
    assert body == {"x": "2025-01-01"}
    stored = plan.preregistration.model_dump(mode="json")["decoding"]["extra_body"]
    assert json.loads(json.dumps(body)) == stored == body
    # the rates' date still reads as the date the schema declares, and hashes as before
    published = load_preregistration(ROOT / "preregistrations" / "published.yaml")
    assert published.preregistration.model.rates is not None
    assert published.preregistration.model.rates.as_of == date(2025, 8, 7)


@pytest.mark.parametrize(
    ("value", "kind"),
    [(b"hello", "bytes"), ({"a"}, "set"), (date(2025, 1, 1), "date"), (1j, "complex")],
)
def test_a_python_value_json_cannot_hold_is_refused(value: Any, kind: str) -> None:
    doc = yaml.safe_load(TEXT)
    doc["decoding"]["extra_body"] = {"x": value}
    with pytest.raises(PreregistrationError) as info:
        validate_preregistration(doc)
    assert info.value.problems == [
        f"decoding.extra_body.x: a {kind} is not a JSON value; a pre-registration holds plain "
        "JSON values only (strings, numbers, true, false, null, lists and mappings): write it as "
        "a string or a number"
    ]


def test_a_python_date_is_read_where_the_schema_declares_one() -> None:
    """yaml.safe_load reads `as_of: 2025-08-07` as a date: the field's own type, so it stands."""
    doc = yaml.safe_load((ROOT / "preregistrations" / "published.yaml").read_text())
    assert isinstance(doc["model"]["rates"]["as_of"], date)
    plan = validate_preregistration(doc)
    assert plan.preregistration_hash == (
        load_preregistration(ROOT / "preregistrations" / "published.yaml").preregistration_hash
    )


def test_a_hundred_thousand_arms_are_refused_at_the_first_over_the_bound(tmp_path: Path) -> None:
    """The refusal comes while the list is read (at the 501st arm), not after the whole file
    (a megabyte of arms) is parsed and validated."""
    block = TEXT[TEXT.index("  arms:\n") : TEXT.index("  tasks:")]
    line = "  arms: [" + ", ".join(["depth:d1"] * 100_000) + "]\n"
    text = TEXT.replace(block, line, 1)
    path = tmp_path / "arms.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(PreregistrationError) as info:
        load_preregistration(path)
    [problem] = info.value.problems
    assert problem.startswith(f"{path}: design.arms: more than {MAX_ARMS} arms; at most {MAX_ARMS}")
    row = text.count("\n", 0, text.index(line)) + 1
    column = len("  arms: [") + MAX_ARMS * len("depth:d1, ") + 1  # where the 501st arm starts
    assert problem.endswith(f"(line {row}, column {column})")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("a: {b: [1, 2, 3, 4]}", "a.b: more than 3 arms; at most 3 (line 1, column 18)"),
        ("a: [[1], [1, 2, 3, 4, 5, 6]]", "a[1]: more than 5 items; at most 5 (line 1, column 26)"),
        ("{a: 1, b: 2, c: 3, d: 4, e: 5, f: 6}", "(document): more than 5 keys; at most 5"),
        ("[[1, 2, 3], [1, 2, 3], [1, 2, 3]]", "holds more than 12 values;"),
    ],
)
def test_the_reader_bounds_every_list_mapping_and_document(text: str, says: str) -> None:
    limits = YamlLimits(values=12, items=5, paths={"a.b": (3, "arms")})
    with pytest.raises(YamlRefused) as info:
        load_json_yaml(text, limits)
    assert says in info.value.line()
    assert load_json_yaml("a: {b: [1, 2, 3]}", limits) == {"a": {"b": [1, 2, 3]}}


def test_a_pre_registrations_bounds_are_its_limits() -> None:
    assert (
        YamlLimits(values=MAX_VALUES, items=MAX_ITEMS, paths={"design.arms": (MAX_ARMS, "arms")})
        == YAML_LIMITS
    )
    assert (MAX_ITEMS, MAX_VALUES) == (100_000, 110_000)
    doc = yaml.safe_load(TEXT)
    for body in ({"x": [0] * (MAX_ITEMS + 1)}, {f"{i:x}": 0 for i in range(MAX_ITEMS + 1)}):
        doc["decoding"]["extra_body"] = body  # from Python, validate bounds them too
        with pytest.raises(PreregistrationError) as info:
            validate_preregistration(doc)
        assert "100,001 items; at most 100,000" in info.value.problems[0]
