"""The published folder's manifest and what each stored card was measured on.

Below both build.py (which reads `published_facts` for its "does not claim" lines) and
published.py (which rebuilds and stores the cards), so neither imports the other's caller.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

from poisson_tasks.calibration.artifact import PublishedFacts
from poisson_tasks.calibration.provenance import provenance_from_header
from poisson_tasks.errors import PublishedCardError
from poisson_tasks.runfolder import is_run_folder, open_run

MANIFEST = "manifest.json"
SHIPPED = ("data", "published")  # inside the package: where a wheel carries the cards (setup.py)
CHECKOUT = "calibration"  # beside src/ in the repository: the one copy in git


def locate_published(package: Path) -> Path:
    """The published folder for a package at `package`: a wheel's copy where there is one
    (an installed package), else the checkout's top-level calibration/ (an editable install)."""
    shipped = package.joinpath(*SHIPPED)
    return shipped if (shipped / MANIFEST).is_file() else package.parents[1] / CHECKOUT


PUBLISHED_DIR = locate_published(Path(__file__).resolve().parents[1])
MANIFEST_FORMAT = "poisson-tasks/published@1"
CARD_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")


def published_dir(directory: Path | None = None) -> Path:
    """The published folder: `directory`, else the installed package's copy or the checkout's."""
    return PUBLISHED_DIR if directory is None else Path(directory)


def read_manifest(directory: Path | None = None) -> list[str]:
    """The names of the published cards; PublishedCardError when the manifest is missing or bad."""
    path = published_dir(directory) / MANIFEST
    if not path.is_file():
        raise PublishedCardError(f"{path} is missing: the published folder lists its cards there")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        names = data["cards"]
        if data.get("format") != MANIFEST_FORMAT or not isinstance(names, list):
            raise ValueError(f"format must be {MANIFEST_FORMAT!r} with a list of cards")
    except (ValueError, KeyError, TypeError) as exc:
        raise PublishedCardError(f"{path} is not a published-card manifest: {exc}") from exc
    for file_name in names:
        if not isinstance(file_name, str) or not CARD_NAME.match(file_name):
            raise PublishedCardError(
                f"{path}: card name {file_name!r} must be lowercase letters, digits and -"
            )
    return list(names)


def write_manifest(names: Sequence[str], directory: Path | None = None) -> None:
    """Write the manifest with the names sorted and without repeats."""
    path = published_dir(directory) / MANIFEST
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"cards": sorted(set(names)), "format": MANIFEST_FORMAT}
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def published_facts(directory: Path | None = None) -> list[PublishedFacts]:
    """What each stored published card was measured on (none when there is no published folder)."""
    base = published_dir(directory)
    if not (base / MANIFEST).is_file():
        return []
    out = []
    for name in read_manifest(base):
        folder = base / name
        if not is_run_folder(folder):
            continue
        provenance = provenance_from_header(open_run(folder).header, records_hash="")
        out.append(
            PublishedFacts(
                name=name,
                model=provenance.model,
                generator_hash=provenance.generator_hash,
                seeds=provenance.seeds,
                decoding=provenance.decoding,
                strictness=provenance.strictness,
                arms=provenance.arms,
                attempts=provenance.attempts,
            )
        )
    return out
