"""Refresh the generated examples in docs/: every `<!-- show:ARM:SEED -->` block gets the live
`poisson-tasks generate ARM --seed SEED --show` output (the bundle with its pins, as the command
measures it), and docs/glossary.md is written from poisson_tasks.glossary. tests/test_docs.py
checks both are current."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from poisson_tasks.glossary import GLOSSARY_PAGE, glossary_markdown
from poisson_tasks.pins import pinned_bundle
from poisson_tasks.show import render_bundle

BLOCK = re.compile(
    r"(<!-- show:(?P<arm>[^:]+:[^:]+):(?P<seed>\d+) -->\n)(?P<body>.*?)(<!-- /show -->)", re.S
)


def refreshed(text: str) -> str:
    def sub(m: re.Match[str]) -> str:
        out = render_bundle(pinned_bundle(m["arm"], int(m["seed"])))
        return f"{m.group(1)}```text\n{out}\n```\n{m.group(5)}"

    return BLOCK.sub(sub, text)


if __name__ == "__main__":
    root = Path(__file__).resolve().parent.parent
    docs = root / "docs"
    page = root / GLOSSARY_PAGE
    if not page.is_file() or page.read_text(encoding="utf-8") != glossary_markdown():
        page.write_text(glossary_markdown(), encoding="utf-8")
        print(f"wrote {page}", file=sys.stderr)
    for path in sorted(docs.glob("*.md")):
        old = path.read_text(encoding="utf-8")
        new = refreshed(old)
        if new != old:
            path.write_text(new, encoding="utf-8")
            print(f"refreshed {path}", file=sys.stderr)
