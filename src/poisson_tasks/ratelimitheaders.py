"""OpenAI's rate-limit headers, written once for both sides: the runner's pacer reads them
(runner/pacing.py) and the reference endpoint's limiter sends them (reference/ratelimit.py).

Per limited quantity Q (`requests`, `tokens`, and on some deployments `tokens_usage_based`) a
response may carry `x-ratelimit-limit-Q` (the limit per minute), `x-ratelimit-remaining-Q` (what
is left now) and `x-ratelimit-reset-Q` (how long until the window is back to full, as a Go
duration: `6m0s`, `1.5s`, `20ms`). A quantity is read only when its limit is a whole number of at
least 1 and its remaining a whole number of at least 0; anything else (a missing header, Azure's
`-1` and `0` limits, text that is not a number) leaves the quantity out, as if the server had sent
nothing. docs/pacing.md says how the runner uses what it reads.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

QUANTITIES: tuple[str, ...] = ("requests", "tokens", "tokens_usage_based")
MAX_COUNT = 2**53  # a count past this is no count (no JSON number holds it exactly)
MAX_DURATION_S = 366 * 86400.0  # a reset past a year is no reset anyone waits for

_COUNT = re.compile(r"[0-9]{1,16}")  # ASCII digits only: str.isdigit() takes '²' and '٣'
_BARE_SECONDS = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)")
_UNIT_S = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,  # U+00B5, as Go writes it
    "μs": 1e-6,  # U+03BC
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


def names(quantity: str) -> tuple[str, str, str]:
    """The three header names of one quantity: limit, remaining, reset."""
    return (
        f"x-ratelimit-limit-{quantity}",
        f"x-ratelimit-remaining-{quantity}",
        f"x-ratelimit-reset-{quantity}",
    )


_NAMES = tuple((quantity, names(quantity)) for quantity in QUANTITIES)


@dataclass(frozen=True, slots=True)
class Stated:
    """What one response said about one quantity: its limit per minute, what remains, and the
    time until it is back to full (None when that header was missing or unreadable)."""

    quantity: str
    limit: int
    remaining: int
    reset_s: float | None = None


def parse_count(text: str | None) -> int | None:
    """A header's whole number (surrounding spaces allowed); None for anything else."""
    if text is None:
        return None
    text = text.strip()
    if not _COUNT.fullmatch(text):
        return None
    value = int(text)
    return value if value <= MAX_COUNT else None


def parse_duration(text: str | None) -> float | None:
    """Seconds from a Go duration (`6m0s`, `1m30.5s`, `1.5s`, `20ms`, `250us`, `0s`) or a bare
    number of seconds (`0`, `2.5`); None for anything else, a sign included."""
    if text is None:
        return None
    text = text.strip()
    if _BARE_SECONDS.fullmatch(text):
        seconds = float(text)
    else:
        position, seconds = 0, 0.0
        for part in _PART.finditer(text):
            if part.start() != position:
                return None
            seconds += float(part.group(1)) * _UNIT_S[part.group(2)]
            position = part.end()
        if position == 0 or position != len(text):
            return None
    return seconds if math.isfinite(seconds) and seconds <= MAX_DURATION_S else None


def format_duration(seconds: float) -> str:
    """A duration as OpenAI writes one: whole milliseconds below a second (rounded up, so a wait
    is never understated), else hours, minutes and seconds to the millisecond (`1m0.5s`, `6m0s`)."""
    if seconds <= 0:
        return "0s"
    millis = math.ceil(round(seconds * 1000, 6))
    if millis < 1000:
        return f"{millis}ms"
    hours, millis = divmod(millis, 3_600_000)
    minutes, millis = divmod(millis, 60_000)
    text = f"{millis / 1000:.3f}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{hours}h{minutes}m{text}"
    if minutes:
        return f"{minutes}m{text}"
    return text


def read_stated(headers: Mapping[str, str]) -> tuple[Stated, ...]:
    """Every quantity a response's headers state in full (lower-case names, or a mapping whose
    lookups ignore case, as httpx's do); empty when the server sends none."""
    out: list[Stated] = []
    for quantity, (limit_name, remaining_name, reset_name) in _NAMES:
        said = headers.get(limit_name)
        if said is None:  # the common case, a server that states nothing: one look-up each
            continue
        limit = parse_count(said)
        remaining = parse_count(headers.get(remaining_name))
        if limit is None or limit < 1 or remaining is None:
            continue
        out.append(
            Stated(quantity, limit, min(remaining, limit), parse_duration(headers.get(reset_name)))
        )
    return tuple(out)


def stated_headers(stated: Stated) -> tuple[tuple[str, str], ...]:
    """The three headers that state one quantity, as a server sends them."""
    limit_name, remaining_name, reset_name = names(stated.quantity)
    reset = format_duration(stated.reset_s or 0.0)
    return (
        (limit_name, str(stated.limit)),
        (remaining_name, str(stated.remaining)),
        (reset_name, reset),
    )
