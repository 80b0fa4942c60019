"""Regenerate tests/golden/task_ids.json after a deliberate change to the generator (review the diff)."""

from __future__ import annotations

import json
from pathlib import Path

from poisson_tasks.golden import golden_sample
from poisson_tasks.hashes import generator_hash

out = Path(__file__).resolve().parent.parent / "tests" / "golden" / "task_ids.json"
doc = {"generator_hash": generator_hash(), "tasks": golden_sample()}
out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
print(f"wrote {len(doc['tasks'])} tasks to {out}")
