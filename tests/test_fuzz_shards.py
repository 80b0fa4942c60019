"""Fuzzing `merge` over shard folders from another machine (slow suite).

Three real shard folders of a small study (the reference endpoint, in-process: a scripted
baseline, never a model's figures) are copied and damaged or forged, one to four things at once:
counts, indices and slots of the shard record, sessions, the header's copies of the plan, the
stored pre-registration (its hash kept or recomputed), wrong types, missing keys, and episode
lines (their slot, session, calls, duplicated, dropped, moved to another shard, torn, garbage);
folders are also given twice or left out. `card` reads each damaged folder too (a shard folder is
a run folder) and exits 0, 1 or 2, in at most one line. Every merge runs in one worker process whose address
space is limited (RLIMIT_AS, MEMORY_LIMIT), so an allocation sized by a forged number fails there
instead of on the machine, and each answer must come within ANSWER_S. Over every example: merge
exits 0 or 2, never 70 and never killed; a refusal is one line and leaves nothing behind (no
--out, no parent folder it made, no temporary folder); a merged folder is read by `card`, which
exits 0 or 1 (a refused card), never 70.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from poisson_tasks.arms import parse_arm_id
from poisson_tasks.bundle import digest
from poisson_tasks.runfolder import EPISODES, HEADER
from poisson_tasks.runner import run_preregistration
from poisson_tasks.runner.shard import Shard

pytestmark = pytest.mark.slow
SMOKE = Path(__file__).resolve().parents[1] / "preregistrations" / "smoke.yaml"
N = 3
MEMORY_LIMIT = 1 << 30  # the worker's address space: a few times what a merge of this study needs
ANSWER_S = 30.0  # a merge of three small folders answers in well under a second
EXAMPLES = int(os.environ.get("POISSON_FUZZ_EXAMPLES", "2500")) // 10

WORKER = f"""
import contextlib, io, json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, ({MEMORY_LIMIT}, {MEMORY_LIMIT}))
from poisson_tasks.cli import run_cli
for request in sys.stdin:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            rc = run_cli(json.loads(request))
        except BaseException as exc:  # even a MemoryError outside run_cli's own handling
            rc, err = -1, io.StringIO(repr(exc))
    print(json.dumps({{"rc": rc, "err": err.getvalue()}}), flush=True)
"""


class Worker:
    """One process that runs the command line on request, within MEMORY_LIMIT."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WORKER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def run(self, argv: list[str]) -> tuple[int, str]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(argv) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], ANSWER_S)
        assert ready, f"no answer within {ANSWER_S} s: {argv}"
        answer = self.proc.stdout.readline()
        assert answer, f"the worker died (killed for memory?): {argv}"
        reply = json.loads(answer)
        return reply["rc"], reply["err"]

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture(scope="module")
def worker() -> Iterator[Worker]:
    started = Worker()
    try:
        yield started
    finally:
        started.close()


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """A 2-arm, 3-task, 2-attempt study (6 tasks, 12 slots) run in 3 shard folders."""
    root = tmp_path_factory.mktemp("shards")
    doc = yaml.safe_load(SMOKE.read_text(encoding="utf-8"))
    arms = ["depth:d1", "distractor:r4@k16"]  # one level of each knob: no control arm needed
    horizon = max(parse_arm_id(arm).max_turns(doc["design"]["slack"]) for arm in arms)
    doc["design"].update(arms=arms, tasks=3, attempts=2, horizon=horizon)
    path = root / "study.yaml"
    path.write_text(yaml.safe_dump(doc))
    out = []
    for i in range(N):
        run_preregistration(path, root / f"s{i}", show_progress=False, shard=Shard(i, N))
        out.append(root / f"s{i}")
    return out


# ------------------------------------------------------------------ damage

BIG = st.sampled_from([-(2**63), -1, 0, 10**6, 10**12, 2**63 - 1, 2**64])
NUMBERS = st.one_of(st.integers(-3, 12), BIG)
WRONG = st.sampled_from(["x", [], {}, None, 1.5, True, [1, 2], {"a": 1}])
Damage = Callable[[dict[str, Any], list[bytes]], None]


