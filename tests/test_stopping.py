"""A stop outside a run's own handling ends the program in one line, wherever it lands.

Each case is a place where raising KeyboardInterrupt went wrong in CI or under a stress of stops:
the program sends itself the signal from inside the trap, so the case is the same on every run.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from poisson_tasks import stopping


def _run(body: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`body` after the handlers are installed, in a fresh interpreter; it must never get to
    printing "not stopped"."""
    script = (
        "import os, signal, sys, time\nfrom poisson_tasks import stopping\nstopping.install()\n"
    )
    script += textwrap.dedent(body) + "\ntime.sleep(5)\nprint('not stopped')\n"
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=cwd
    )


def _stopped(done: subprocess.CompletedProcess[str], sig: signal.Signals, out: str = "") -> None:
    assert done.returncode == 128 + sig, (done.returncode, done.stderr)
    assert done.stderr == f"error: stopped by {sig.name} while starting; nothing was written\n"
    assert done.stdout == out


def test_a_stop_inside_a_del_ends_the_program() -> None:
    # a stop raised in a __del__ (or the import lock's weakref callback: seen in CI) is printed as
    # "Exception ignored" and dropped, and the run went on to complete
    done = _run(
        """
        class Dropper:
            def __del__(self):
                os.kill(os.getpid(), signal.SIGTERM)
                sum(range(100_000))  # the handler runs in here

        Dropper()
        """
    )
    _stopped(done, signal.SIGTERM)


def test_a_stop_during_an_import_ends_the_program(tmp_path: Path) -> None:
    # raising there leaves a half-made module; in an extension's initialisation it crashed the
    # process (orjson, under a stress of Ctrl-C)
    (tmp_path / "slow_module.py").write_text(
        "import os, signal\nos.kill(os.getpid(), signal.SIGINT)\nsum(range(100_000))\n"
    )
    _stopped(_run("import slow_module", cwd=tmp_path), signal.SIGINT)


def test_a_stop_inside_a_library_callback_ends_the_program() -> None:
    # pydantic's serializer turned a KeyboardInterrupt raised in a wrap serializer into its own
    # error, which the command line then reported as an internal error (exit 70)
    done = _run(
        """
        from pydantic import BaseModel, model_serializer

        class Model(BaseModel):
            x: int = 1

            @model_serializer(mode="wrap")
            def _serialize(self, handler):
                os.kill(os.getpid(), signal.SIGTERM)
                sum(range(100_000))
                return handler(self)

        print("before", flush=True)
        Model().model_dump_json()
        """
    )
    _stopped(done, signal.SIGTERM, out="before\n")


def test_what_was_printed_before_the_stop_still_shows() -> None:
    done = _run("print('half a card', end='')\nos.kill(os.getpid(), signal.SIGINT)\nsum(range(9))")
    _stopped(done, signal.SIGINT, out="half a card")


def test_the_command_line_sets_the_line_a_stop_prints() -> None:
    done = _run(
        """
        stopping.install(lambda signum: f"error: stopped by {stopping.signal_name(signum)}; see X")
        os.kill(os.getpid(), signal.SIGTERM)
        sum(range(100_000))
        """
    )
    assert (done.returncode, done.stderr) == (143, "error: stopped by SIGTERM; see X\n")


def test_a_stop_with_nothing_written_imports_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    # the handler computes the line wherever the stop lands, even inside an import
    import builtins

    from poisson_tasks import exits

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"imported {args[0]} while stopping")

    monkeypatch.setattr(exits, "writing", [])
    monkeypatch.setattr(builtins, "__import__", refuse)
    line = exits.stop_line(signal.SIGTERM)
    monkeypatch.undo()
    assert line == "error: stopped by SIGTERM; nothing was written"


def test_install_off_the_main_thread_is_a_no_op() -> None:
    import threading

    before = signal.getsignal(signal.SIGTERM)
    thread = threading.Thread(target=stopping.install)
    thread.start()
    thread.join()
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_stop_names_the_resume_only_for_a_listed_folder_with_a_header(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from poisson_tasks import exits

    started, begun = tmp_path / "started", tmp_path / "begun"
    started.mkdir()
    begun.mkdir()
    (begun / "run.json").write_text("{}")
    monkeypatch.setattr(exits, "writing", [started])
    assert exits.stop_line(signal.SIGINT) == "error: stopped by SIGINT; nothing was written"
    monkeypatch.setattr(exits, "writing", [begun])
    line = exits.stop_line(signal.SIGTERM)
    assert line.startswith("error: stopped by SIGTERM; continue with poisson-tasks run --resume")
    assert str(begun) in line
