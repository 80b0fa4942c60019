"""Long work shows progress (issue 34, item 6): off a terminal a plain line on stderr at a steady
interval, through a whole probe as through one run; on a terminal a live line whose every frame
counts the same episodes its tokens belong to, the last frame the session's final count.

Reference-policy runs here exercise the display; their figures are no model's.
"""

from __future__ import annotations

import io
import re
import sys
import time
from pathlib import Path

import pytest
import yaml
from test_runner import SLOW_CALLS, lines_of, prereg

from poisson_tasks.probe import run as probe_run
from poisson_tasks.reference import ReferenceServer
from poisson_tasks.runner import folder as run_folder
from poisson_tasks.runner import progress, run_preregistration
from poisson_tasks.runner.budget import Spend

ROOT = Path(__file__).resolve().parents[1]
FRAME = re.compile(r"episodes (\d+)/(\d+)\s.*?tokens ([\d,]+)/", re.S)


class _Terminal(io.StringIO):
    """A stream that says it is a terminal, so the live line is drawn into it."""

    def isatty(self) -> bool:
        return True


def _counted_tokens(folder: Path) -> list[int]:
    """Tokens after the first n episode lines, n = 0, 1, ...: what a frame counting n must show."""
    spend, out = Spend(), [0]
    for line in lines_of(folder):
        spend.add(line.usage)
        out.append(spend.tokens)
    return out


def _slow_run(tmp_path: Path, server: ReferenceServer) -> Path:
    """Sixteen episodes whose every answer comes 50 ms late: long enough for several frames."""
    return prereg(tmp_path, model=SLOW_CALLS, base_url=server.base_url, tasks=4, attempts=2)


def test_off_a_terminal_a_run_prints_a_progress_line_at_a_steady_interval(
    tmp_path: Path,
    server: ReferenceServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(progress, "LINE_EVERY_S", 0.05, raising=False)
    folder = tmp_path / "run"
    run_preregistration(_slow_run(tmp_path, server), folder)  # stderr is captured: no terminal
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("progress ")]
    assert len(lines) >= 3, lines
    counted = _counted_tokens(folder)
    for line in lines:
        assert line.startswith(f"progress {folder}: episodes "), line
        done, total, tokens = FRAME.search(line).groups()  # type: ignore[union-attr]
        assert int(total) == 16
        assert int(tokens.replace(",", "")) == counted[int(done)], line


def test_quiet_prints_no_progress_line(
    tmp_path: Path,
    server: ReferenceServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(progress, "LINE_EVERY_S", 0.02, raising=False)
    run_preregistration(_slow_run(tmp_path, server), tmp_path / "run", show_progress=False)
    assert "progress" not in capsys.readouterr().err


def test_on_a_terminal_every_frame_counts_the_episodes_its_tokens_belong_to(
    tmp_path: Path, server: ReferenceServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first frame once episodes are counted shows their tokens, not those of episodes still
    waiting for their fsync; the last frame shows every episode of the session."""
    monkeypatch.setattr(run_folder, "FSYNC_BATCH", 3)  # episodes are counted in small batches
    monkeypatch.setenv("COLUMNS", "400")  # one frame, one line
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    folder = tmp_path / "run"
    run_preregistration(_slow_run(tmp_path, server), folder)
    monkeypatch.undo()
    frames = [tuple(int(g.replace(",", "")) for g in m) for m in FRAME.findall(terminal.getvalue())]
    assert frames, terminal.getvalue()
    counted = _counted_tokens(folder)
    for done, total, tokens in frames:
        assert total == 16
        assert tokens == counted[done], (done, tokens, counted)
    assert frames[-1][0] == 16 and frames[-1][2] == counted[-1]


def _tiny_probe(tmp_path: Path) -> Path:
    reg = yaml.safe_load((ROOT / "preregistrations" / "probes" / "reference.yaml").read_text())
    reg["models"] = [{"label": "slow", "model": {"provider": "reference", "model": SLOW_CALLS}}]
    reg["design"].update(knobs=["faults"], tasks=2, attempts=1)
    reg["phase1"].update(tasks=1)
    path = tmp_path / "probe.yaml"
    path.write_text(yaml.safe_dump(reg))
    return path


def test_a_probe_off_a_terminal_prints_a_line_from_start_to_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between its runs and while it reads the records the probe still prints, naming its stage."""
    monkeypatch.setattr(progress, "LINE_EVERY_S", 0.02, raising=False)
    real_analyse = probe_run.analyse

    def slow_analyse(root: Path) -> object:
        time.sleep(0.2)  # the analysis of a real probe takes tens of seconds
        return real_analyse(root)

    monkeypatch.setattr(probe_run, "analyse", slow_analyse)
    probe_run.run_probe(_tiny_probe(tmp_path), tmp_path / "p")
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("progress ")]
    assert any(
        ln.startswith(f"progress {tmp_path / 'p' / 'slow' / 'arms'}: episodes ") for ln in lines
    )
    assert any("reading every folder's records" in ln for ln in lines), lines