def _header(path: str, value: Any) -> Damage:
    """Set a dotted path in run.json (made where missing)."""

    def damage(header: dict[str, Any], lines: list[bytes]) -> None:
        node: Any = header
        *head, last = path.split(".")
        for key in head:
            if not isinstance(node, dict):
                return
            node = node.setdefault(key, {})
        if isinstance(node, dict):
            node[last] = value

    return damage


def _delete(key: str) -> Damage:
    def damage(header: dict[str, Any], lines: list[bytes]) -> None:
        header.pop(key, None)

    return damage


def _rehash(header: dict[str, Any], lines: list[bytes]) -> None:
    """The stored document's own hash recomputed, as a careful forger would."""
    if isinstance(header.get("preregistration"), dict):
        header["preregistration_hash"] = digest(header["preregistration"])


def _list_op(key: str, op: str) -> Damage:
    def damage(header: dict[str, Any], lines: list[bytes]) -> None:
        items = header.get(key)
        if not isinstance(items, list):
            return
        if op == "empty":
            items.clear()
        elif op == "drop" and items:
            items.pop()
        elif op == "twice" and items:
            items.append(items[0])
        elif op == "reverse":
            items.reverse()
        elif op == "renumber" and items and isinstance(items[0], dict):
            items[0]["index"] = 7

    return damage


def _line_field(number: int, field: str, value: Any) -> Damage:
    def damage(header: dict[str, Any], lines: list[bytes]) -> None:
        if not lines:
            return
        k = number % len(lines)
        try:
            doc = json.loads(lines[k])
            node = doc["usage"] if field.startswith("usage.") else doc
            node[field.removeprefix("usage.")] = value
        except (ValueError, KeyError, TypeError):
            return  # a line an earlier damage already made something else
        lines[k] = json.dumps(doc).encode() + b"\n"

    return damage


def _lines_op(op: str, number: int, garbage: bytes) -> Damage:
    def damage(header: dict[str, Any], lines: list[bytes]) -> None:
        if not lines:
            return
        k = number % len(lines)
        if op == "duplicate":
            lines.append(lines[k])
        elif op == "drop":
            del lines[k]
        elif op == "torn":
            lines[-1] = lines[-1][: max(0, len(lines[-1]) - 1 - number % 50)]
        elif op == "garbage":
            lines.insert(k, garbage.replace(b"\n", b"") + b"\n")

    return damage


HEADER_DAMAGE = st.one_of(
    st.builds(
        _header,
        st.sampled_from(["shard.count", "shard.index", "shard.slots", "attempts"]),
        NUMBERS,
    ),
    st.builds(
        _header,
        st.sampled_from(
            [
                "preregistration.design.tasks",
                "preregistration.design.attempts",
                "preregistration.design.turn_limit",
                "preregistration.thresholds.no_call_max",
            ]
        ),
        st.one_of(NUMBERS, st.floats(0, 1)),
    ),
    st.builds(
        _header,
        st.sampled_from(
            [
                "shard.plan_hash",
                "shard.slots_sha256",
                "shard.rule",
                "preregistration_hash",
                "seed_list_hash",
                "generator_hash",
            ]
        ),
        st.text(max_size=64),
    ),
    st.builds(
        _header,
        st.sampled_from(["thresholds.no_call_max", "thresholds.confidence", "shard.budget.tokens"]),
        st.one_of(st.floats(-1, 2), NUMBERS),
    ),
    st.builds(
        _header,
        st.sampled_from(
            ["shard", "sessions", "preregistration", "preregistration.design", "arms", "seeds"]
        ),
        WRONG,
    ),
    st.builds(_delete, st.sampled_from(["shard", "sessions", "preregistration", "thresholds"])),
    st.builds(
        _list_op,
        st.sampled_from(["sessions", "arms", "seeds"]),
        st.sampled_from(["empty", "drop", "twice", "reverse", "renumber"]),
    ),
    st.just(_rehash),
)
LINE_DAMAGE = st.one_of(
    st.builds(
        _line_field,
        st.integers(0, 10),
        st.sampled_from(
            [
                "session",
                "seed",
                "attempt",
                "min_calls",
                "usage.prompt_tokens",
                "arm_id",
                "outcome",
            ]
        ),
        st.one_of(NUMBERS, st.sampled_from(["depth:d8", "api_error", "passed", "x"]), WRONG),
    ),
    st.builds(
        _lines_op,
        st.sampled_from(["duplicate", "drop", "torn", "garbage"]),
        st.integers(0, 100),
        st.binary(max_size=80),
    ),
)
FOLDERS = st.sampled_from(["as given", "one twice", "one left out", "reversed"])


