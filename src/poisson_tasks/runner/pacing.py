"""Pacing: new requests held so a study runs at the account's rate limit without provoking 429s.

With `execution.pace: headers` (the default) the runner reads OpenAI's rate-limit headers from
every response (ratelimitheaders) and keeps, per quantity the server states (requests, tokens), a
bucket that holds at most the stated limit and refills at the limit per minute. A request is sent
when every bucket holds its charge (1 request; its prompt's tokens as the pinned tokenizer counts
them plus the declared completion limit, `decoding.max_completion_tokens`, which no answer
exceeds), and its charge is taken then. Each response sets the bucket to what the server says
remains, less the charges of the requests sent after it that are still in flight (the server had
not counted them). The episodes in flight stay at most `execution.concurrency`: the pacer only
delays, and never holds a request longer than `execution.retry_after_max_s` (300 s when left out),
the runner's ceiling on every wait the server asks for.

A 429 holds every new request for its Retry-After. A 429 that the pacer let through means the
server refills slower than it states (a reset that comes late, another client on the account): the
pacer then counts on SLOWDOWN of the rate it counted on, never below FLOOR of the stated one, and
climbs back by RECOVERY_PER_S.

Until a response states a limit, nothing is held, no token is counted, and every request goes out
as it would with `pace: off`: a server that sends no rate-limit headers (vLLM, Ollama, llama.cpp,
the reference endpoint unless started with a limit) is driven exactly as before pacing existed.
The reset headers are read but do not move the schedule: a reset may be rounded or arrive late,
and the remaining count every response carries is the server's own word. docs/pacing.md gives
the reasons and the measurements.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from poisson_tasks.ratelimitheaders import Stated, read_stated
from poisson_tasks.runfolder import PacingRecord

WINDOW_S = 60.0  # a stated limit is per minute
SLOWDOWN = 0.8  # a 429 the pacer let through scales its refill rates by this ...
RECOVERY_PER_S = 0.05 / 60  # ... and they climb back by 5% of the stated rate a minute
FLOOR = 0.25  # never below this share of the stated rate: past it, 429s and Retry-After rule


@dataclass(slots=True)
class Ticket:
    """One request the pacer let through: its place in sending order and its charge (its tokens
    are counted on first use, so a request sent before any limit was stated costs no count unless
    a limit arrives while it is in flight)."""

    count: Callable[[], int]
    seq: int = -1
    paced: bool = False  # sent under a stated limit (not before the first one came)
    _tokens: int | None = None

    def tokens(self) -> int:
        if self._tokens is None:
            self._tokens = self.count()
        return self._tokens

    def charge(self, quantity: str) -> float:
        return 1.0 if quantity == "requests" else float(self.tokens())


@dataclass(slots=True)
class Bucket:
    """What the pacer believes one quantity's bucket holds: `level` at time `at`, refilling at
    `limit` per minute up to `limit`."""

    limit: int
    level: float
    at: float

    def level_at(self, now: float, share: float = 1.0) -> float:
        """The level at `now`, refilled at `share` of the stated rate since `at`."""
        rate = self.limit / WINDOW_S * share
        return min(float(self.limit), self.level + rate * max(0.0, now - self.at))


@dataclass
class Buckets:
    """The pacer's state, with every time given: a pure state machine the async Pacer drives."""

    buckets: dict[str, Bucket] = field(default_factory=dict)
    in_flight: dict[int, Ticket] = field(default_factory=dict)
    paused_until: float = 0.0
    stated: dict[str, int] = field(default_factory=dict)  # the last limit stated, per quantity
    limit_changes: int = 0
    slowdowns: int = 0
    _share: float = 1.0  # of the stated refill rate, as of _share_at (see share())
    _share_at: float = 0.0
    _cut_from: int = 0  # the first request sent after the last cut: older 429s do not cut again
    _applied: dict[str, int] = field(default_factory=dict)  # the newest request each came from
    _next: int = 0

    @property
    def active(self) -> bool:
        """Whether any limit has been stated (before that, nothing is held)."""
        return bool(self.buckets)

    def share(self, now: float) -> float:
        """The share of the stated refill rates the pacer counts on: 1 until a 429 comes through
        the pacer (the server refills slower than it states: a reset that comes late, another
        client on the account), then cut by SLOWDOWN per such 429 and climbing back with time."""
        return min(1.0, self._share + RECOVERY_PER_S * max(0.0, now - self._share_at))

    def _bring(self, now: float) -> float:
        """Every bucket brought to `now` (so a change of share applies from now on)."""
        share = self.share(now)
        for bucket in self.buckets.values():
            bucket.level, bucket.at = bucket.level_at(now, share), now
        return share

    def wait(self, now: float, ticket: Ticket) -> float:
        """Seconds until every bucket holds the ticket's charge and no 429 pause holds it (0: now).
        A charge above a limit waits for that bucket to be full: the server will refuse it,
        and the retries it meets are bounded as any other's."""
        wait = max(0.0, self.paused_until - now)
        share = self.share(now)
        for quantity, bucket in self.buckets.items():
            need = min(ticket.charge(quantity), float(bucket.limit))
            have = bucket.level_at(now, share)
            if have < need:
                wait = max(wait, (need - have) * WINDOW_S / (bucket.limit * share))
        return wait

    def send(self, now: float, ticket: Ticket) -> Ticket:
        """The ticket goes out now: numbered, charged to every bucket, counted in flight."""
        ticket.seq, self._next = self._next, self._next + 1
        if self.buckets:
            ticket.paced = True
            self._bring(now)
            for quantity, bucket in self.buckets.items():
                bucket.level -= ticket.charge(quantity)
        self.in_flight[ticket.seq] = ticket
        return ticket

    def observe(self, now: float, ticket: Ticket, stated: tuple[Stated, ...]) -> None:
        """A response to `ticket` arrived stating `stated`: each bucket is set to what remains,
        less the charges of requests sent after this one and still in flight."""
        self.in_flight.pop(ticket.seq, None)
        for said in stated:
            quantity = said.quantity
            later = sum(t.charge(quantity) for s, t in self.in_flight.items() if s > ticket.seq)
            level = said.remaining - later
            previous = self.stated.get(quantity)
            if previous is not None and previous != said.limit:
                self.limit_changes += 1
            self.stated[quantity] = said.limit
            bucket = self.buckets.get(quantity)
            if bucket is None or ticket.seq >= self._applied.get(quantity, -1):
                self.buckets[quantity] = Bucket(said.limit, level, now)
                self._applied[quantity] = ticket.seq
            else:  # an answer older than the one applied: it may only lower the level
                current = bucket.level_at(now, self.share(now))
                bucket.level, bucket.at, bucket.limit = min(current, level), now, said.limit

    def refused(
        self, now: float, ticket: Ticket, stated: tuple[Stated, ...], retry_after: float | None
    ) -> None:
        """A 429 answered `ticket`: its statement applied as any response's, and (once a limit has
        been stated) every new request held for its Retry-After; without either, every bucket is
        taken as empty."""
        self.observe(now, ticket, stated)
        share = self._bring(now)
        if ticket.paced and ticket.seq >= self._cut_from:
            # the pacer let it through: the server refills slower than the pacer counted on
            self._share, self._share_at = max(FLOOR, share * SLOWDOWN), now
            self._cut_from = self._next
            self.slowdowns += 1
        if retry_after is not None:
            self.paused_until = max(self.paused_until, now + retry_after)
        elif not stated:
            for bucket in self.buckets.values():
                bucket.level = min(bucket.level, 0.0)

    def release(self, ticket: Ticket) -> None:
        """The request ended without a response (a timeout, a dropped connection, a stop)."""
        self.in_flight.pop(ticket.seq, None)


