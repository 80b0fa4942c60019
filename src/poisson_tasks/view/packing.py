"""How the page carries data: JSON, scrubbed, zlib-compressed and base64-encoded, or JSON escaped.

A packed value sits in a non-executing <script type="application/octet-stream"> and the page's
script inflates it with DecompressionStream("deflate"); an escaped one sits in a
<script type="application/json"> that no string can close.
"""

from __future__ import annotations

import base64
import zlib
from typing import Any

import orjson

from poisson_tasks.credentials import scrub

__all__ = ["LEVEL", "escaped_json", "pack", "scrubbed"]

LEVEL = 1  # zlib level: 6 makes the noisy report ~0.9 MB smaller and its write ~0.5 s slower


def scrubbed(value: Any, secret: str | None) -> Any:
    """`value` with the run's key redacted: the runner's one scrubber, for all the page holds."""
    return scrub(value, secret)


def pack(value: Any, secret: str | None = None) -> str:
    """`value`, scrubbed, as packed page data."""
    raw = orjson.dumps(scrubbed(value, secret), option=orjson.OPT_NON_STR_KEYS)
    return base64.b64encode(zlib.compress(raw, LEVEL)).decode("ascii")


def escaped_json(value: Any) -> str:
    """JSON that cannot close the <script> it sits in: "<", ">" and "&" as \\u escapes."""
    raw = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
    return (
        raw.replace(b"<", b"\\u003c").replace(b">", b"\\u003e").replace(b"&", b"\\u0026").decode()
    )
