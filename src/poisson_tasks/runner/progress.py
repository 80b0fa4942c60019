"""The progress display: episodes done, pass rate, tokens and spend against budget, retries, ETA.

On a terminal it is one live line on stderr, redrawn up to ten times a second by rich's own
thread. Off a terminal (a log, a pipe, CI) it is a plain line on stderr every LINE_EVERY_S
seconds, from a thread of its own, so a long command is never silent however long an episode
takes; a session shorter than that prints none (its summary follows). Every figure in a frame is
read under one lock and describes the same episodes: the runner counts an episode, its outcome
and its tokens in one call (`episode`), once its line is on disk.

A command that runs several sessions and works between them (the probe: checks, then reading
every folder's records) holds a Heartbeat for its whole length: off a terminal it prints the line
at the same interval throughout, naming its stage, and a session's Progress inside it lends the
heartbeat its frame instead of starting a ticker of its own.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Literal, TextIO

from rich.console import Console
from rich.live import Live
from rich.text import Text

LINE_EVERY_S = 10.0  # off a terminal: one progress line this often

Mode = Literal["live", "lines", "off"]


class _Ticker:
    """A daemon thread writing `line()` to `out` every `every_s` seconds until stopped."""

    def __init__(self, out: TextIO, every_s: float, line: Callable[[], str]) -> None:
        self._out, self._every_s, self._line = out, every_s, line
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="progress", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._every_s):
            try:
                self._out.write(self._line() + "\n")
                self._out.flush()
            except (OSError, ValueError):  # the stream was closed under us: stop printing
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def _off_a_terminal(stream: TextIO, enabled: bool | None) -> bool:
    """Whether plain progress lines are wanted: not asked off (--quiet), not asked for a live
    line, and the stream is not a terminal."""
    return enabled is None and not stream.isatty()


class Heartbeat:
    """A long command's progress line off a terminal, at LINE_EVERY_S for its whole length:
    `progress LABEL: STAGE`, or, while a session runs inside it, that session's frame."""

    def __init__(
        self,
        label: str,
        *,
        stream: TextIO | None = None,
        enabled: bool | None = None,
        every_s: float | None = None,
    ) -> None:
        self._out = stream or sys.stderr
        self.label = label
        self.on = _off_a_terminal(self._out, enabled)
        self.every_s = LINE_EVERY_S if every_s is None else every_s
        self._stage = "starting"
        self._since = time.monotonic()
        self._lent: Progress | None = None
        self._ticker: _Ticker | None = None

    def stage(self, text: str) -> None:
        """What the command is doing now (shown until the next stage or a session's frame)."""
        self._stage, self._since = text, time.monotonic()

    def lend(self, progress: Progress | None) -> None:
        """A session's progress shown in place of the stage while it runs (None: it ended)."""
        self._lent = progress

    def _line(self) -> str:
        lent = self._lent
        if lent is not None:
            return lent.line()
        return f"progress {self.label}: {self._stage} ({time.monotonic() - self._since:.0f} s)"

    def __enter__(self) -> Heartbeat:
        if self.on:
            self._ticker = _Ticker(self._out, self.every_s, self._line)
            _BEATING.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._ticker is not None:
            _BEATING.remove(self)
            self._ticker.stop()
            self._ticker = None


_BEATING: list[Heartbeat] = []  # the heartbeats of the commands running now, innermost last


