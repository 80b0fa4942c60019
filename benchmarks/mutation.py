"""Mutation scores of the core (issue 32): does the suite notice a changed operator, constant or condition?

One cosmic-ray session per part of the core (the verifier, the engine, the intervals, pass@k, the pin
ledger), each against the test files chosen for it (SESSIONS). A session runs in a scratch copy of
the working tree (git's tracked and untracked, not ignored, files), since cosmic-ray rewrites the
module it mutates on disk: a run that is killed leaves no mutant in your source. The copy is put
first on PYTHONPATH, so the tests import the mutated copy, not the editable install; a one-line
check says so before any mutant runs. Mutants run one at a time, each through
benchmarks/mutation_pytest.py: pytest with hypothesis derandomized and no example database, in a
child forked from a server that has already imported the third-party libraries.

Results stay in .mutation/ (ignored by git): each session's config, its cosmic-ray database and a
summary JSON. docs/mutation.md says how to run it, how to read the figures, and lists every survivor.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import platform
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from common import HERE, ROOT, command_line, markdown_table
from cosmic_ray.work_db import use_db
from cosmic_ray.work_item import WorkerOutcome, WorkResult
from mutation_pytest import NOT_RUN, UNREACHABLE

OUT = ROOT / ".mutation"
RECORDED = HERE / "mutation_scores.json"
PACKAGE = "src/poisson_tasks/"
# pytest's own options for every mutant: stop at the first failure, no cache, no conftest (the
# chosen files use none of its fixtures, and loading it imports the runner and the reference
# server), no xdist, no anyio (it imports trio; no chosen test is asynchronous).
PYTEST_OPTIONS = (
    "-x",
    "-q",
    "-p",
    "no:cacheprovider",
    "--noconftest",
    "-p",
    "no:xdist",
    "-p",
    "no:anyio",
)


@dataclass(frozen=True)
class Session:
    """One cosmic-ray session: the modules it mutates and the test files each mutant runs, in order
    (the files most likely to kill a mutant first, since pytest stops at the first failure)."""

    modules: tuple[str, ...]
    tests: tuple[str, ...]

    def module_paths(self) -> list[str]:
        return [PACKAGE + m for m in self.modules]


SESSIONS: dict[str, Session] = {
    "verifier": Session(("verifier.py",), ("tests/test_verifier.py",)),
    "engine": Session(
        ("domain/engine.py", "domain/ledger.py"),
        ("tests/test_engine.py", "tests/test_verifier.py", "tests/test_generator.py"),
    ),
    "intervals": Session(("calibration/intervals.py",), ("tests/test_intervals.py",)),
    "passk": Session(("calibration/stats.py",), ("tests/test_stats.py",)),
    "pins": Session(
        (
            "pins/row.py",
            "pins/check.py",
            "pins/holding.py",
            "pins/rows/__init__.py",
            "pins/rows/block.py",
            "pins/rows/calls.py",
            "pins/rows/history.py",
            "pins/rows/length.py",
            "pins/rows/lookalike.py",
            "pins/rows/prompt.py",
            "pins/rows/run.py",
            "pins/rows/scenario.py",
        ),
        ("tests/test_pins.py",),
    ),
}

COLUMNS = (
    "module",
    "mutants",
    "killed",
    "timeout",
    "incompetent",
    "survived",
    "score",
    "not run: annotations",
)
Position = tuple[int, int]


class MutationError(Exception):
    """A session could not be run or read; the message says what and how to fix it."""


@dataclass(frozen=True)
class Mutant:
    """One mutant's outcome: where it was made, by which operator, and what the tests did."""

    module: str
    line: int
    operator: str
    occurrence: int
    outcome: str  # killed, timeout, incompetent, survived, or annotation (not run)
    diff: str

    @property
    def key(self) -> str:
        return f"{self.module}:{self.line} {self.operator} #{self.occurrence}"


# --------------------------------------------------------------------------- the scratch tree


