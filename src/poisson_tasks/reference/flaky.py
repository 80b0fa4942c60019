"""The flaky policy's serving faults: HTTP 500, HTTP 429 and slow answers at declared rates.

A fault is drawn per request attempt: SHA-256 of (the request body's BLAKE2b-128, the attempt
number), where the attempt number counts how often the server has already seen those exact body
bytes. A retry of a request is a fresh draw, and a test that knows the bytes it sends can predict
every answer.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Literal

from poisson_tasks.policycatalogue import PolicySpec
from poisson_tasks.reference.policies import draw

Fault = Literal["http_500", "http_429", "slow"]
_REMEMBERED = 100_000  # bodies whose attempt count is kept; the oldest is forgotten first


def flaky_fault(body_digest: str, attempt: int, spec: PolicySpec) -> Fault | None:
    """The fault (or None) of attempt `attempt` (0 first) of the body with this digest."""
    uniform = draw("flaky", body_digest, attempt)
    edge = spec.get("p_500")
    if uniform < edge:
        return "http_500"
    edge += spec.get("p_429")
    if uniform < edge:
        return "http_429"
    edge += spec.get("p_slow")
    if uniform < edge:
        return "slow"
    return None


class AttemptCounter:
    """How many times each request body has been seen, bounded; safe across threads."""

    def __init__(self, limit: int = _REMEMBERED) -> None:
        self._seen: OrderedDict[str, int] = OrderedDict()
        self._limit = limit
        self._lock = threading.Lock()

    def next(self, body_digest: str) -> int:
        """The attempt number of this arrival of the body (0 on its first)."""
        with self._lock:
            seen = self._seen.pop(body_digest, 0)
            self._seen[body_digest] = seen + 1
            if len(self._seen) > self._limit:
                self._seen.popitem(last=False)
            return seen
