"""Store a finished run folder as a published card in calibration/, then render every card again.

    .venv/bin/python scripts/publish_card.py RUN_DIR NAME
    .venv/bin/python scripts/publish_card.py runs/reference-oracle reference-oracle
    .venv/bin/python scripts/publish_card.py --render      # after a change to what a card shows

Copies run.json, stores episodes.jsonl gzip-compressed (mtime 0, so the bytes repeat), adds NAME to
calibration/manifest.json, and writes card.json and card.md for every listed card (a new card can
change the others' "does not claim" lines). `--render` only writes card.json and card.md of every
listed card again from its stored records (no episode is run). Both then check every card: its
files rebuilt byte for byte, and its tasks regenerated on this build with the ids and opening
messages its records hold (a card whose generator moved must be re-run, not re-rendered).
`poisson-tasks card --published` checks the first; tests/test_published_tasks.py (slow) the second. calibration/ is the one copy in git; a wheel carries it as package data
(setup.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

from poisson_tasks.calibration.published import (
    check_published,
    store_published,
    write_published_cards,
)
from poisson_tasks.calibration.regenerated import check_published_tasks
from poisson_tasks.errors import PoissonError

CALIBRATION = Path(__file__).resolve().parents[1] / "calibration"


def main(argv: list[str]) -> int:
    if argv == ["--render"]:
        names = write_published_cards(CALIBRATION)
        print(f"rendered {', '.join(names)} in {CALIBRATION}")
        checks = check_published(CALIBRATION) + check_published_tasks(CALIBRATION)
        for c in checks:
            print(("ok: " if c.ok else "error: ") + c.message)
        return 0 if all(c.ok for c in checks) else 1
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        folder = store_published(Path(argv[0]), argv[1], CALIBRATION)
        checks = check_published(CALIBRATION) + check_published_tasks(CALIBRATION)
    except PoissonError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(f"stored {folder}")
    for c in checks:
        print(("ok: " if c.ok else "error: ") + c.message)
    return 0 if all(c.ok for c in checks if c.name == argv[1]) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