def _tracked_files() -> list[str]:
    """The working tree's files that git tracks or would track (untracked, not ignored)."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            check=True,
            capture_output=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise MutationError(
            f"the scratch copy is the files git lists, and git ls-files failed in {ROOT} ({exc}): "
            "run this from a git checkout"
        ) from exc
    return [name for name in out.decode().split("\0") if name and (ROOT / name).is_file()]


def _scratch_tree() -> Path:
    """A copy of the working tree, compiled, so that each mutant compiles only the module it changes."""
    tree = Path(tempfile.mkdtemp(prefix="mutation-"))
    for name in _tracked_files():
        target = tree / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "src", "tests"],
        cwd=tree,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return tree


def _environment(tree: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tree / "src"), *filter(None, [env.get("PYTHONPATH")])])
    return env


def _runner(tree: Path) -> Path:
    return tree / "benchmarks" / "mutation_pytest.py"


def _test_command(tree: Path, session: Session, socket: Path) -> list[str]:
    """cosmic-ray's test command: the fork server's client (standard library only, so -I -S)."""
    client = [sys.executable, "-I", "-S", str(_runner(tree)), "run", str(socket)]
    return [*client, *PYTEST_OPTIONS, *session.tests]


def _start_server(tree: Path, env: dict[str, str]) -> tuple[subprocess.Popen[str], Path]:
    """The fork server every test run of the session goes through (benchmarks/mutation_pytest.py)."""
    socket = tree / "server.sock"
    server_env = {**env, "PYTHONDONTWRITEBYTECODE": "1", "OPENBLAS_NUM_THREADS": "1"}
    server = subprocess.Popen(
        [sys.executable, str(_runner(tree)), "serve", str(socket)],
        cwd=tree,
        env=server_env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    if server.stdout.readline().strip() != "ready":
        server.kill()
        raise MutationError("the mutation test server did not start: run it alone to see why")
    return server, socket


def _stop_server(server: subprocess.Popen[str], socket: Path) -> None:
    if server.poll() is None:
        stop = [sys.executable, str(_runner(socket.parent)), "stop", str(socket)]
        subprocess.run(stop, check=False, capture_output=True)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _check_import(tree: Path, env: dict[str, str]) -> None:
    """The tests must import the scratch copy, or every mutant would survive unseen."""
    found = subprocess.run(
        [sys.executable, "-c", "import poisson_tasks; print(poisson_tasks.__file__)"],
        cwd=tree,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    if not Path(found).resolve().is_relative_to(tree.resolve()):
        raise MutationError(
            f"the tests import poisson_tasks from {found}, not the scratch copy {tree}: "
            "unset whatever puts another copy before PYTHONPATH"
        )


def _baseline(tree: Path, env: dict[str, str], command: list[str], session: Session) -> float:
    """Run the unmutated test command once; it must pass. Returns its wall time in seconds."""
    start = time.perf_counter()
    done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True)
    took = time.perf_counter() - start
    if done.returncode != 0:
        direct = [sys.executable, "-m", "pytest", *PYTEST_OPTIONS, *session.tests]
        again = subprocess.run(direct, cwd=tree, env=env, capture_output=True, text=True)
        tail = (again.stdout + again.stderr).strip().splitlines()[-1:] or [done.stdout.strip()]
        raise MutationError(
            f"the tests fail before any mutation ({tail[0]}); fix them first: {shlex.join(direct)}"
        )
    return took


# --------------------------------------------------------------------------- running a session


def _config(tree: Path, session: Session, command: list[str], timeout: float) -> str:
    modules = ", ".join(json.dumps(m) for m in session.module_paths())
    return (
        "[cosmic-ray]\n"
        f"module-path = [{modules}]\n"
        f"timeout = {timeout:.1f}\n"
        "excluded-modules = []\n"
        f"test-command = {json.dumps(shlex.join(command))}\n"
        "\n[cosmic-ray.distributor]\n"
        'name = "local"\n'
    )


def _cosmic_ray(*arguments: str, cwd: Path, env: dict[str, str]) -> None:
    cosmic = Path(sys.executable).parent / "cosmic-ray"
    subprocess.run([str(cosmic), *arguments], cwd=cwd, env=env, check=True)


def _char_column(lines: list[str], line: int, byte_column: int) -> int:
    """ast's column (UTF-8 bytes) as cosmic-ray's (characters)."""
    return len(lines[line - 1].encode()[:byte_column].decode(errors="ignore"))


def unevaluated_annotations(source: str) -> list[tuple[Position, Position]]:
    """The spans of annotations Python never evaluates: a function's parameter and return
    annotations under `from __future__ import annotations` (kept as strings), and an annotated
    name inside a function body (never evaluated, with or without it). A mutant there cannot
    change what the code does, so it is not run; a class body's annotations are not in the list
    (pydantic evaluates a model's)."""
    tree = ast.parse(source)
    lines = source.splitlines()
    deferred = any(
        isinstance(node, ast.ImportFrom)
        and node.module == "__future__"
        and any(alias.name == "annotations" for alias in node.names)
        for node in tree.body
    )
    found: list[ast.expr] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if deferred:
            args = node.args
            every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
            found += [a.annotation for a in every if a is not None and a.annotation is not None]
            found += [node.returns] if node.returns is not None else []
        found += [
            inner.annotation
            for statement in node.body
            for inner in ast.walk(statement)
            if isinstance(inner, ast.AnnAssign)
        ]
    spans = []
    for expr in sorted(found, key=lambda e: (e.lineno, e.col_offset)):
        end_line = expr.end_lineno or expr.lineno
        end_col = expr.end_col_offset or 0
        spans.append(
            (
                (expr.lineno, _char_column(lines, expr.lineno, expr.col_offset)),
                (end_line, _char_column(lines, end_line, end_col)),
            )
        )
    return spans


def skip_annotations(tree: Path, database: Path) -> int:
    """Mark every mutant inside an unevaluated annotation as skipped (cosmic-ray's own outcome for
    a mutant a filter leaves out); returns how many."""
    spans: dict[str, list[tuple[Position, Position]]] = {}
    skipped = 0
    with use_db(str(database)) as db:
        for item in db.work_items:
            for spec in item.mutations:
                path = str(spec.module_path)
                if path not in spans:
                    spans[path] = unevaluated_annotations((tree / path).read_text())
                start, end = tuple(spec.start_pos), tuple(spec.end_pos)
                if any(low <= start and end <= high for low, high in spans[path]):
                    skip = WorkResult(worker_outcome=WorkerOutcome.SKIPPED)
                    db.set_result(item.job_id, skip)
                    skipped += 1
    return skipped


def _forget_survivors(database: Path) -> int:
    """Drop the results of the survivors (and incompetents) so that exec runs them again."""
    with sqlite3.connect(database) as db:
        cursor = db.execute(
            "DELETE FROM work_results WHERE worker_outcome != 'SKIPPED' "
            "AND (test_outcome IS NULL OR test_outcome != 'KILLED')"
        )
        return cursor.rowcount


def _sources(tree: Path, session: Session) -> dict[str, str]:
    """The digest of each module the session mutates: a database's mutants are numbered over
    these bytes, so a retest or resume needs the same."""
    return {
        path: hashlib.sha256((tree / path).read_bytes()).hexdigest()
        for path in session.module_paths()
    }


def run_session(
    name: str, retest: bool = False, resume: bool = False, tests: Sequence[str] = ()
) -> dict[str, object]:
    """Run one session; with retest, only the last run's survivors; with resume, only the mutants
    a stopped run left without a result; with tests, those files instead of the session's own.
    Returns its summary."""
    session = SESSIONS[name]
    if tests:
        session = Session(session.modules, tuple(tests))
    OUT.mkdir(exist_ok=True)
    database = OUT / f"{name}.sqlite"
    if (retest or resume) and not database.exists():
        raise MutationError(f"session {name} has no earlier run in {OUT}: run it without --retest")
    tree = _scratch_tree()
    server = None
    try:
        env = _environment(tree)
        _check_import(tree, env)
        server, socket = _start_server(tree, env)
        command = _test_command(tree, session, socket)
        baseline = _baseline(tree, env, command, session)
        timeout = max(30.0, 4.0 * baseline)
        config = OUT / f"{name}.toml"
        config.write_text(_config(tree, session, command, timeout))
        start = time.perf_counter()
        sources = OUT / f"{name}.sources.json"
        if retest or resume:
            if not sources.exists() or json.loads(sources.read_text()) != _sources(tree, session):
                raise MutationError(
                    f"session {name}: its modules changed since its last run began, so its "
                    "mutants no longer match them: run it again without --retest or --resume"
                )
        else:
            sources.write_text(json.dumps(_sources(tree, session), indent=2) + "\n")
        if retest:
            again = _forget_survivors(database)
            print(f"{name}: {again} survivors run again", file=sys.stderr)
        elif resume:
            print(f"{name}: going on from {database.name}", file=sys.stderr)
        else:
            database.unlink(missing_ok=True)
            _cosmic_ray("init", str(config), str(database), cwd=tree, env=env)
            skipped = skip_annotations(tree, database)
            print(f"{name}: {skipped} mutants in unevaluated annotations not run", file=sys.stderr)
        _cosmic_ray("exec", str(config), str(database), cwd=tree, env=env)
        wall = time.perf_counter() - start
        if server.poll() is not None:
            raise MutationError(
                f"session {name}: the test server ended during the run; run it again"
            )
    finally:
        if server is not None:
            _stop_server(server, socket)
        shutil.rmtree(tree, ignore_errors=True)
    mutants = read_session(name)
    summary: dict[str, object] = {
        "session": name,
        "modules": session.module_paths(),
        "tests": list(session.tests),
        "baseline_s": round(baseline, 2),
        "wall_s": round(wall, 1),
        "retest": retest,
        "resume": resume,
        "counts": dict(Counter(m.outcome for m in mutants)),
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
    }
    (OUT / f"{name}.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


# --------------------------------------------------------------------------- reading a session


def _outcome(result: dict[str, object]) -> str:
    test = result.get("test_outcome")
    if result.get("worker_outcome") == "skipped":
        return "annotation"
    if result.get("worker_outcome") != "normal" or test in (None, "incompetent"):
        return "incompetent"
    output = str(result.get("output") or "")
    if UNREACHABLE in output or NOT_RUN in output:
        return "incompetent"
    if test == "killed":
        return "timeout" if output == "timeout" else "killed"
    return "survived"


def read_session(name: str) -> list[Mutant]:
    """Every mutant of a session's last run, from cosmic-ray's own dump of its database."""
    database = OUT / f"{name}.sqlite"
    if not database.exists():
        raise MutationError(
            f"session {name} has not been run: python benchmarks/mutation.py {name}"
        )
    cosmic = Path(sys.executable).parent / "cosmic-ray"
    dump = subprocess.run(
        [str(cosmic), "dump", str(database)], check=True, capture_output=True, text=True
    ).stdout
    mutants = []
    for line in dump.splitlines():
        item, result = json.loads(line)
        if result is None:
            raise MutationError(f"session {name} is unfinished: run it again with --retest")
        for spec in item["mutations"]:
            mutants.append(
                Mutant(
                    module=spec["module_path"].removeprefix(PACKAGE),
                    line=spec["start_pos"][0],
                    operator=spec["operator_name"].removeprefix("core/"),
                    occurrence=spec["occurrence"],
                    outcome=_outcome(result),
                    diff=result.get("diff") or "",
                )
            )
    return sorted(mutants, key=lambda m: (m.module, m.line, m.operator, m.occurrence))


def caught(counts: Counter[str]) -> int:
    """Mutants the tests caught: killed, or run past the session's timeout."""
    return counts["killed"] + counts["timeout"]


def run_count(counts: Counter[str]) -> int:
    """Mutants run: every mutant but those in unevaluated annotations."""
    return sum(counts.values()) - counts["annotation"]


def score(counts: Counter[str]) -> float:
    """The share of the mutants run that the tests caught."""
    total = run_count(counts)
    return caught(counts) / total if total else 0.0


def _row(module: str, counts: Counter[str]) -> list[object]:
    return [
        module,
        run_count(counts),
        counts["killed"],
        counts["timeout"],
        counts["incompetent"],
        counts["survived"],
        f"{score(counts):.1%}",
        counts["annotation"],
    ]


def table(names: Iterable[str]) -> str:
    """One row per mutated module, and one per session when it mutates several."""
    rows: list[list[object]] = []
    for name in names:
        mutants = read_session(name)
        by_module: dict[str, Counter[str]] = {}
        for m in mutants:
            by_module.setdefault(m.module, Counter())[m.outcome] += 1
        for module in SESSIONS[name].modules:
            rows.append(_row(module, by_module.get(module, Counter())))
        if len(SESSIONS[name].modules) > 1:
            rows.append(_row(f"**{name} (all)**", Counter(m.outcome for m in mutants)))
    return markdown_table(COLUMNS, rows)


def survivors(name: str) -> list[Mutant]:
    return [m for m in read_session(name) if m.outcome in ("survived", "incompetent")]


def check(names: Sequence[str]) -> list[str]:
    """Sessions whose score is below the recorded one, each as one line."""
    recorded = json.loads(RECORDED.read_text())
    low = []
    for name in names:
        if name not in recorded:
            continue
        counts = Counter(m.outcome for m in read_session(name))
        want = recorded[name]["caught"] / recorded[name]["mutants"]
        if score(counts) + 1e-12 < want:
            low.append(
                f"{name}: mutation score {score(counts):.1%} "
                f"({caught(counts)} of {run_count(counts)}) is below the "
                f"recorded {want:.1%} ({recorded[name]['caught']} of {recorded[name]['mutants']}, "
                f"{RECORDED.name}): add the test that kills each new survivor "
                f"(python benchmarks/mutation.py {name} --report --survivors), or, for an "
                "equivalent mutant, say why in docs/mutation.md and record the new score"
            )
    return low


def main() -> int:
    global OUT
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sessions", nargs="*", help=f"of {', '.join(SESSIONS)} (default: all)")
    parser.add_argument("--list", action="store_true", help="name each session's modules and tests")
    parser.add_argument("--report", action="store_true", help="read .mutation/, run nothing")
    parser.add_argument("--retest", action="store_true", help="run only the last run's survivors")
    parser.add_argument("--resume", action="store_true", help="go on with a stopped run")
    parser.add_argument("--survivors", action="store_true", help="print every survivor's diff")
    parser.add_argument("--check", action="store_true", help=f"hold the scores of {RECORDED.name}")
    parser.add_argument("--out", type=Path, help="where sessions are kept and read (.mutation/)")
    parser.add_argument(
        "--tests", nargs="+", default=(), help="run these test files instead (choosing a session's)"
    )
    args = parser.parse_args()
    if args.out is not None:
        OUT = args.out.resolve()
    # A stop (kill's SIGTERM) ends the run through its finally clauses: the server stopped, the
    # scratch tree removed; cosmic-ray keeps every result it had recorded (--retest goes on).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    names = args.sessions or list(SESSIONS)
    unknown = [n for n in names if n not in SESSIONS]
    if unknown:
        print(f"unknown session {unknown[0]!r}: choose from {', '.join(SESSIONS)}", file=sys.stderr)
        return 2
    if args.list:
        for name in names:
            session = SESSIONS[name]
            print(f"{name}: {', '.join(session.modules)}  <-  {' '.join(session.tests)}")
        return 0
    try:
        if not args.report:
            for name in names:
                summary = run_session(
                    name, retest=args.retest, resume=args.resume, tests=args.tests
                )
                print(
                    f"{name}: {summary['wall_s']} s, baseline {summary['baseline_s']} s",
                    file=sys.stderr,
                )
        print(table(names))
        print(command_line())
        if args.survivors:
            for name in names:
                for m in survivors(name):
                    print(f"\n### {m.key} ({m.outcome})\n{m.diff}")
        low = check(names) if args.check else []
    except MutationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for line in low:
        print(line, file=sys.stderr)
    if low and not args.survivors:
        for name in (line.split(":")[0] for line in low):
            for m in survivors(name):
                print(f"\n### {m.key} ({m.outcome})\n{m.diff}", file=sys.stderr)
    return 1 if low else 0


if __name__ == "__main__":
    sys.exit(main())
