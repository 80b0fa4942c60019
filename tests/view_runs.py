"""Small run folders for the report's tests, cut from a published reference-policy run's records.

A folder keeps a few arms and seeds of reference-noisy (every line as the runner wrote it, a
scripted baseline's, never a model's) and its header narrowed to match; `edit` may change a line
on the way (the hostile transcripts of the XSS and redaction tests are made so, and say so).
"""

from __future__ import annotations

import functools
import gzip
import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from poisson_tasks.bundle import digest
from poisson_tasks.calibration.manifest import published_dir
from poisson_tasks.prereg import seed_list_hash

SOURCE = "reference-noisy"
_WHO = re.compile(rb'^\{"arm_id":"([^"]+)","seed":(\d+),')


@functools.cache
def _source_lines() -> tuple[tuple[str, int, bytes], ...]:
    """(arm, seed, line) of every published line, read once per process."""
    out = []
    with gzip.open(published_dir() / SOURCE / "episodes.jsonl.gz", "rb") as fh:
        for raw in fh:
            who = _WHO.match(raw)
            assert who is not None, raw[:80]
            out.append((who[1].decode(), int(who[2]), raw))
    return tuple(out)


def small_run(
    folder: Path,
    arms: Sequence[str] = ("depth:d1", "depth:d2", "depth:d3"),
    seeds: int = 4,
    edit: Callable[[dict[str, Any]], None] | None = None,
    header_edit: Callable[[dict[str, Any]], None] | None = None,
) -> Path:
    """A run folder of `arms` x the first `seeds` seeds x every attempt of the published run."""
    source = published_dir() / SOURCE
    header = json.loads((source / "run.json").read_text())
    kept_seeds = header["seeds"][:seeds]
    header["arms"] = list(arms)
    header["seeds"] = kept_seeds
    # the stored pre-registration narrowed to match, as a run of the smaller plan records it (a
    # shorter seed list is a prefix of the longer, so `tasks` alone cuts it)
    design = header["preregistration"]["design"]
    design.update(arms=list(arms), tasks=seeds, seed_list_hash=seed_list_hash(kept_seeds))
    header["seed_list_hash"] = design["seed_list_hash"]
    if header_edit is not None:
        header_edit(header)
    header["preregistration_hash"] = digest(header["preregistration"])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "run.json").write_text(json.dumps(header, indent=2, sort_keys=True) + "\n")
    wanted = set(kept_seeds)
    lines = []
    for arm, seed, raw in _source_lines():
        if arm in arms and seed in wanted:
            if edit is None:
                lines.append(raw.decode())
                continue
            doc = json.loads(raw)
            edit(doc)
            lines.append(json.dumps(doc) + "\n")
    (folder / "episodes.jsonl").write_text("".join(lines))
    return folder
