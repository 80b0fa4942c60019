"""A card's files: card.json (canonical bytes), card.md, and optionally one PNG per knob; and where
`poisson-tasks card` may write them.

A run's card lives in its own folder, RUN_DIR/card/ (runfolder.CARD_DIR): `card RUN` and `card
PREREG` both write it there, and `--out DIR` writes the same files into DIR as well. Before
anything is written every destination is checked, and one that would overwrite something else is
refused in one line (OutputError, exit 2): a folder inside another run's folder, a folder holding
files a card does not write, or a folder holding the card of another run.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from poisson_tasks.arms import KNOBS
from poisson_tasks.calibration.artifact import Artifact
from poisson_tasks.calibration.cardjson import card_json
from poisson_tasks.calibration.plot import write_plots
from poisson_tasks.calibration.render import render_document
from poisson_tasks.errors import OutputError
from poisson_tasks.files import atomic_write, os_problem, read_limited
from poisson_tasks.runfolder import CARD_DIR, HEADER, HEADER_MAX_BYTES

CARD_JSON = "card.json"
CARD_MD = "card.md"
# Every name a card folder may hold: the two files, a plot per knob (--plot).
_CARD_NAMES = frozenset({CARD_JSON, CARD_MD, *(f"{knob}.png" for knob in KNOBS)})

__all__ = [
    "CARD_JSON",
    "CARD_MD",
    "CardFiles",
    "card_files",
    "card_home",
    "check_card_folder",
    "check_card_place",
    "run_identity",
    "write_card",
    "write_run_card",
]


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


def card_home(run_dir: Path | str) -> Path:
    """Where a run's card lives: RUN_DIR/card/."""
    return Path(run_dir) / CARD_DIR


def run_identity(artifact: Artifact) -> tuple[str, str]:
    """What tells one run from another on its card: the pre-registration's hash and when the run's
    first session started (a resumed run keeps both; a merge takes its first shard's)."""
    provenance = artifact.provenance
    started = provenance.sessions[0].started_at if provenance.sessions else ""
    return provenance.preregistration_hash, started


def _stored_identity(card: Path) -> tuple[str, str] | None:
    """run_identity of the card.json at `card`, or None when it is not a card's."""
    try:
        provenance = json.loads(read_limited(card, HEADER_MAX_BYTES))["provenance"]
        sessions = provenance["sessions"]
        started = sessions[0]["started_at"] if sessions else ""
        return str(provenance["preregistration_hash"]), str(started)
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return None


def _a_card_file(name: str) -> bool:
    """A name a card folder holds: a card file, or the temporary file a kill left of one."""
    if name in _CARD_NAMES:
        return True
    return name.endswith(".tmp") and any(name.startswith(f".{card}.") for card in _CARD_NAMES)


def _shown(path: Path) -> str:
    """A resolved path as the user would write it: relative to here when it lies below here."""
    relative = os.path.relpath(path)
    return str(path) if relative.startswith("..") else relative


def _owning_run(path: Path) -> Path | None:
    """The run folder `path` is, or lies inside: the nearest folder at or above it with run.json."""
    here = path.resolve()
    for folder in (here, *here.parents):
        if (folder / HEADER).is_file():
            return folder
    return None


def check_card_place(folder: Path | str, run_dir: Path | str, flag: str = "--out") -> list[str]:
    """The names `folder` holds, once it is known to be a place for `run_dir`'s card: not the run
    folder, not inside another run's folder, not a file, holding nothing but card files (else
    OutputError). Whose card it holds is check_card_folder's question."""
    folder, run_dir = Path(folder), Path(run_dir)
    named = f"{flag} {folder}" if flag else str(folder)
    if folder.resolve() == run_dir.resolve():
        raise OutputError(
            f"{named} is the run folder itself: its card goes into {card_home(run_dir)} (leave "
            "--out out), and --out takes another folder"
        )
    owner = _owning_run(folder)
    if owner is not None and owner != run_dir.resolve():
        raise OutputError(
            f"{named} lies in the run folder {_shown(owner)}, which is another run's: its card stays as it "
            f"is; the card of {run_dir} goes into {card_home(run_dir)}, and --out takes a folder "
            "outside every run folder"
        )
    if folder.exists() and not folder.is_dir():
        raise OutputError(f"{named} is a file: give a folder to write card.json and card.md into")
    if not folder.is_dir():
        return []
    held = sorted(entry.name for entry in folder.iterdir())
    others = [name for name in held if not _a_card_file(name)]
    if others:
        shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
        raise OutputError(
            f"{named} holds files a card does not write ({shown}): give a new or empty folder, "
            "so that nothing in it is overwritten"
        )
    return held


def check_card_folder(
    folder: Path | str,
    run_dir: Path | str,
    identity: tuple[str, str] | None,
    flag: str = "--out",
) -> None:
    """Refuse, writing nothing, a folder the card of `run_dir` must not be written into.

    Refused: a folder inside another run's folder; a file; a folder holding anything but card
    files; a folder holding the card of another run than `identity` (run_identity; None for a run
    not made yet, so that any card there is another run's). `flag` names the folder in the message
    (`--out`, or "" for the run's own card folder)."""
    place = Path(folder)
    named = f"{flag} {place}" if flag else str(place)
    held = check_card_place(place, run_dir, flag)
    if not held:
        return
    stored = _stored_identity(place / CARD_JSON) if CARD_JSON in held else None
    if identity is not None and stored == identity:
        return
    whose = (
        "a card whose run cannot be told (no readable card.json)"
        if stored is None
        else f"the card of another run (pre-registration {stored[0][:12]}, started {stored[1]})"
    )
    raise OutputError(f"{named} holds {whose}: give another folder, or move that card away first")


def _writable(folder: Path) -> bool:
    """Whether this user may write into `folder` (a read-only copy of a run is carded unwritten)."""
    return os.access(folder, os.W_OK)


@dataclass(frozen=True)
class CardFiles:
    """A card and the files written of it; `notes` say what was not written, and why."""

    artifact: Artifact
    written: list[Path]
    notes: list[str] = field(default_factory=list)


def write_run_card(
    artifact: Artifact, run_dir: Path | str, out: Path | str | None = None, *, plot: bool = False
) -> CardFiles:
    """Write a run's card into RUN_DIR/card/ and, when given, into `out` (with the plots).

    Both folders are checked (check_card_folder) before either is written. A run folder this user
    cannot write (a read-only copy) keeps no card/: the files go to `out` only, and a note says so.
    """
    run = Path(run_dir)
    home, identity = card_home(run), run_identity(artifact)
    target = None if out is None else Path(out)
    at_home = target is not None and target.resolve() == home.resolve()
    check_card_folder(home, run, identity, flag="--out" if at_home else "")
    if target is not None and not at_home:
        check_card_folder(target, run, identity)
    written: list[Path] = []
    notes: list[str] = []
    if at_home or _writable(run):
        written += write_card(artifact, home, plot=plot and at_home)
    else:
        notes.append(
            f"{run} is read-only here: its card is not kept in {home}"
            + ("" if target is not None else "; give --out DIR to keep card.json and card.md")
        )
    if target is not None and not at_home:
        written += write_card(artifact, target, plot=plot)
    return CardFiles(artifact=artifact, written=written, notes=notes)
