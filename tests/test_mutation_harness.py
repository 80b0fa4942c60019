"""benchmarks/mutation.py, the mutation sessions' driver: which mutants it leaves out, how it reads
an outcome, the recorded-score check CI runs, and the fork server every mutant's tests run through."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))  # as when run as a script: common.py beside it

pytest.importorskip("cosmic_ray", reason="the mutation extra: uv sync --extra dev --extra mutation")

import mutation  # noqa: E402
import mutation_pytest  # noqa: E402

SOURCE = """from __future__ import annotations


def f(x: int | None, *rest: str, k: float = 1.0, **more: bytes) -> list[int | None]:
    y: int | None = x
    return [y, -1]


class Model:
    z: int | None = None

    def method(self) -> int | None:
        w: float = 2 * 3
        return None
"""


def _span_texts(source: str) -> list[str]:
    lines = source.splitlines()
    out = []
    for (l1, c1), (l2, c2) in mutation.unevaluated_annotations(source):
        assert l1 == l2
        out.append(lines[l1 - 1][c1:c2])
    return out


def test_annotations_python_never_evaluates_are_found_and_no_others() -> None:
    assert _span_texts(SOURCE) == [
        "int | None",
        "str",
        "float",
        "bytes",
        "list[int | None]",
        "int | None",  # the local y
        "int | None",  # method's return
        "float",  # the local w
    ]
    # without the future import a signature's annotations are evaluated: only locals are left out
    eager = SOURCE.replace("from __future__ import annotations\n", "")
    assert _span_texts(eager) == ["int | None", "float"]


def test_spans_are_in_characters_as_cosmic_ray_counts_them() -> None:
    source = 'def f(é: str = "ü", x: int | None = None) -> None:\n    pass\n'
    lines = source.splitlines()
    spans = mutation.unevaluated_annotations("from __future__ import annotations\n" + source)
    texts = [lines[line - 2][start:end] for (line, start), (_, end) in spans]
    assert texts == ["str", "int | None", "None"]


def test_outcomes_are_read_as_cosmic_ray_records_them() -> None:
    normal = {"worker_outcome": "normal"}
    assert mutation._outcome({**normal, "test_outcome": "killed", "output": "1 failed"}) == "killed"
    assert mutation._outcome({**normal, "test_outcome": "killed", "output": "timeout"}) == "timeout"
    assert mutation._outcome({**normal, "test_outcome": "survived", "output": ""}) == "survived"
    assert mutation._outcome({**normal, "test_outcome": "incompetent"}) == "incompetent"
    assert mutation._outcome({"worker_outcome": "skipped", "test_outcome": None}) == "annotation"
    assert mutation._outcome({"worker_outcome": "exception", "test_outcome": None}) == "incompetent"
    for line in (mutation_pytest.UNREACHABLE, f"{mutation_pytest.NOT_RUN} (exit 5)"):
        record = {**normal, "test_outcome": "killed", "output": line + "\n"}
        assert mutation._outcome(record) == "incompetent"  # never counted as caught


def test_the_score_leaves_annotations_out_and_counts_timeouts_as_caught() -> None:
    counts = Counter(killed=8, timeout=1, survived=1, annotation=5)
    assert mutation.run_count(counts) == 10 and mutation.caught(counts) == 9
    assert mutation.score(counts) == pytest.approx(0.9)
    assert mutation.score(Counter(incompetent=2, killed=2)) == 0.5


def _mutants(outcomes: dict[str, int]) -> list[mutation.Mutant]:
    return [
        mutation.Mutant("verifier.py", i, "NumberReplacer", i, outcome, "")
        for i, outcome in enumerate(o for o, n in outcomes.items() for _ in range(n))
    ]


def test_check_fails_only_below_the_recorded_share(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded = tmp_path / "scores.json"
    recorded.write_text(json.dumps({"verifier": {"mutants": 10, "caught": 9}}))
    monkeypatch.setattr(mutation, "RECORDED", recorded)
    sessions = {
        "at": _mutants({"killed": 18, "survived": 2, "annotation": 3}),
        "above": _mutants({"killed": 10, "timeout": 1}),
        "below": _mutants({"killed": 17, "survived": 3}),
        "incompetent": _mutants({"killed": 17, "timeout": 1, "incompetent": 2, "survived": 1}),
    }
    lows = {}
    for name, mutants in sessions.items():
        monkeypatch.setattr(mutation, "read_session", lambda _name, m=mutants: m)
        lows[name] = mutation.check(["verifier"])
    assert [name for name, low in lows.items() if low] == ["below", "incompetent"]
    assert "85.0% (17 of 20) is below the recorded 90.0% (9 of 10" in lows["below"][0]
    assert "85.7% (18 of 21)" in lows["incompetent"][0]
    assert mutation.check(["engine"]) == []  # a session with no recorded score is not held


def test_the_recorded_verifier_score_is_the_one_results_md_quotes() -> None:
    recorded = json.loads(mutation.RECORDED.read_text())
    verifier = recorded["verifier"]
    share = f"{verifier['caught'] / verifier['mutants']:.1%}"
    results = (BENCHMARKS / "RESULTS.md").read_text(encoding="utf-8")
    assert f"{verifier['caught']} of {verifier['mutants']}" in results and share in results
    assert verifier["tests"] == list(mutation.SESSIONS["verifier"].tests)


def _serve(tmp_path: Path) -> tuple[subprocess.Popen[str], Path]:
    sock = tmp_path / "server.sock"
    server = subprocess.Popen(
        [sys.executable, str(BENCHMARKS / "mutation_pytest.py"), "serve", str(sock)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None and server.stdout.readline().strip() == "ready"
    return server, sock


def _client(sock: Path, tmp_path: Path, *arguments: str, timeout: float = 60) -> tuple[int, str]:
    client = [sys.executable, "-I", "-S", str(BENCHMARKS / "mutation_pytest.py"), "run", str(sock)]
    done = subprocess.run(
        [*client, "-q", "-p", "no:cacheprovider", *arguments],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return done.returncode, done.stdout


@pytest.mark.slow  # two servers, each importing scipy and hypothesis first: about 10 s
def test_the_fork_server_runs_each_request_in_a_fresh_child(tmp_path: Path) -> None:
    (tmp_path / "test_a.py").write_text(
        "import sys\n"
        "def test_fresh():\n"
        "    assert 'tested_once' not in sys.modules\n"  # nothing a child imported leaks
        "    sys.modules['tested_once'] = sys\n"
    )
    (tmp_path / "test_b.py").write_text("def test_fails():\n    assert 1 == 2\n")
    (tmp_path / "test_c.py").write_text(
        "from hypothesis import given, settings, strategies as st\n"
        "seen = []\n"
        "@given(st.integers())\n"
        "def test_draws(x):\n    seen.append(x)\n"
        "def test_derandomized():\n"
        "    assert settings.default.derandomize and settings.default.database is None\n"
    )
    server, sock = _serve(tmp_path)
    try:
        assert _client(sock, tmp_path, "test_a.py") == (0, "")
        assert _client(sock, tmp_path, "test_a.py") == (0, "")
        assert _client(sock, tmp_path, "test_b.py")[0] == 1
        assert _client(sock, tmp_path, "test_c.py")[0] == 0
        code, out = _client(sock, tmp_path, "test_none.py")
        assert code == 4 and mutation_pytest.NOT_RUN in out
    finally:
        subprocess.run(
            [sys.executable, str(BENCHMARKS / "mutation_pytest.py"), "stop", str(sock)],
            check=True,
        )
        assert server.wait(timeout=30) == 0
    assert not sock.exists()
    code, out = _client(sock, tmp_path, "test_a.py")
    assert code != 0 and mutation_pytest.UNREACHABLE in out


@pytest.mark.slow
def test_a_client_that_goes_away_takes_its_test_run_with_it(tmp_path: Path) -> None:
    """cosmic-ray's timeout kills the client; the server then kills the child and serves on."""
    marker = tmp_path / "finished"
    (tmp_path / "test_slow.py").write_text(
        f"import time, pathlib\ndef test_slow():\n    time.sleep(3)\n"
        f"    pathlib.Path({str(marker)!r}).write_text('x')\n"
    )
    (tmp_path / "test_a.py").write_text("def test_ok():\n    pass\n")
    server, sock = _serve(tmp_path)
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            _client(sock, tmp_path, "test_slow.py", timeout=1.5)
        assert _client(sock, tmp_path, "test_a.py") == (0, "")
        time.sleep(3)
        assert not marker.exists()
    finally:
        subprocess.run(
            [sys.executable, str(BENCHMARKS / "mutation_pytest.py"), "stop", str(sock)],
            check=True,
        )
        server.wait(timeout=30)
