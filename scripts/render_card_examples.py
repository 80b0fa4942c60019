"""Refresh the example cards in docs/: every `<!-- card-example:KIND -->` block gets the live
rendering of the synthetic example run (tests/synthetic_runs.py: example_run), which is a made-up
model's synthetic outcomes, never a result. tests/test_calibration_docs.py checks they are current.

KIND is `markdown` (the whole card.md) or `cell-json` (card.json's cell for depth:d3).
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from synthetic_runs import FAKE_HASH, example_run  # noqa: E402

from poisson_tasks.calibration import card_from_run, card_json, render_document  # noqa: E402
from poisson_tasks.calibration.artifact import Artifact  # noqa: E402

BLOCK = re.compile(
    r"(?P<open><!-- card-example:(?P<kind>[a-z-]+) -->\n)(?P<body>.*?)"
    r"(?P<close><!-- /card-example -->)",
    re.S,
)


@cache
def example_card() -> Artifact:
    with tempfile.TemporaryDirectory() as tmp:
        folder = example_run(Path(tmp))
        return card_from_run(folder, installed_generator_hash=FAKE_HASH, published=[])


def render(kind: str) -> str:
    card = example_card()
    if kind == "markdown":
        return "````markdown\n" + render_document(card) + "````\n"
    if kind == "cell-json":
        cell = json.loads(card_json(card))["cells"][2]
        return "```json\n" + json.dumps(cell, indent=2, sort_keys=True) + "\n```\n"
    raise ValueError(f"unknown card example {kind!r}")


def refreshed(text: str) -> str:
    return BLOCK.sub(lambda m: m["open"] + render(m["kind"]) + m["close"], text)


if __name__ == "__main__":
    for path in sorted((ROOT / "docs").glob("*.md")):
        old = path.read_text(encoding="utf-8")
        new = refreshed(old)
        if new != old:
            path.write_text(new, encoding="utf-8")
            print(f"refreshed {path}", file=sys.stderr)
