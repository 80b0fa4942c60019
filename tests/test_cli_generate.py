"""`poisson-tasks generate`: --show, --json, and one-line refusals with exit 2."""

from __future__ import annotations

import json
import subprocess
import sys

from typer.testing import CliRunner

from poisson_tasks.cli import app
from poisson_tasks.generator import generate
from poisson_tasks.pins import measure_pins, pinned_bundle
from poisson_tasks.pins.rows import ROW_IDS, ROWS

runner = CliRunner()


def test_show_prints_the_whole_task() -> None:
    res = runner.invoke(app, ["generate", "depth:d3", "--seed", "7", "--show"])
    assert res.exit_code == 0, res.output
    b = generate("depth:d3", 7)
    out = res.output
    for needle in (
        "== system prompt",
        "== prompt",
        "== tools (16",
        "== goal",
        "== reference solution",
        "== negative controls",
        "engine_hash",
        "generator_hash",
        b.task_id,
    ):
        assert needle in out
    for obs in b.reference_observations:
        assert obs in out
    for key in b.negative_controls:
        assert f"{key}:" in out
    assert "-> passed" not in out.split("== negative controls")[1]


def test_show_prints_every_pin_rows_figure() -> None:
    """--show prints the bundle's pins (the spec's `pins` field) as --json carries them: one line
    per row, its figure on this bundle, and what the row holds."""
    res = runner.invoke(app, ["generate", "depth:d1+h8", "--seed", "0", "--show"])
    assert res.exit_code == 0, res.output
    pins = res.output.split("== pins", 1)[1].splitlines()[1:]
    measured = measure_pins(generate("depth:d1+h8", 0))
    assert [line.split()[0] for line in pins] == list(ROW_IDS)
    for line, row in zip(pins, ROWS, strict=True):
        if row.id in measured.measured:
            assert row.figure is not None
            assert line.split()[1] == str(row.figure(measured.value(row.id))).split()[0]
        else:
            assert line.split()[1] == "unmeasured"
        assert line.endswith(row.holds)
    assert "N9   " + str(measured.value("N9")["seeded_tokens"]) in res.output


def test_json_is_the_canonical_bundle() -> None:
    res = runner.invoke(app, ["generate", "distractor:r8@k16", "--seed", "3", "--json"])
    assert res.exit_code == 0
    assert res.stdout.strip().encode() == pinned_bundle("distractor:r8@k16", 3).canonical()
    json.loads(res.stdout)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "poisson_tasks.cli", *args], capture_output=True, text=True
    )


def test_bad_arm_level_and_seed_are_one_line_exit_2() -> None:
    for args, needle in (
        (["generate", "depth:d4x"], "not of the form"),
        (["generate", "depth:d12"], "valid levels: 1 to 8"),
        (["generate", "colour:c1"], "valid knobs"),
        (["generate", "depth:d3", "--seed", "-4"], "non-negative integer"),
    ):
        res = _cli(*args)
        assert res.returncode == 2, (args, res.stderr)
        lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and needle in lines[0], res.stderr


START_UP = """
import atexit, gc, sys
sys.argv = ["poisson-tasks", "generate", "depth:d3", "--seed", "7", "--json"]

def report():
    from poisson_tasks import cli
    loaded = [m for m in ("poisson_tasks.pins.check", "poisson_tasks.pins.plan", "multiprocessing",
                          "concurrent.futures", "importlib.readers") if m in sys.modules]
    verbs = sorted(cli._command("generate").commands)
    print(loaded, verbs, cli._command.cache_info().currsize, gc.isenabled(), gc.get_freeze_count() > 0,
          file=sys.stderr)

atexit.register(report)
from poisson_tasks.launch import main
main()
"""


def test_one_task_loads_what_it_needs_and_collects_only_its_own_work() -> None:
    """The start-up of `generate --json` (benchmarks/RESULTS.md, start-up): no contrast checks,
    no process pool, no package resources read; typer's tree built for the one verb; the cyclic
    collector back on when the verb ran, what loaded before it frozen."""
    done = subprocess.run(
        [sys.executable, "-c", START_UP], capture_output=True, text=True, check=True
    )
    assert json.loads(done.stdout)["arm_id"] == "depth:d3"
    assert done.stderr.strip() == "[] ['generate'] 1 True True"
