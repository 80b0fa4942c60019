"""The files and folders docs/commands.md's table of bad inputs names, made in one folder.

Each pre-registration file is the smoke study with one thing wrong, so `validate` prints exactly
one problem; each run folder is an empty run of the smoke study with one thing wrong in it.
"""

from __future__ import annotations

import copy
import gzip
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import yaml

from poisson_tasks.arms import parse_arm_id
from poisson_tasks.bundle import digest
from poisson_tasks.errors import ArmError
from poisson_tasks.prereg import Plan, Slot, load_preregistration
from poisson_tasks.registered import plan_hash
from poisson_tasks.runfolder import EPISODES, HEADER, REPLAY, EpisodeLine, Timing, Usage
from poisson_tasks.runner.folder import RunFolder
from poisson_tasks.runner.replay import replay_record
from poisson_tasks.runner.shard import SHARD_RULE, Shard, shard_record

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "preregistrations" / "smoke.yaml"


def edit(doc: dict[str, Any], path: str, value: Any) -> str:
    """The document with `path` (dotted; "" the top level) set to `value`, as YAML."""
    out = copy.deepcopy(doc)
    *head, last = path.split(".")
    node = out
    for key in head:
        node = node.setdefault(key, {})
    node[last] = value
    return yaml.safe_dump(out, sort_keys=False)


def _served(doc: dict[str, Any], url: str) -> str:
    out = copy.deepcopy(doc)
    out["model"] = {"provider": "openai-compatible", "model": "m", "base_url": url}
    return yaml.safe_dump(out, sort_keys=False)


# file name -> (dotted field, value): the smoke study with that one field changed
FIELD_EDITS: dict[str, tuple[str, Any]] = {
    "tasks.yaml": ("design.tasks", 10**9),
    "attempts.yaml": ("design.attempts", 10**12),
    "wide.yaml": ("design.tasks", 2**64),
    "nan.yaml": ("budget.wall_clock_s", float("nan")),
    "resolution.yaml": ("thresholds.resolution", 1e-300),
    "arm.yaml": ("design.arms", ["history:t50"]),
    "name_nul.yaml": ("name", "a\x00b"),
    "name_up.yaml": ("name", "../../escaped"),
    "name_abs.yaml": ("name", "/tmp/escaped"),
    "name_slash.yaml": ("name", "a/b"),
    "name_space.yaml": ("name", "my study"),
    "name_newline.yaml": ("name", "a\nerror: b"),
    "name_dot.yaml": ("name", ".hidden"),
    "name_dots.yaml": ("name", "a..b"),
    "name_long.yaml": ("name", "n" * 101),
    "name_list.yaml": ("name", ["a"]),
    "name_empty.yaml": ("name", ""),
    "tools_dir.yaml": ("design.own_tools", "."),
    "tools_zero.yaml": ("design.own_tools", "/dev/zero"),
    "tools_fifo.yaml": ("design.own_tools", "tools.fifo"),
    "tools_missing.yaml": ("design.own_tools", "nope.json"),
    "tools_big.yaml": ("design.own_tools", "big.json"),
    "tools_text.yaml": ("design.own_tools", "smoke.yaml"),
    "format.yaml": ("format", "poisson-tasks/preregistration@2"),
    "format_nl.yaml": ("format", "x\nerror: forged"),
    "tasks0.yaml": ("design.tasks", 0),
    "concurrency.yaml": ("execution.concurrency", 10**6),
    "retries.yaml": ("execution.max_retries", 10**4),
    "tokens.yaml": ("decoding.max_completion_tokens", 10**9),
    "turns.yaml": ("design.turn_limit", 10**6),
    "wall.yaml": ("budget.wall_clock_s", 1e12),
    "seedstring.yaml": ("design.seed_string", 7),
    "section.yaml": ("budget", [1, 2]),
    "nomodel.yaml": ("model", None),
}
# file name -> base_url (an openai-compatible serving)
URLS: dict[str, str] = {
    "url_port.yaml": "http://127.0.0.1:99999/v1",
    "url_port0.yaml": "http://127.0.0.1:0/v1",
    "url_porttext.yaml": "http://127.0.0.1:abc/v1",
    "url_v6open.yaml": "http://[::1/v1",
    "url_v6bad.yaml": "http://[zz]:80/v1",
    "url_crlf.yaml": "http://127.0.0.1:8000/v1\r\nX-Injected: 1",
    "url_space.yaml": "http://a b/v1",
    "url_tab.yaml": "http://127.0.0.1:8000/\tv1",
    "url_nul.yaml": "http://127.0.0.1:8000/v1\x00",
    "url_nohost.yaml": "http://",
    "url_porthost.yaml": "http://:8000/v1",
    "url_colons.yaml": "http://a:b:c/v1",
    "url_scheme.yaml": "ftp://127.0.0.1/v1",
    "url_long.yaml": "http://127.0.0.1:8000/" + "a" * 3000,
}
# file name -> a value of extra_body that JSON cannot hold, written as YAML
NOT_JSON: dict[str, str] = {
    "binary_body.yaml": "{blob: !!binary aGVsbG8=}",
    "set_body.yaml": "{names: !!set {a: null}}",
}
# file name -> text appended to the smoke study
APPENDED: dict[str, str] = {
    "key_newline.yaml": '"x\\nerror: forged line": 1\n',
    "key_escape.yaml": '"\\e[31mred": 1\n',
    "key_cr.yaml": '"x\\rerror: forged": 1\n',
    "dup.yaml": "\nname: again\n",
}


