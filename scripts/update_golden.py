"""Regenerate the golden files after a deliberate change to the generator (review the diff).

    python scripts/update_golden.py                      # tests/golden/task_ids.json
    python scripts/update_golden.py --sweep-fingerprint  # tests/golden/sweep_fingerprint.json

The first is what a generator-hash move needs (task ids move, content digests must not). The
second rewrites the full-sweep fingerprint, which masks every hash and so must NOT move for a
hash move or a speed-up: rewrite it only when a change to task content or to the pin ledger's
verdicts is the point of the commit, and say so in the commit message.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from poisson_tasks.golden import fingerprint_differences, golden_sample, sweep_fingerprint
from poisson_tasks.hashes import generator_hash

GOLDEN = Path(__file__).resolve().parent.parent / "tests" / "golden"


def write_task_ids() -> None:
    out = GOLDEN / "task_ids.json"
    doc = {"generator_hash": generator_hash(), "tasks": golden_sample()}
    out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {len(doc['tasks'])} tasks to {out}")


def write_sweep_fingerprint() -> None:
    out = GOLDEN / "sweep_fingerprint.json"
    now = sweep_fingerprint()
    if out.is_file():
        changed = fingerprint_differences(now, json.loads(out.read_text(encoding="utf-8")))
        print("\n".join(changed) if changed else "no arm or contrast changed")
    out.write_text(json.dumps(now.as_json(), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {len(now.arms)} arms and {len(now.contrasts)} contrasts to {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--sweep-fingerprint",
        action="store_true",
        help="rewrite tests/golden/sweep_fingerprint.json instead (only for a deliberate "
        "change to task content or pin verdicts)",
    )
    if parser.parse_args().sweep_fingerprint:
        write_sweep_fingerprint()
    else:
        write_task_ids()


if __name__ == "__main__":
    main()
