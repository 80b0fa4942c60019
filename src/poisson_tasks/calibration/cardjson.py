"""The card's canonical JSON: the same Artifact gives the same bytes on every platform and process.

The rule, applied to every float in the card (and nothing else):
1. round to 6 decimal places with Python's `round(x, 6)`, which is correctly rounded from the
   float's exact binary value (ties to even), so it does not depend on the platform's libm;
2. write `-0.0` as `0.0`; refuse NaN and infinities (a figure that was not measured is null);
3. write the result with `repr`, the shortest text that reads back as the same float.
Integers, booleans, strings and null are written as they are. Keys are sorted, the indent is two
spaces, non-ASCII text is written as UTF-8, and the file ends with one newline.
"""

from __future__ import annotations

import json
import math
from typing import Any

from poisson_tasks.calibration.artifact import Artifact

DECIMALS = 6

__all__ = ["DECIMALS", "card_json", "read_card_json", "round_figure", "rounded"]


def round_figure(value: float) -> float:
    """The card's one rounding rule for a float (see the module docstring)."""
    if not math.isfinite(value):
        raise ValueError(f"a card holds no NaN or infinity, got {value!r}")
    rounded = round(float(value), DECIMALS)
    return 0.0 if rounded == 0.0 else rounded


def rounded(value: Any) -> Any:
    """Apply round_figure to every float inside nested dicts and lists."""
    if isinstance(value, bool) or value is None or isinstance(value, int | str):
        return value
    if isinstance(value, float):
        return round_figure(value)
    if isinstance(value, dict):
        return {str(k): rounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [rounded(v) for v in value]
    raise TypeError(f"a card holds no {type(value).__name__}")


def card_json(artifact: Artifact) -> bytes:
    """The canonical bytes of card.json for an Artifact."""
    data = rounded(artifact.model_dump(mode="json"))
    text = json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False)
    return (text + "\n").encode("utf-8")


def read_card_json(data: bytes | str) -> Artifact:
    """An Artifact read back from card.json bytes."""
    return Artifact.model_validate_json(data)
