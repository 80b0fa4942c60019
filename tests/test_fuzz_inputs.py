"""Fuzzing every user input (slow suite): only the project's typed error or success, each fast.

Over the pre-registration loader (random bytes and YAML-shaped edits of the smoke file),
parse_arm_id, seed ranges and CLI flags; 2,500 examples each (10,000 in all), every example under
2 s (hypothesis's deadline).
"""

from __future__ import annotations

import contextlib
import os
import shlex
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from poisson_tasks.arms import parse_arm_id
from poisson_tasks.cli import run_cli
from poisson_tasks.errors import PoissonError
from poisson_tasks.pins.plan import parse_seeds
from poisson_tasks.prereg import load_preregistration

pytestmark = pytest.mark.slow
SMOKE = Path(__file__).resolve().parents[1] / "preregistrations" / "smoke.yaml"
DOC = yaml.safe_load(SMOKE.read_text(encoding="utf-8"))
FAST = settings(
    max_examples=int(os.environ.get("POISSON_FUZZ_EXAMPLES", "2500")),
    deadline=2000,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
VALUES = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.none(),
    st.booleans(),
    st.lists(st.integers(), max_size=4),
)
FIELDS = [(s, k) for s, sec in DOC.items() if isinstance(sec, dict) for k in sec]


@FAST
@given(data=st.one_of(st.binary(max_size=2000), st.text(max_size=2000).map(str.encode)))
def test_loader_on_random_bytes(tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    path = tmp_path_factory.mktemp("f") / "p.yaml"
    path.write_bytes(data)
    with contextlib.suppress(PoissonError):
        load_preregistration(path)


@FAST
@given(edits=st.lists(st.tuples(st.sampled_from(FIELDS), VALUES), min_size=1, max_size=4))
def test_loader_on_edited_fields(
    tmp_path_factory: pytest.TempPathFactory, edits: list[tuple[tuple[str, str], object]]
) -> None:
    doc = yaml.safe_load(SMOKE.read_text(encoding="utf-8"))
    for (section, key), value in edits:
        doc[section][key] = value
    path = tmp_path_factory.mktemp("f") / "p.yaml"
    path.write_text(yaml.safe_dump(doc))
    with contextlib.suppress(PoissonError):
        load_preregistration(path)


@FAST
@given(
    text=st.one_of(
        st.text(max_size=80),
        st.from_regex(
            r"[a-z]{2,10}:[a-z][0-9]{1,15}(\+h[0-9]{1,4}|\+len\([a-z][0-9]{1,6}\))?(@k[0-9]{1,3})?(/train)?(/leaky)?",
            fullmatch=True,
        ),
    )
)
def test_parse_arm_id(text: str) -> None:
    with contextlib.suppress(PoissonError):
        parse_arm_id(text)


@FAST
@given(
    text=st.one_of(
        st.text(max_size=40),
        st.from_regex(r"[0-9]{1,25}(-[0-9]{1,25})?(,[0-9]{1,6})*", fullmatch=True),
    )
)
def test_seed_ranges(text: str) -> None:
    with contextlib.suppress(PoissonError):
        parse_seeds(text)


FLAGS = [
    "--seed",
    "--seeds",
    "--arms",
    "--workers",
    "--port",
    "--bogus",
    "--json",
    "--out",
    "--resume",
]


@FAST
@given(
    verb=st.sampled_from(["generate", "knobs", "validate", "nope", "run"]),
    args=st.lists(st.one_of(st.sampled_from(FLAGS), st.text(max_size=12)), max_size=4),
)
def test_cli_flags(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    verb: str,
    args: list[str],
) -> None:
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))
    if verb == "run" and not any(a.startswith("-") for a in args) and args:
        return  # a run with a file argument would run a study: flags and bad values only
    rc = run_cli([verb, *args])
    assert isinstance(rc, int), shlex.join([verb, *args])
