"""Ctrl-C and SIGTERM outside a run's own handling: one line, never a traceback.

`install()` runs first thing in the console entry point (poisson_tasks.launch), before the
command line and its dependencies are imported, so a stop while the program is still loading is
handled too. SIGINT raises KeyboardInterrupt and SIGTERM raises Terminated (a KeyboardInterrupt),
so every `except KeyboardInterrupt` treats them alike; `received()` says which came, for the exit
status (128 + the signal's number). A run installs its own handlers for its life (runner/run.py:
a grace period, then the header written with the stop) and puts these back after.
"""

from __future__ import annotations

import os
import signal
from types import FrameType

from poisson_tasks.errors import Terminated

__all__ = ["install", "received", "signal_name"]

_received: list[int] = []


# Python prints and drops an exception raised in the import system's module-lock callback (it
# runs as a weakref callback); a stop landing there would be lost, so it is sent again and
# handled once that callback has returned.
_DROPPING = ("<frozen importlib._bootstrap>", "cb")


def _handler(signum: int, frame: FrameType | None) -> None:
    if frame is not None and (frame.f_code.co_filename, frame.f_code.co_name) == _DROPPING:
        os.kill(os.getpid(), signum)
        return
    _received.append(signum)
    if signum == signal.SIGTERM:
        raise Terminated
    raise KeyboardInterrupt


def install() -> None:
    """Route SIGINT and SIGTERM to _handler (main thread only; elsewhere a no-op)."""
    try:
        signal.signal(signal.SIGINT, _handler)
        signal.signal(signal.SIGTERM, _handler)
    except ValueError:  # not the main thread
        return


def received() -> int | None:
    """The last signal _handler saw, or None."""
    return _received[-1] if _received else None


def signal_name(signum: int) -> str:
    return signal.Signals(signum).name
