"""run.json read: within its limit, and held to the pre-registration it stores (check_header), so a
header edited after its run is refused in one line naming the field (writer.py writes it)."""

from __future__ import annotations

from pathlib import Path

from poisson_tasks.errors import NotARunFolder, RunFolderError
from poisson_tasks.files import os_problem, read_limited
from poisson_tasks.prereg import Thresholds
from poisson_tasks.registered import Registered, registered
from poisson_tasks.runfolder.schema import HEADER, HEADER_MAX_BYTES, RunHeader

RUN_FIRST = "run `poisson-tasks run` first"  # the fix for a folder that holds no run yet


def is_run_folder(path: Path) -> bool:
    """Whether `path` holds a run: its header, run.json, is a file. The one answer to "is this a
    run folder?" that every command asks before it reads, resumes, replays or merges one."""
    return (path / HEADER).is_file()


def not_a_run_folder(path: Path, fix: str) -> NotARunFolder:
    """The one error for a folder that holds no run, `fix` saying what to give instead."""
    if path.is_dir():
        reason = f"{HEADER} is missing"
    else:
        reason = "not a folder" if path.exists() else "no such folder"
    return NotARunFolder(f"{path} is not a run folder ({reason}): {fix}")


def read_header(folder: Path) -> RunHeader:
    """A folder's run.json, read within HEADER_MAX_BYTES and held to its own pre-registration
    (check_header): a header edited after its run is refused, never read."""
    return read_checked(folder)[0]


def read_checked(folder: Path, fix: str = RUN_FIRST) -> tuple[RunHeader, Registered]:
    """read_header, with what the header's stored pre-registration registers (the check's own
    reading of it, so the document is hashed once); `fix` ends the line of a folder with none."""
    path = folder / HEADER
    if not path.exists():
        raise not_a_run_folder(folder, fix)
    try:
        header = RunHeader.model_validate_json(read_limited(path, HEADER_MAX_BYTES))
    except OSError as exc:
        raise RunFolderError(f"{path} cannot be read: {os_problem(exc)}") from None
    except ValueError as exc:
        first = str(exc).splitlines()[0]
        raise RunFolderError(f"{path} is damaged or from another version: {first}") from exc
    return header, check_header(header, path)


# ------------------------------------------------------------------ a header held to its document

_EDITED = (
    "run.json was changed after its run; restore it as its run wrote it, or register the change "
    "in a new pre-registration and run that"
)


def _edited(source: Path, what: str) -> RunFolderError:
    return RunFolderError(f"{source}: {what}: {_EDITED}")


def check_header(header: RunHeader, source: Path) -> Registered:
    """The header against the pre-registration it stores (`source` names its run.json).

    A card decides with the header's thresholds, arms, seeds and attempts (and prints its concurrency), and a merge with its
    shard record; each is a copy of what the stored pre-registration registers, so each is
    recomputed from that document (registered.py), and the document is held to its own hash. An
    edit of any one of them alone is refused in one line naming the field (RunFolderError)."""
    ours = registered(header.preregistration, source)
    if header.preregistration_hash != ours.preregistration_hash:
        raise _edited(
            source, "preregistration_hash is not the hash of the pre-registration it stores"
        )
    for name in Thresholds.model_fields:
        theirs, value = getattr(header.thresholds, name), getattr(ours.thresholds, name)
        if theirs != value:
            raise _edited(
                source,
                f"thresholds.{name} is {theirs:g} but its pre-registration registered {value:g}",
            )
    if ours.concurrency is not None and header.concurrency not in (None, ours.concurrency):
        raise _edited(
            source,
            f"concurrency is {header.concurrency} but its pre-registration registered "
            f"{ours.concurrency}",
        )
    if tuple(header.arms) != ours.arms:
        raise _edited(source, "arms are not the ones its pre-registration's design.arms plans")
    if header.attempts != ours.attempts:
        raise _edited(
            source,
            f"attempts is {header.attempts} but its pre-registration registered {ours.attempts}",
        )
    if tuple(header.seeds) != ours.seeds or header.seed_list_hash != ours.seed_list_hash:
        raise _edited(
            source,
            "seeds or seed_list_hash are not the ones its pre-registration's design.seed_string "
            "and design.tasks derive",
        )
    if any(session.index != number for number, session in enumerate(header.sessions)):
        raise _edited(source, "sessions are not numbered 0, 1, 2 ... in the order they ran")
    _check_cut_record(header, source, ours)
    return ours


def _check_cut_record(header: RunHeader, source: Path, ours: Registered) -> None:
    """A shard's or a merge's record: its count of shards within the plan's tasks (a shard holds
    whole tasks), a shard's index within its count, and its plan hash the document's."""
    cut: list[tuple[str, int, str]] = []
    if header.shard is not None:
        cut.append(("shard", header.shard.count, header.shard.plan_hash))
    if header.merged is not None:
        cut.append(("merged", header.merged.count, header.merged.plan_hash))
    for key, count, recorded in cut:
        if not 1 <= count <= ours.tasks:
            raise _edited(
                source,
                f"{key}.count {count} is not 1 to the plan's {ours.tasks} tasks (a shard holds "
                "whole tasks)",
            )
        if recorded != ours.plan_hash:
            raise _edited(
                source, f"{key}.plan_hash is not the plan hash of the pre-registration it stores"
            )
    if header.shard is not None and not 0 <= header.shard.index < header.shard.count:
        raise _edited(
            source,
            f"shard.index {header.shard.index} is outside 0 to {header.shard.count - 1} (shard "
            f"i of n is numbered from 0)",
        )
