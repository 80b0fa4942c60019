"""The stop handlers' one subtle rule: a stop that lands where Python would drop its exception."""

from __future__ import annotations

import signal
from types import SimpleNamespace
from typing import Any

import pytest

from poisson_tasks import stopping
from poisson_tasks.errors import Terminated


def _frame(filename: str, name: str) -> Any:
    """A stand-in for the frame a signal interrupts: the handler reads only its code's names."""
    return SimpleNamespace(f_code=SimpleNamespace(co_filename=filename, co_name=name))


def test_a_stop_in_the_import_locks_callback_is_sent_again(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[tuple[int, int]] = []
    monkeypatch.setattr(stopping.os, "kill", lambda pid, sig: sent.append((pid, sig)))
    monkeypatch.setattr(stopping, "_received", [])
    # Python prints and drops an exception raised there: the handler sends the signal again
    stopping._handler(signal.SIGTERM, _frame("<frozen importlib._bootstrap>", "cb"))
    assert sent == [(stopping.os.getpid(), signal.SIGTERM)] and stopping.received() is None
    # anywhere else it raises at once, and says which signal came
    with pytest.raises(Terminated):
        stopping._handler(signal.SIGTERM, _frame("<frozen importlib._bootstrap>", "_load"))
    with pytest.raises(KeyboardInterrupt):
        stopping._handler(signal.SIGINT, None)
    assert stopping.received() == signal.SIGINT and len(sent) == 1


def test_a_stop_with_nothing_written_imports_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # the stop may have cut an import short (seen: yaml), and importing again can then fail
    import builtins

    from poisson_tasks import cli

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"imported {args[0]} while stopping")

    monkeypatch.setattr(cli, "_writing", [])
    monkeypatch.setattr(builtins, "__import__", refuse)
    cli._say_stopped(signal.SIGTERM)
    monkeypatch.undo()
    assert capsys.readouterr().err == "error: stopped by SIGTERM; nothing was written\n"
