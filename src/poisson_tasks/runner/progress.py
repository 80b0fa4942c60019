"""The progress display: episodes done, pass rate, tokens and spend against budget, retries, ETA.

Drawn with rich on stderr when it is a terminal; silent otherwise (a log gets the summary only).
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from rich.console import Console
from rich.live import Live
from rich.text import Text


def _eta(seconds: float | None) -> str:
    if seconds is None:
        return "--:--"
    seconds = int(max(0.0, seconds))
    hours, rem = divmod(seconds, 3600)
    minutes, secs = divmod(rem, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


class Progress:
    """A one-line live status; every method is a no-op when the stream is not a terminal."""

    def __init__(
        self,
        total: int,
        *,
        token_cap: int,
        dollar_cap: float | None,
        stream: TextIO | None = None,
        enabled: bool | None = None,
    ) -> None:
        out = stream or sys.stderr
        self.enabled = out.isatty() if enabled is None else enabled
        self.total = total
        self.token_cap = token_cap
        self.dollar_cap = dollar_cap
        self.done = 0
        self.scored = 0
        self.passed = 0
        self.instrument = 0
        self.tokens = 0
        self.dollars: float | None = None
        self.retries = 0
        self.last_retry = ""
        self.in_flight = 0
        self._start = time.monotonic()
        self._last_draw = 0.0
        self._live: Live | None = None
        if self.enabled:
            self._live = Live(
                self._render(), console=Console(file=out), auto_refresh=False, transient=False
            )

    def __enter__(self) -> Progress:
        if self._live is not None:
            self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.update(self._render(), refresh=True)
            self._live.stop()

    def _render(self) -> Text:
        rate = f"{self.passed / self.scored:.3f}" if self.scored else "-"
        elapsed = time.monotonic() - self._start
        eta = (elapsed / self.done * (self.total - self.done)) if self.done else None
        spend = (
            ""
            if self.dollars is None
            else (f"  ${self.dollars:.4f}" + (f"/{self.dollar_cap:g}" if self.dollar_cap else ""))
        )
        retry = f"  retries {self.retries}" + (f" (last {self.last_retry})" if self.retries else "")
        return Text(
            f"episodes {self.done}/{self.total}  in flight {self.in_flight}  pass {rate}  "
            f"instrument {self.instrument}  tokens {self.tokens:,}/{self.token_cap:,}{spend}"
            f"{retry}  eta {_eta(eta)}"
        )

    def refresh(self, force: bool = False) -> None:
        """Redraw, at most ten times a second unless forced."""
        if self._live is None:
            return
        now = time.monotonic()
        if force or now - self._last_draw >= 0.1:
            self._last_draw = now
            self._live.update(self._render(), refresh=True)

    def retry(self, kind: str) -> None:
        self.retries += 1
        self.last_retry = kind
        self.refresh(force=True)
