"""The reference endpoint's rate limit: requests and tokens per minute, enforced as an API does.

Each limited quantity is a bucket that holds at most its limit and refills continuously at
limit / 60 per second; OpenAI's reset headers describe such a window (the time until it is back to
full). A request is admitted when every bucket holds its charge: 1 request, and the tokens its
answer reports (usage.total_tokens), so the limit meters exactly the tokens a study spends. An
admitted request is charged, and its response states every bucket in OpenAI's headers
(ratelimitheaders). One that is not is answered 429 `rate_limit_exceeded` in OpenAI's wording,
charged nothing, with the same headers and (unless `retry_after` is off, as some Azure deployments
send none) Retry-After and retry-after-ms: the time until the short bucket holds the charge.

The buckets start full, as an account that was idle, or empty (`drained`), as one another client
has just used up. Two departures a test or a benchmark may ask for. `changes`: limits that change a given number of
seconds after the first request (a tier raised or lowered mid-study); a bucket keeps its level,
cut to a lower limit. `reset_late_s`: the buckets really refill at limit / (60 + reset_late_s) per
second while the headers state the limit per minute and reset times at that rate, so every reset
arrives late (a drained bucket announced full in 60 s is full after 60 + reset_late_s s).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from poisson_tasks.errors import ReferenceServerError
from poisson_tasks.ratelimitheaders import Stated, format_duration, stated_headers

WINDOW_S = 60.0  # the limits are per minute


@dataclass(frozen=True, slots=True)
class LimitChange:
    """From `after_s` seconds after the first request on, these limits (None: not limited)."""

    after_s: float
    rpm: int | None
    tpm: int | None


@dataclass(frozen=True, slots=True)
class RateLimit:
    """What the endpoint enforces: requests and tokens per minute (None: that one is not
    limited), the limits' later changes, how late every reset arrives, and whether a 429 says
    when to retry."""

    rpm: int | None = None
    tpm: int | None = None
    changes: tuple[LimitChange, ...] = ()
    reset_late_s: float = 0.0
    retry_after: bool = True
    drained: bool = False  # the buckets start empty: an account another client has just used up

    def __post_init__(self) -> None:
        for name, value in (("rpm", self.rpm), ("tpm", self.tpm)):
            if value is not None and value < 1:
                raise ReferenceServerError(f"--{name} must be at least 1, got {value}")
        for change in self.changes:
            if change.after_s < 0 or any(v is not None and v < 1 for v in (change.rpm, change.tpm)):
                raise ReferenceServerError(
                    f"a limit change must come at 0 s or later with limits of at least 1, "
                    f"got {change}"
                )
        if not (math.isfinite(self.reset_late_s) and self.reset_late_s >= 0):
            raise ReferenceServerError(f"reset_late_s must be 0 or more, got {self.reset_late_s}")

    def at(self, elapsed: float) -> tuple[int | None, int | None]:
        """(rpm, tpm) in force `elapsed` seconds after the first request."""
        rpm, tpm = self.rpm, self.tpm
        for change in sorted(self.changes, key=lambda later: later.after_s):
            if elapsed >= change.after_s:
                rpm, tpm = change.rpm, change.tpm
        return rpm, tpm


@dataclass(slots=True)
class _Bucket:
    limit: int
    level: float


@dataclass(frozen=True, slots=True)
class Admission:
    """The limiter's answer to one request: admitted or not, the headers its response carries,
    and for a refused one the quantity that was short and the error's message."""

    admitted: bool
    headers: tuple[tuple[str, str], ...]
    short: str | None = None
    message: str = ""


class Limiter:
    """The buckets of one endpoint. Not thread-safe: the reference server calls it from its one
    event loop."""

    def __init__(self, limit: RateLimit, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = limit
        self._clock = clock
        self._start: float | None = None
        self._at = 0.0
        self._buckets: dict[str, _Bucket] = {}

    def _refill(self, now: float) -> None:
        """Bring every bucket to `now`, under the limits in force now."""
        if self._start is None:
            self._start = self._at = now
        rpm, tpm = self.limit.at(now - self._start)
        elapsed = max(0.0, now - self._at)
        self._at = now
        for quantity, limit in (("requests", rpm), ("tokens", tpm)):
            bucket = self._buckets.get(quantity)
            if limit is None:
                self._buckets.pop(quantity, None)
                continue
            if bucket is None:
                self._buckets[quantity] = _Bucket(limit, 0.0 if self.limit.drained else limit)
                continue
            bucket.level = min(float(limit), bucket.level + self._rate(bucket) * elapsed)
            bucket.limit = limit

    def _rate(self, bucket: _Bucket) -> float:
        """How fast a bucket really refills, per second (slower than stated when resets are late)."""
        return bucket.limit / (WINDOW_S + self.limit.reset_late_s)

    def _headers(self) -> tuple[tuple[str, str], ...]:
        out: list[tuple[str, str]] = []
        for quantity, bucket in self._buckets.items():
            level = max(0.0, bucket.level)
            stated = Stated(
                quantity,
                bucket.limit,
                math.floor(level),
                (bucket.limit - level) * WINDOW_S / bucket.limit,
            )
            out += stated_headers(stated)
        return tuple(out)

    def admit(self, tokens: int) -> Admission:
        """Charge one request of `tokens` tokens if every bucket holds it; else refuse it."""
        self._refill(self._clock())
        charge = {"requests": 1.0, "tokens": float(tokens)}
        short = [q for q, b in self._buckets.items() if b.level < charge[q]]
        if not short:
            for quantity, bucket in self._buckets.items():
                bucket.level -= charge[quantity]
            return Admission(True, self._headers())
        # a charge above its limit never fits, and no wait helps it
        too_large = [q for q in short if charge[q] > self._buckets[q].limit]
        quantity = (too_large or short)[0]
        bucket = self._buckets[quantity]
        fits = not too_large
        wait = max(
            (charge[q] - self._buckets[q].level) / self._rate(self._buckets[q]) for q in short
        )
        unit = "requests per min (RPM)" if quantity == "requests" else "tokens per min (TPM)"
        used = bucket.limit - math.floor(max(0.0, bucket.level))
        if fits:
            message = (
                f"Rate limit reached on {unit}: Limit {bucket.limit}, Used {used}, Requested "
                f"{int(charge[quantity])}. Please try again in {format_duration(wait)}."
            )
        else:
            message = (
                f"Request too large on {unit}: Limit {bucket.limit}, Requested "
                f"{int(charge[quantity])}. The request can never fit this limit."
            )
        headers = self._headers()
        if self.limit.retry_after and fits:
            headers += (
                ("retry-after", str(math.ceil(wait))),
                ("retry-after-ms", str(math.ceil(wait * 1000))),
            )
        return Admission(False, headers, quantity, message)
