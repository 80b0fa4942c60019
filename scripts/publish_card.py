"""Store a finished run folder as a published card in src/poisson_tasks/data/published/, then render every card again.

    .venv/bin/python scripts/publish_card.py RUN_DIR NAME
    .venv/bin/python scripts/publish_card.py runs/reference-oracle reference-oracle

Copies run.json, stores episodes.jsonl gzip-compressed (mtime 0, so the bytes repeat), adds NAME to
src/poisson_tasks/data/published/manifest.json, and writes card.json and card.md for every listed card (a new card can
change the others' "does not claim" lines). `poisson-tasks card --published` then checks them.
"""

from __future__ import annotations

import sys
from pathlib import Path

from poisson_tasks.calibration.published import check_published, store_published
from poisson_tasks.errors import PoissonError


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        folder = store_published(Path(argv[0]), argv[1])
        checks = check_published()
    except PoissonError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(f"stored {folder}")
    for c in checks:
        print(("ok: " if c.ok else "error: ") + c.message)
    return 0 if all(c.ok for c in checks if c.name == argv[1]) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
