"""A card's files: card.json (canonical bytes), card.md, and optionally one PNG per knob; and where
`poisson-tasks card` may write them.

A run's card lives in its own folder, RUN_DIR/card/ (runfolder.CARD_DIR): `card RUN` and `card
PREREG` both write it there, and `--out DIR` writes the same files into DIR as well. Before
anything is written every destination is checked, and one that would overwrite something else is
refused in one line (OutputError, exit 2): the run folder itself, a folder inside another run's
folder, a file, a folder holding files a card does not write, or (for --out) a folder holding a
card other than the run's current one.
"""

from __future__ import annotations

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
from poisson_tasks.runfolder import CARD_DIR, HEADER_MAX_BYTES, is_run_folder

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


def _card_json_of(folder: Path) -> bytes | None:
    """The card.json bytes a folder holds, or None when it holds none that can be read."""
    try:
        return read_limited(folder / CARD_JSON, HEADER_MAX_BYTES)
    except OSError:
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
        if is_run_folder(folder):
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
            f"{named} lies in the run folder {_shown(owner)}, which is another run's: its card "
            f"stays as it is; the card of {run_dir} goes into {card_home(run_dir)}, and --out "
            "takes a folder outside every run folder"
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
    folder: Path | str, run_dir: Path | str, new: bytes | None = None, flag: str = "--out"
) -> None:
    """Refuse, writing nothing, a folder other than RUN_DIR/card/ that `run_dir`'s card must not be
    written into: check_card_place's refusals, and a folder holding a card other than the one in
    RUN_DIR/card/ or the card about to be written (`new`, its card.json bytes): another run's, or
    an older card of this run, which replacing it would lose.

    So `card RUN --out DIR` may be run again; a new run (card PREREG) has no card yet, and any card
    there is refused."""
    place = Path(folder)
    named = f"{flag} {place}" if flag else str(place)
    if not check_card_place(place, run_dir, flag):
        return
    held = _card_json_of(place)
    if held is not None and held in (new, _card_json_of(card_home(run_dir))):
        return
    raise OutputError(
        f"{named} holds a card other than the one in {card_home(run_dir)} (another run's, or an "
        "older card of this run): give another folder, or move that card away first"
    )


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
    home = card_home(run)
    target = None if out is None else Path(out)
    at_home = target is not None and target.resolve() == home.resolve()
    check_card_place(home, run, flag="--out" if at_home else "")  # the run's own: replaced
    if target is not None and not at_home:
        check_card_folder(target, run, card_json(artifact))
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