def _eta(seconds: float | None) -> str:
    if seconds is None:
        return "--:--"
    seconds = int(max(0.0, seconds))
    hours, rem = divmod(seconds, 3600)
    minutes, secs = divmod(rem, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


class Progress:
    """A session's progress: a live line on a terminal, a line every `every_s` seconds off one,
    nothing when `enabled` is False (`--quiet`). `enabled=True` draws the live line on any
    stream; None chooses by whether the stream is a terminal."""

    def __init__(
        self,
        total: int,
        *,
        token_cap: int,
        dollar_cap: float | None,
        stream: TextIO | None = None,
        enabled: bool | None = None,
        label: str = "",
        tokens: int = 0,
        dollars: float | None = None,
        every_s: float | None = None,
    ) -> None:
        self._out = stream or sys.stderr
        if _off_a_terminal(self._out, enabled):
            self.mode: Mode = "lines"
        else:
            self.mode = "off" if enabled is False else "live"
        self.total = total
        self.token_cap = token_cap
        self.dollar_cap = dollar_cap
        self.label = label
        self.every_s = LINE_EVERY_S if every_s is None else every_s
        self.done = 0
        self.scored = 0
        self.passed = 0
        self.instrument = 0
        self.tokens = tokens  # what the folder had spent when the session began, then counted on
        self.dollars = dollars
        self.retries = 0
        self.last_retry = ""
        self.in_flight = 0
        self._lock = threading.Lock()
        self._start = time.monotonic()
        self._live: Live | None = None
        self._ticker: _Ticker | None = None
        self._beat: Heartbeat | None = None

    def __enter__(self) -> Progress:
        self._start = time.monotonic()
        if self.mode == "live":
            self._live = Live(
                self,
                console=Console(file=self._out),
                auto_refresh=True,
                refresh_per_second=10,
                transient=False,
            )
            self._live.start()
        elif self.mode == "lines" and _BEATING:  # the command's heartbeat shows this frame
            self._beat = _BEATING[-1]
            self._beat.lend(self)
        elif self.mode == "lines":
            self._ticker = _Ticker(self._out, self.every_s, self.line)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._beat is not None:
            self._beat.lend(None)
            self._beat = None
        if self._ticker is not None:
            self._ticker.stop()
            self._ticker = None
        if self._live is not None:
            self._live.refresh()  # the last frame: every episode the session counted
            self._live.stop()
            self._live = None

    def line(self) -> str:
        """The frame as one plain progress line, named by the session's folder."""
        return f"progress{f' {self.label}' if self.label else ''}: {self.frame()}"

    def __rich__(self) -> Text:
        return Text(self.frame())

    def frame(self) -> str:
        """The status line, every figure read at one instant."""
        with self._lock:
            done, total, scored, passed = self.done, self.total, self.scored, self.passed
            instrument, tokens, dollars = self.instrument, self.tokens, self.dollars
            retries, last, in_flight = self.retries, self.last_retry, self.in_flight
        rate = f"{passed / scored:.3f}" if scored else "-"
        elapsed = time.monotonic() - self._start
        eta = (elapsed / done * (total - done)) if done else None
        spend = (
            ""
            if dollars is None
            else (f"  ${dollars:.4f}" + (f"/{self.dollar_cap:g}" if self.dollar_cap else ""))
        )
        retry = f"  retries {retries}" + (f" (last {last})" if retries else "")
        return (
            f"episodes {done}/{total}  in flight {in_flight}  pass {rate}  "
            f"instrument {instrument}  tokens {tokens:,}/{self.token_cap:,}{spend}"
            f"{retry}  eta {_eta(eta)}"
        )

    def episode(
        self, *, instrument: bool, passed: bool, tokens: int, dollars: float | None
    ) -> None:
        """One episode counted (its line is on disk), with the spend that includes it."""
        with self._lock:
            self.done += 1
            if instrument:
                self.instrument += 1
            else:
                self.scored += 1
                self.passed += passed
            self.tokens, self.dollars = tokens, dollars

    def spent(self, tokens: int, dollars: float | None) -> None:
        """Spend that no counted episode carries (episodes abandoned in flight)."""
        with self._lock:
            self.tokens, self.dollars = tokens, dollars

    def flying(self, change: int) -> None:
        """Episodes started (+) or ended (-)."""
        with self._lock:
            self.in_flight += change

    def flight(self, count: int) -> None:
        """Set the episodes in flight (a batch handed to another harness)."""
        with self._lock:
            self.in_flight = count

    def retry(self, kind: str) -> None:
        with self._lock:
            self.retries += 1
            self.last_retry = kind
