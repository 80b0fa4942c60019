"""Ctrl-C and SIGTERM outside a run's own handling: one line, never a traceback.

Outside a run a stop ends the process at once: the handler writes one line to stderr and leaves
with os._exit(128 + the signal's number), unwinding nothing. Nothing needs unwinding: every file
the program writes is written whole (files.atomic_write) or appended whole (a run folder survives
kill -9 by design), so this is as safe as being killed, and says why. Raising KeyboardInterrupt
instead is unsafe wherever the stop happens to land: inside an import (a module left half-made; an
extension interrupted in its initialisation crashed the process), inside a __del__ or a weakref
callback (Python prints the exception, drops it and goes on), inside a library that calls back
into Python (pydantic's serializer turned it into an internal error). A run installs its own
handlers for its life (runner/signals.py: a grace period, then the header written with the stop) and
puts these back after.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from types import FrameType

__all__ = ["install", "signal_name"]


def signal_name(signum: int) -> str:
    return signal.Signals(signum).name


def _starting_line(signum: int) -> str:
    """The line a stop prints before the command line can say more."""
    return f"error: stopped by {signal_name(signum)} while starting; nothing was written"


_line: list[Callable[[int], str]] = [_starting_line]  # one: the line now


def _handler(signum: int, frame: FrameType | None) -> None:
    try:
        line = _line[0](signum)
    except Exception:  # the line is a courtesy; the stop is not
        line = f"error: stopped by {signal_name(signum)}"
    for stream in (sys.stdout, sys.stderr):  # what was printed before the stop still shows
        try:
            stream.flush()
        except Exception:  # a stop in the middle of a write: that stream's rest is lost
            continue
    os.write(2, (line + "\n").encode())
    os._exit(128 + signum)


def install(line: Callable[[int], str] | None = None) -> None:
    """Route SIGINT and SIGTERM to _handler (main thread only; elsewhere a no-op). `line(signum)`
    is the one line a stop prints from now on, control characters already escaped (the default
    says the program was still starting)."""
    try:
        signal.signal(signal.SIGINT, _handler)
        signal.signal(signal.SIGTERM, _handler)
    except ValueError:  # not the main thread
        return
    if line is not None:
        _line[:] = [line]