def _min_calls(arm: str) -> int:
    """The arm's own min_calls, so a line is wrong only in what its folder names; an arm no knob
    can build (depth:d9, the `outside` line) takes 1."""
    try:
        return parse_arm_id(arm).min_calls
    except ArmError:
        return 1


def _line(header_arm: str, seed: int, attempt: int, outcome: str = "passed") -> bytes:
    line = EpisodeLine(
        arm_id=header_arm,
        seed=seed,
        attempt=attempt,
        task_id="t",
        session=0,
        resumed=False,
        outcome=outcome,  # type: ignore[arg-type]
        strict_label=outcome,
        leaky_pass=False,
        passed=outcome == "passed",
        malformed_clause=None,
        min_calls=_min_calls(header_arm),
        tool_calls=1,
        model_calls=1,
        goal_stages=[],
        usage=Usage(),
        timing=Timing(),
        system_fingerprints=[],
        finish_reasons=[],
        unparsed_text_calls=0,
        context_overflow=False,
        error=None,
        transcript={},
    )
    return line.model_dump_json().encode() + b"\n"


def make(d: Path) -> None:
    """Every file and folder the table names, in `d`."""
    text = SMOKE.read_text(encoding="utf-8")
    doc = yaml.safe_load(text)
    (d / "smoke.yaml").write_text(text, encoding="utf-8")
    (d / "latin1.yaml").write_bytes(text.replace("name:", "name: caf\xe9 #", 1).encode("latin-1"))
    (d / "binary.yaml").write_bytes(bytes(range(256)) * 16)
    (d / "big.yaml").write_bytes(b"#" * (1 << 20) + b"\n")
    (d / "alias.yaml").write_text("a: &x [1, 2]\nb: *x\n")
    (d / "digits.yaml").write_text(text.replace("tasks:", "tasks: " + "9" * 5000 + " #", 1))
    (d / "nulbyte.yaml").write_text(text + "\n# \x00\n")
    (d / "list.yaml").write_text("- 1\n- 2\n")
    (d / "empty.yaml").write_text("")
    (d / "deep.yaml").write_text("a: " + "[" * 200 + "]" * 200 + "\n")
    arms = text[text.index("  arms:\n") : text.index("  tasks:")]
    many = "  arms: [" + ", ".join(["depth:d1"] * 100_000) + "]\n"
    (d / "arms.yaml").write_text(text.replace(arms, many, 1))
    (d / "big.json").write_bytes(b" " * 1_000_001)
    os.mkfifo(d / "fifo.yaml")
    os.mkfifo(d / "tools.fifo")
    (d / "zero.yaml").symlink_to("/dev/zero")
    for name, (field, value) in FIELD_EDITS.items():
        (d / name).write_text(edit(doc, field, value))
    for name, url in URLS.items():
        (d / name).write_text(_served(doc, url))
    for name, extra in APPENDED.items():
        (d / name).write_text(text + extra)
    tokens = "  max_completion_tokens: 2048\n"
    for name, body in NOT_JSON.items():
        (d / name).write_text(text.replace(tokens, f"{tokens}  extra_body: {body}\n", 1))
    plan = load_preregistration(SMOKE)
    arm, seed = plan.arms[0], plan.seeds[0]
    folders: dict[str, Callable[[Path], None]] = {
        "empty": lambda p: None,
        "torn": lambda p: _replace(p / EPISODES, Path.mkdir),
        "zero": lambda p: _replace(p / EPISODES, lambda q: q.symlink_to("/dev/zero")),
        "fifo": lambda p: _replace(p / EPISODES, os.mkfifo),
        "headerzero": lambda p: _replace(p / HEADER, lambda q: q.symlink_to("/dev/zero")),
        "headerfifo": lambda p: _replace(p / HEADER, os.mkfifo),
        "headerdir": lambda p: _replace(p / HEADER, Path.mkdir),
        "outside": lambda p: (p / EPISODES).write_bytes(_line("depth:d9", seed, 0)),
        "twice": lambda p: (p / EPISODES).write_bytes(_line(arm, seed, 0) * 2),
        "badseed": lambda p: (p / EPISODES).write_bytes(_line(arm, 12345, 0)),
        "badattempt": lambda p: (p / EPISODES).write_bytes(_line(arm, seed, 99)),
        "notjson": lambda p: (p / EPISODES).write_bytes(b"{not json}\n"),
        "notline": lambda p: (p / EPISODES).write_bytes(orjson.dumps({"arm_id": arm}) + b"\n"),
        "gzbad": lambda p: _replace(
            p / EPISODES, lambda q: q.with_name(EPISODES + ".gz").write_bytes(b"not gzip")
        ),
        "gzdir": lambda p: _replace(p / EPISODES, lambda q: q.with_name(EPISODES + ".gz").mkdir()),
        "gzline": lambda p: _replace(
            p / EPISODES,
            lambda q: q.with_name(EPISODES + ".gz").write_bytes(gzip.compress(b"[1]\n")),
        ),
    }
    for name, damage in folders.items():
        RunFolder.create(d / name, plan, {}).close("interrupted", "made by the test")
        damage(d / name)
    _foreign_folders(d, plan)
    # a probe registration where a pre-registration is expected, and a run holding a replay
    (d / "probe.yaml").write_bytes(
        (ROOT / "preregistrations" / "probes" / "reference.yaml").read_bytes()
    )
    RunFolder.create(d / "replayed", plan, {}).close("complete", "made by the test")
    sample = replay_record([Slot(arm, seed, 0)], 0, 1)
    RunFolder.create(d / "replayed" / REPLAY, plan, {}, replay=sample).close("complete", None)


