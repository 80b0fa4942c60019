"""SIGINT and SIGTERM while a run runs (`Signals`): before its session, the run is cancelled
(nothing is written yet, or a resumed folder is left as it was); during it, no new slot is taken,
episodes in flight get STOP_GRACE_S to finish, and a second signal or the grace's end abandons them.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from typing import Any

from poisson_tasks.runner.session import Session

STOP_GRACE_S = 10.0  # how long episodes in flight may finish after SIGINT/SIGTERM


class Signals:
    """SIGINT and SIGTERM while run_plan runs: before the session, cancel the run (nothing is
    written yet, or the folder is closed as interrupted); during it, stop taking slots and give
    in-flight episodes STOP_GRACE_S, then abandon them."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.main = asyncio.current_task()
        self.signum: int | None = None
        self.session: Session | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._previous: dict[int, Any] = {}

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum is not None else "a signal"

    def install(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                previous = signal.getsignal(sig)
                self.loop.add_signal_handler(sig, self._on_signal, int(sig))
            except (ValueError, RuntimeError, NotImplementedError):  # not the main thread
                continue
            self._previous[sig] = previous

    def remove(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        for sig, previous in self._previous.items():
            with contextlib.suppress(ValueError, RuntimeError):
                self.loop.remove_signal_handler(sig)
                signal.signal(sig, previous if previous is not None else signal.SIG_DFL)
        self._previous.clear()

    def _on_signal(self, signum: int) -> None:
        first = self.signum is None
        if first:
            self.signum = signum
        session = self.session
        if session is None:
            if self.main is not None:
                self.main.cancel()
        elif first:
            session.signalled = True
            session.stop("interrupted", f"stopped by {self.name}")
            self._timer = self.loop.call_later(STOP_GRACE_S, session.hard_stop)
        else:
            session.hard_stop()
