"""Published cards: stored records, rebuilt byte for byte, and read beside a run.

Layout of the published folder (the repository's top-level `calibration/`, one copy in git; a
wheel carries it as package data at `poisson_tasks/data/published/` (setup.py), so
`card --published` and `--compare published` work from an installed package too):

    manifest.json            {"cards": [names...], "format": "poisson-tasks/published@1"}
    <name>/run.json          the run's header, as the runner wrote it
    <name>/episodes.jsonl.gz its episode lines (gzip, mtime 0; or plain episodes.jsonl)
    <name>/card.json         the canonical machine-readable card
    <name>/card.md           the rendered card

Every card the manifest lists must be there: `check_published` rebuilds each from its records
and compares both stored files byte for byte, naming the card and the first differing line.
"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from poisson_tasks.calibration.artifact import Artifact
from poisson_tasks.calibration.beside import differences
from poisson_tasks.calibration.build import artifact_from_run
from poisson_tasks.calibration.cardjson import read_card_json
from poisson_tasks.calibration.manifest import (
    CARD_NAME,
    MANIFEST,
    PUBLISHED_DIR,
    published_dir,
    published_facts,
    read_manifest,
    write_manifest,
)
from poisson_tasks.calibration.output import CARD_JSON, CARD_MD, card_files
from poisson_tasks.calibration.records import EPISODES_GZ
from poisson_tasks.calibration.sections.text import percent
from poisson_tasks.errors import CardRefusal, PoissonError, PublishedCardError
from poisson_tasks.runfolder import EPISODES, HEADER, is_run_folder, open_run
from poisson_tasks.supplied import markdown_code

__all__ = [
    "CARD_JSON",
    "CARD_MD",
    "MANIFEST",
    "PUBLISHED_DIR",
    "PublishedCheck",
    "check_published",
    "compare_published",
    "published_facts",
    "read_manifest",
    "rebuild_published",
    "store_published",
    "write_manifest",
    "write_published_cards",
]


class PublishedCheck(BaseModel):
    """One published card's check: whether its stored files match a rebuild, and why not."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    ok: bool
    message: str


def _has_records(folder: Path) -> bool:
    return is_run_folder(folder) and (
        (folder / EPISODES).is_file() or (folder / EPISODES_GZ).is_file()
    )


def rebuild_published(name: str, directory: Path | None = None) -> Artifact:
    """Rebuild one published card from its stored records, against every published card's facts."""
    base = published_dir(directory)
    folder = base / name
    return artifact_from_run(folder, published=published_facts(base))


def _first_difference(stored: bytes, rebuilt: bytes) -> tuple[int, str, str]:
    stored_lines = stored.decode("utf-8", "replace").split("\n")
    rebuilt_lines = rebuilt.decode("utf-8", "replace").split("\n")
    for index in range(max(len(stored_lines), len(rebuilt_lines))):
        stored_line = stored_lines[index] if index < len(stored_lines) else "<end of file>"
        rebuilt_line = rebuilt_lines[index] if index < len(rebuilt_lines) else "<end of file>"
        if stored_line != rebuilt_line:
            return index + 1, stored_line, rebuilt_line
    return 0, "", ""


def _clip(text: str, width: int = 100) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _check_one(name: str, base: Path) -> PublishedCheck:
    folder = base / name
    if not _has_records(folder):
        return PublishedCheck(
            name=name,
            ok=False,
            message=f"published card {name}: its records are missing from {folder} "
            f"(need {HEADER} and {EPISODES_GZ}); store them with scripts/publish_card.py",
        )
    try:
        rebuilt_files = card_files(rebuild_published(name, base))
    except PoissonError as exc:
        return PublishedCheck(
            name=name,
            ok=False,
            message=f"published card {name}: cannot be rebuilt from its records: {exc}",
        )
    for fname, rebuilt in zip((CARD_JSON, CARD_MD), rebuilt_files, strict=True):
        path = folder / fname
        if not path.is_file():
            return PublishedCheck(
                name=name, ok=False, message=f"published card {name}: {path} is missing"
            )
        stored = path.read_bytes()
        if stored != rebuilt:
            line, was, now = _first_difference(stored, rebuilt)
            return PublishedCheck(
                name=name,
                ok=False,
                message=f"published card {name}: {fname} differs from the card rebuilt from its "
                f"records at line {line}: stored {_clip(was)!r}, rebuilt {_clip(now)!r}",
            )
    return PublishedCheck(
        name=name,
        ok=True,
        message=f"published card {name}: {CARD_JSON} and {CARD_MD} match the card rebuilt "
        "from its records",
    )


