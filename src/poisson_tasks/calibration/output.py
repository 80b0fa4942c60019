"""A card's files: card.json (canonical bytes), card.md, and optionally one PNG per knob."""

from __future__ import annotations

from pathlib import Path

from poisson_tasks.calibration.artifact import Artifact
from poisson_tasks.calibration.cardjson import card_json
from poisson_tasks.calibration.plot import write_plots
from poisson_tasks.calibration.render import render_document
from poisson_tasks.errors import OutputError
from poisson_tasks.files import atomic_write, os_problem

CARD_JSON = "card.json"
CARD_MD = "card.md"

__all__ = ["CARD_JSON", "CARD_MD", "card_files", "write_card"]


def card_files(artifact: Artifact) -> tuple[bytes, bytes]:
    """(card.json bytes, card.md bytes) of an Artifact."""
    return card_json(artifact), render_document(artifact).encode("utf-8")


def write_card(artifact: Artifact, out_dir: Path | str, *, plot: bool = False) -> list[Path]:
    """Write card.json and card.md (and `<knob>.png` with plot) into out_dir; the paths written.

    Each file is written atomically (a temporary file in out_dir, fsync, rename), so a full disk or
    a kill leaves the previous file or none, never a partial one; OutputError names the failure.
    """
    out = Path(out_dir)
    written = []
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name, data in zip((CARD_JSON, CARD_MD), card_files(artifact), strict=True):
            atomic_write(out / name, data)
            written.append(out / name)
        if plot:
            written += write_plots(artifact, out)
    except OSError as exc:
        where = exc.filename or out
        raise OutputError(f"{where}: the card cannot be written: {os_problem(exc)}") from None
    return written