def _damaged(
    root: Path, shards: list[Path], damage: list[tuple[int, Damage]], move: int | None
) -> list[Path]:
    """Copies of the shard folders with `damage` applied (shard, damage), and optionally one line
    of shard `move` appended to the next shard's file."""
    copies = []
    for i, source in enumerate(shards):
        copy = root / f"s{i}"
        shutil.copytree(source, copy)
        copies.append(copy)
    for i, change in damage:
        header = json.loads((copies[i] / HEADER).read_text())
        lines = (copies[i] / EPISODES).read_bytes().splitlines(keepends=True)
        change(header, lines)
        (copies[i] / HEADER).write_text(json.dumps(header))
        (copies[i] / EPISODES).write_bytes(b"".join(lines))
    if move is not None:
        first = (copies[move] / EPISODES).read_bytes().splitlines(keepends=True)[:1]
        with (copies[(move + 1) % N] / EPISODES).open("ab") as fh:
            fh.write(b"".join(first))
    return copies


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    damage=st.lists(
        st.tuples(st.integers(0, N - 1), st.one_of(HEADER_DAMAGE, LINE_DAMAGE)),
        min_size=0,
        max_size=4,
    ),
    move=st.one_of(st.none(), st.integers(0, N - 1)),
    folders=FOLDERS,
)
def test_merge_of_damaged_shard_folders(
    tmp_path_factory: pytest.TempPathFactory,
    worker: Worker,
    shards: list[Path],
    damage: list[tuple[int, Damage]],
    move: int | None,
    folders: str,
) -> None:
    root = tmp_path_factory.mktemp("m")
    copies = _damaged(root, shards, damage, move)
    given_folders = {
        "as given": copies,
        "one twice": [*copies, copies[0]],
        "one left out": copies[1:],
        "reversed": copies[::-1],
    }[folders]
    out = root / "new" / "deeper" / "merged"
    for copy in copies:  # a shard folder is a run folder: card reads it, or refuses in one line
        card_rc, card_err = worker.run(["card", str(copy)])
        assert card_rc in (0, 1, 2), card_err
        if card_rc == 0:  # a card: the files it wrote into the folder's card/, a line each
            assert all(Path(line).is_file() for line in card_err.splitlines()), card_err
        else:
            assert card_err.count("\n") == 1, card_err
    rc, err = worker.run(["merge", *map(str, given_folders), "--out", str(out)])
    assert rc in (0, 2), err
    if rc == 2:
        assert err.startswith("error: ") and err.count("\n") == 1, err
        assert not (root / "new").exists(), err
        assert not [p for p in root.rglob("*merging*")], err
        return
    card_rc, card_err = worker.run(["card", str(out)])
    assert card_rc in (0, 1), card_err


def test_the_folders_undamaged_merge_and_card(
    tmp_path: Path, worker: Worker, shards: list[Path]
) -> None:
    """The fuzz starts from folders that merge: what it refuses, the damage made it refuse."""
    copies = _damaged(tmp_path, shards, [], None)
    rc, err = worker.run(["merge", *map(str, copies[::-1]), "--out", str(tmp_path / "merged")])
    assert rc == 0, err
    assert worker.run(["card", str(tmp_path / "merged")])[0] == 0


def test_the_worker_catches_an_allocation_past_its_limit(worker: Worker) -> None:
    """The guard itself: a command that would allocate past MEMORY_LIMIT fails inside the
    worker (a MemoryError, reported as exit 70 by the command line) rather than on the machine."""
    rc, err = worker.run(["generate", "--arms", "depth:d1", "--seeds", "0-99999999999"])
    assert rc == 2 and "at most 100,000 seeds" in err  # a bound the CLI already has
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import resource; resource.setrlimit(resource.RLIMIT_AS, ({MEMORY_LIMIT},"
            f" {MEMORY_LIMIT})); b = bytearray({2 * MEMORY_LIMIT})",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert probe.returncode != 0 and "MemoryError" in probe.stderr