def check_published(directory: Path | None = None) -> list[PublishedCheck]:
    """Rebuild every listed published card and compare its stored files byte for byte."""
    base = published_dir(directory)
    return [_check_one(name, base) for name in read_manifest(base)]


def _complete_lines(source: Path) -> bytes:
    data = source.read_bytes()
    end = data.rfind(b"\n")
    return data[: end + 1]


def write_published_cards(directory: Path | None = None) -> list[str]:
    """Render card.json and card.md of every listed card that has its records (after a change)."""
    base = published_dir(directory)
    written = []
    for name in read_manifest(base):
        if not _has_records(base / name):
            continue
        cj, md = card_files(rebuild_published(name, base))
        (base / name / CARD_JSON).write_bytes(cj)
        (base / name / CARD_MD).write_bytes(md)
        written.append(name)
    return written


def store_published(run_dir: Path | str, name: str, directory: Path | None = None) -> Path:
    """Store a finished run as a published card (records, then every card rendered again)."""
    if not CARD_NAME.match(name):
        raise PublishedCardError(f"card name {name!r} must be lowercase letters, digits and -")
    run = Path(run_dir)
    open_run(run)  # a run folder, or RunFolderError
    if not (run / EPISODES).is_file():
        raise PublishedCardError(f"{run} has no {EPISODES}: only a finished run can be published")
    artifact_from_run(run, published=[])  # refusals first
    base = published_dir(directory)
    folder = base / name
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(run / HEADER, folder / HEADER)
    with (
        (folder / EPISODES_GZ).open("wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz,
    ):
        gz.write(_complete_lines(run / EPISODES))
    names = read_manifest(base) if (base / MANIFEST).is_file() else []
    write_manifest([*names, name], base)
    write_published_cards(base)
    return folder


def _figure(artifact: Artifact, arm: str, rate: str) -> str:
    try:
        cell = artifact.cell(arm)
    except KeyError:
        return "not on this card"
    fig = cell.strict if rate == "strict" else cell.leaky
    if fig is None:
        return "withheld" if not cell.published else "n/a"
    return f"{fig.pass_at_1:.3f} [{fig.low:.3f}, {fig.high:.3f}]"


def _stored_card(base: Path, name: str) -> Artifact:
    path = base / name / CARD_JSON
    try:
        return read_card_json(path.read_bytes())
    except (OSError, ValueError) as exc:
        first = str(exc).splitlines()[0]
        raise PublishedCardError(
            f"published card {name}: {path} cannot be read ({first}); run "
            "`poisson-tasks card --published` to see what is wrong"
        ) from exc


def compare_published(artifact: Artifact, directory: Path | None = None) -> str:
    """A run's rates beside the published cards', or CardRefusal naming what differs."""
    base = published_dir(directory)
    facts = published_facts(base)
    if not facts:
        raise CardRefusal(f"compare refused: no published card is stored in {base}")
    problems = [
        f"{f.name}: {', '.join(differing)}"
        for f in facts
        if (differing := differences(artifact.provenance, f))
    ]
    if problems:
        raise CardRefusal(
            "compare refused: this run was not measured like the published cards; "
            + "; ".join(problems)
        )
    cards = [(f, _stored_card(base, f.name)) for f in facts]
    arms = [a for a in artifact.provenance.arms if any(a in f.arms for f, _ in cards)]
    out = [
        f"# {markdown_code(artifact.model)} beside the published cards",
        "",
        f"Each cell is pass@1 with its {percent(artifact.thresholds.confidence)} interval (each "
        "published card's at its own declared level). The cards were measured on the "
        "same generator build, seeds, decoding and strictness; the figures are read side by side, "
        "not tested against each other.",
    ]
    for fact, card in cards:
        if card.kind == "reference-policy":
            out += [
                "",
                f"`{fact.name}` is a reference-policy card: a scripted baseline, not a model.",
            ]
    for rate in ("strict", "leaky"):
        header = ["arm", f"this run ({rate})", *(f"`{f.name}` ({rate})" for f, _ in cards)]
        rows = [
            [f"`{a}`", _figure(artifact, a, rate), *(_figure(card, a, rate) for _, card in cards)]
            for a in arms
        ]
        out += ["", f"## {rate} pass@1", ""]
        out += ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
        out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out) + "\n"