def _edit_header(
    folder: Path, change: Callable[[dict[str, Any]], Any], rehash: bool = False
) -> None:
    """run.json changed after its run (on another machine, say); `rehash` keeps the document's
    own hash consistent with the change, as a careful forger would."""
    header = json.loads((folder / HEADER).read_text())
    change(header)
    if rehash:
        header["preregistration_hash"] = digest(header["preregistration"])
    (folder / HEADER).write_text(json.dumps(header))


def _foreign_folders(d: Path, plan: Plan) -> None:
    """Shard folders as another machine might hand them over (forged or damaged, one thing each),
    a run folder whose run.json was edited after its run, and a merged folder."""
    arm, seed = plan.arms[0], plan.seeds[0]
    shards: dict[str, tuple[Callable[[dict[str, Any]], Any], bool]] = {
        "shardcount": (lambda h: h["shard"].update(count=10**12), False),
        "shardzero": (lambda h: h["shard"].update(count=0), False),
        "shardindex": (lambda h: h["shard"].update(index=-1), False),
        "shardnosession": (lambda h: h.update(sessions=[]), False),
        "shardsession": (lambda h: None, False),
        "shardturns": (lambda h: h["preregistration"]["design"].update(turn_limit=9), False),
        "shardplan": (lambda h: h["preregistration"]["design"].update(turn_limit=9), True),
    }
    for name, (change, rehash) in shards.items():
        folder = d / name
        RunFolder.create(folder, plan, {}, shard=shard_record(plan, Shard(0, 1))).close(
            "interrupted", "made by the test"
        )
        _edit_header(folder, change, rehash)
    (d / "shardsession" / EPISODES).write_bytes(
        _line(arm, seed, 0).replace(b'"session":0', b'"session":5')
    )
    RunFolder.create(d / "edited", plan, {}).close("interrupted", "made by the test")
    _edit_header(d / "edited", lambda h: h["thresholds"].update(no_call_max=0.9))
    RunFolder.create(d / "merged", plan, {}).close("interrupted", "made by the test")
    _edit_header(
        d / "merged",
        lambda h: h.update(
            merged={
                "count": 2,
                "rule": SHARD_RULE,
                "plan_hash": plan_hash(h["preregistration"]),
                "merged_at": "2026-01-01T00:00:00+00:00",
                "shards": [],
            }
        ),
    )


def _replace(path: Path, make_new: Callable[[Path], Any]) -> None:
    path.unlink()
    make_new(path)