class Pacer:
    """Holds requests by the buckets (see the module docstring). One per endpoint, used from one
    event loop. `ceiling_s` (execution.retry_after_max_s) bounds how long one request is held, as
    it bounds every other wait the runner takes on the server's word."""

    def __init__(self, ceiling_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.state = Buckets()
        self._ceiling = ceiling_s
        self._clock = clock
        self._lock = asyncio.Lock()
        self._changed = asyncio.Event()
        self.held = 0
        self.held_s = 0.0

    async def acquire(self, count: Callable[[], int]) -> Ticket:
        """Wait until the request may go (at once while no limit is stated); its ticket."""
        ticket = Ticket(count)
        if not self.state.active:
            return self.state.send(self._clock(), ticket)
        async with self._lock:  # first come, first sent
            started = time.perf_counter()
            deadline = self._clock() + self._ceiling  # no request is held longer
            waited = False
            while True:
                now = self._clock()
                wait = min(self.state.wait(now, ticket), deadline - now)
                if wait <= 0:
                    break
                waited = True
                self._changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), wait)
            if waited:
                self.held += 1
                self.held_s += time.perf_counter() - started
            return self.state.send(now, ticket)

    def answered(self, ticket: Ticket, headers: Mapping[str, str]) -> None:
        """A response (any status but 429) arrived for `ticket`."""
        self.state.observe(self._clock(), ticket, read_stated(headers))
        self._changed.set()

    def refused(
        self, ticket: Ticket, headers: Mapping[str, str], retry_after: float | None
    ) -> None:
        """A 429 arrived for `ticket`; `retry_after` as the endpoint read it (None: not sent)."""
        wait = None if retry_after is None else min(retry_after, self._ceiling)
        self.state.refused(self._clock(), ticket, read_stated(headers), wait)
        self._changed.set()

    def release(self, ticket: Ticket) -> None:
        self.state.release(ticket)

    def record(self, pace: str) -> PacingRecord:
        """What this session's pacing did, for its line in run.json."""
        return PacingRecord(
            pace=pace,
            applied=self.state.active,
            stated=dict(sorted(self.state.stated.items())),
            limit_changes=self.state.limit_changes,
            slowdowns=self.state.slowdowns,
            held=self.held,
            held_s=round(self.held_s, 3),
        )
