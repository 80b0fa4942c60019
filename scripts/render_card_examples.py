"""Refresh the example cards in docs/ from the published reference cards.

Every `<!-- card-example:KIND:CARD[:WHAT] -->` block gets a live rendering of the stored card.json
of the published card CARD (calibration/CARD, a reference-policy card: a scripted baseline, not a
model). `poisson-tasks card --published` checks those card.json files against their records byte
for byte, so the examples are what the records give. tests/test_calibration_docs.py checks that
the blocks are current.

KIND is `knob` (WHAT is a knob: its level table, adjacent comparisons and ordering, as card.md
prints them) or `cell-json` (WHAT is an arm id: that cell of card.json).
"""

from __future__ import annotations

import json
import re
import sys
from functools import cache
from pathlib import Path

from poisson_tasks.calibration import card_json, read_card_json
from poisson_tasks.calibration.artifact import Artifact
from poisson_tasks.calibration.output import CARD_JSON
from poisson_tasks.calibration.published import PUBLISHED_DIR
from poisson_tasks.calibration.sections.knob import render_knob

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(
    r"(?P<open><!-- card-example:(?P<kind>[a-z-]+):(?P<card>[a-z0-9-]+)(?::(?P<what>[a-z0-9:@+()-]+))?"
    r" -->\n)(?P<body>.*?)(?P<close><!-- /card-example -->)",
    re.S,
)


@cache
def published_card(name: str) -> Artifact:
    return read_card_json((PUBLISHED_DIR / name / CARD_JSON).read_bytes())


def render(kind: str, name: str, what: str | None) -> str:
    card = published_card(name)
    if kind == "knob" and what:
        return "````markdown\n" + render_knob(card, what) + "````\n"
    if kind == "cell-json" and what:
        cells = json.loads(card_json(card))["cells"]
        (cell,) = [c for c in cells if c["arm_id"] == what]
        return "```json\n" + json.dumps(cell, indent=2, sort_keys=True) + "\n```\n"
    raise ValueError(f"unknown card example {kind!r} {name!r} {what!r}")


def refreshed(text: str) -> str:
    return BLOCK.sub(
        lambda m: m["open"] + render(m["kind"], m["card"], m["what"]) + m["close"], text
    )


if __name__ == "__main__":
    for path in sorted((ROOT / "docs").glob("*.md")):
        old = path.read_text(encoding="utf-8")
        new = refreshed(old)
        if new != old:
            path.write_text(new, encoding="utf-8")
            print(f"refreshed {path}", file=sys.stderr)
