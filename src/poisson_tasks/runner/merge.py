"""merge: a study's shard folders put back together into the run folder one machine would make.

Every shard folder is input from another machine (runner/shardfolder.py reads and checks one).
Before anything is written the merge checks, in this order, that the folders make one study, and
refuses in one line naming what is missing, duplicated, different or damaged (MergeError, exit 2):

1. every folder is a shard folder (its run.json records `shard`), none is itself a merge, and
   each run.json is as its run wrote it: held to the pre-registration it stores (its hash, the
   plan's arms, seeds, attempts and thresholds, the shard's plan hash, its count of shards within
   the plan's tasks and its index within its count), with at least one session;
2. one cut: every folder has the same n, and each index 0 .. n-1 is given exactly once;
3. one plan: the same plan hash (the pre-registration less `model.base_url`) and partition rule;
4. one instrument: the same generator, engine and vocabulary hashes, environment hash and
   poisson-tasks version;
5. one serving: every session of every shard served as shard 0's first session was, under pin N10
   (servingpin.compare_serving: model, revision, engine and version, flags, sampling ...);
6. no shard folder is being written (its lock is free);
7. each shard's cut as this install makes it (the partition recomputed from the plan validated
   from the stored pre-registration): its slots, their digest and its budget share;
8. every line an episode line inside the plan, in its own shard's slots, naming one of its
   folder's sessions, scored at most once; and every slot of the plan held by its shard.

Nothing is sized by a number a folder states before that number is bounded by the plan's own
limits, and nothing is written until every check has passed.

The merged folder is a run folder. run.json holds the shards' pre-registration (with
`model.base_url` where every shard used the same address, null where they differed: where a
shard reached its server is placement, not the study), every shard's sessions renumbered in shard
order, and `merged`: each shard's folder, its sessions' new numbers, its lines, tokens, budget share
and the sha256 of its episodes.jsonl. episodes.jsonl holds every line of every shard in plan order
(a slot's lines in the order its shard wrote them), each line's session renumbered to match. It
is written into a temporary folder beside --out and renamed into place, so a kill or a full disk
never leaves half a merge (nor a parent folder the merge made for it). A merged folder is read by
`card` like any other; it is not resumed (resume the shard and merge again).
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import hashlib
import os
import shutil
import tempfile
from array import array
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from pydantic import ValidationError

from poisson_tasks.bundle import digest
from poisson_tasks.errors import MergeError, PreregistrationError
from poisson_tasks.files import fsync_dir, open_regular, os_problem, write_all
from poisson_tasks.prereg import Plan, validate_preregistration
from poisson_tasks.registered import placement_free
from poisson_tasks.runfolder import (
    EPISODES,
    HEADER,
    LOCK,
    EpisodeLine,
    MergedShard,
    MergeRecord,
    PlanSlots,
    RunHeader,
    Session,
    now,
    write_header,
)
from poisson_tasks.runner.folder import check_creatable, differing_paths, resume_hint
from poisson_tasks.runner.shard import partition
from poisson_tasks.runner.shardfolder import (
    Cut,
    ShardFolder,
    check_shard_record,
    read_shard_folder,
    scan_lines,
    slot_text,
)
from poisson_tasks.servingpin import compare_serving, session_facts

__all__ = ["MergeSummary", "merge_shards"]


@dataclass(frozen=True)
class MergeSummary:
    """What a merge wrote: the folder, how many shards, slots, lines and tokens."""

    folder: Path
    shards: int
    slots: int
    lines: int
    tokens: int

    def lines_printed(self) -> list[str]:
        return [
            f"merged {self.shards} shards into {self.folder}: {self.slots} slots, {self.lines} "
            f"episode lines, {self.tokens:,} tokens; card it with poisson-tasks card {self.folder}"
        ]


def _check_cut(shards: list[ShardFolder]) -> int:
    """One n, each index once; n is already within the plan's tasks (runfolder.check_header), and
    nothing here is sized by it."""
    first = shards[0]
    count = first.count
    by_index: dict[int, ShardFolder] = {}
    for shard in shards:
        if shard.count != count:
            raise MergeError(
                f"{shard.name} is one of {shard.count} shards, {first.name} one of {count}: the "
                "shards of one study are cut the same way; give the folders of one --shard i/n"
            )
        if shard.index in by_index:
            raise MergeError(
                f"shard {shard.index}/{count} is given twice: {by_index[shard.index].path} and "
                f"{shard.path}; give each shard's folder once"
            )
        by_index[shard.index] = shard
    if len(by_index) < count:
        absent = next(i for i in range(count) if i not in by_index)
        more = count - len(by_index) - 1
        given = ", ".join(str(i) for i in sorted(by_index))
        raise MergeError(
            f"shard {absent}/{count} is missing"
            + (f" (and {more} more)" if more else "")
            + f": given {given}; run it with poisson-tasks run PREREG --shard {absent}/{count} "
            "--out DIR, then merge again with its folder"
        )
    shards.sort(key=lambda shard: shard.index)
    return count


def _check_plan(shards: list[ShardFolder]) -> None:
    first = shards[0]
    assert first.header.shard is not None
    ours = placement_free(first.header.preregistration)
    for shard in shards[1:]:
        record = shard.header.shard
        assert record is not None
        if record.rule != first.header.shard.rule:
            raise MergeError(
                f"{shard.name} was cut by the rule {record.rule}, {first.name} by "
                f"{first.header.shard.rule}: run every shard with one poisson-tasks build"
            )
        if record.plan_hash != first.header.shard.plan_hash:
            theirs = placement_free(shard.header.preregistration)
            where = ", ".join(differing_paths(theirs, ours)[:4]) or "its hash"
            raise MergeError(
                f"{shard.name} was made by another pre-registration than {first.name} (it "
                f"differs in {where}): every shard runs the same pre-registration file"
            )


_INSTRUMENT = (
    ("generator_hash", "build of the generator"),
    ("engine_hash", "build of the engine"),
    ("vocabulary_hash", "vocabulary"),
    ("environment_hash", "environment"),
    ("package_version", "poisson-tasks version"),
)


def _check_instrument(shards: list[ShardFolder]) -> None:
    first = shards[0]
    for shard in shards[1:]:
        for field, what in _INSTRUMENT:
            theirs, ours = getattr(shard.header, field), getattr(first.header, field)
            if theirs != ours:
                raise MergeError(
                    f"{shard.name} was run with another {what} ({field} {str(theirs)[:24]}, "
                    f"{first.name} has {str(ours)[:24]}): one study is measured with one "
                    "instrument; run that shard again with the build and lock the others used"
                )


def _check_serving(shards: list[ShardFolder]) -> None:
    """Every session of every shard served as shard 0's first session was (servingpin)."""
    first = shards[0]
    reference = session_facts(first.header)[0]
    for shard in shards:
        for session, facts in enumerate(session_facts(shard.header)):
            change = compare_serving(reference, facts)
            if not change.held:
                raise MergeError(
                    f"{shard.name} session {session} was served differently from {first.name} "
                    f"session 0: {change.describe()} (pin N10: one study is served one way); "
                    "serve every shard with the same model revision, serving version and flags, "
                    "run that shard again into a new folder and merge again"
                )


def _check_unlocked(shards: list[ShardFolder]) -> None:
    """No shard folder is being written: its lock, taken shared and at once, is free."""
    for shard in shards:
        lock = shard.path / LOCK
        try:
            fd = os.open(lock, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue  # no lock file: nobody has written the folder since it was copied
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError:
                raise MergeError(
                    f"{shard.name} is being written by a poisson-tasks run: wait for it to "
                    "finish, then merge"
                ) from None
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


def _plan(shards: list[ShardFolder]) -> Plan:
    """The plan, validated from shard 0's stored pre-registration by this install."""
    first = shards[0]
    try:
        return validate_preregistration(
            first.header.preregistration, source=str(first.path / HEADER)
        )
    except PreregistrationError as exc:
        raise MergeError(
            f"{first.path / HEADER}: its pre-registration does not validate with this install "
            f"({exc.problems[0]}): merge with the poisson-tasks build that ran the shards"
        ) from None


def _check_lines(plan: Plan, shards: list[ShardFolder]) -> None:
    """Each shard's cut, every line of every shard (shardfolder.scan_lines), then every slot of
    the plan held by its shard."""
    cut = Cut.of(plan, partition(plan, len(shards)))
    for shard in shards:
        check_shard_record(shard, cut)
    slots = PlanSlots(shards[0].header)  # the card's own check of each line, over every shard
    held = array("i", bytes(4 * plan.episodes))  # per slot in plan order: its shard + 1
    names = [shard.name for shard in shards]
    for shard in shards:
        scan_lines(shard, cut, slots, held, names)
    missing = held.count(0)
    if missing:
        first = held.index(0)
        slot = plan.slots()[first]
        owner = shards[cut.owner(first)]
        lacking = Counter(cut.owner(i) for i, by in enumerate(held) if not by)
        lacks = ", ".join(f"shard {i}/{len(shards)} lacks {k}" for i, k in sorted(lacking.items()))
        raise MergeError(
            f"{missing} of the plan's {plan.episodes} slots "
            f"{'is' if missing == 1 else 'are'} missing (first: {slot_text(slot)}; {lacks}): a "
            f"shard stopped before it was done; continue it with {resume_hint(owner.path)} and "
            "merge again"
        )


def _common_address(shards: list[ShardFolder]) -> dict[str, Any]:
    """The shards' pre-registration, `model.base_url` kept where all agree and null otherwise."""
    document: dict[str, Any] = copy.deepcopy(shards[0].header.preregistration)
    addresses = {(s.header.preregistration.get("model") or {}).get("base_url") for s in shards}
    if isinstance(document.get("model"), dict):
        document["model"]["base_url"] = addresses.pop() if len(addresses) == 1 else None
    return document


def _merged_header(shards: list[ShardFolder], folder_names: list[str]) -> RunHeader:
    first = shards[0].header
    document = _common_address(shards)
    sessions: list[Session] = []
    merged: list[MergedShard] = []
    for shard, name in zip(shards, folder_names, strict=True):
        record = shard.header.shard
        assert record is not None
        numbers = []
        for session in shard.header.sessions:
            numbers.append(len(sessions))
            sessions.append(session.model_copy(update={"index": len(sessions)}))
        merged.append(
            MergedShard(
                index=record.index,
                folder=name,
                sessions=numbers,
                episodes=len(shard.slots),
                tokens=shard.tokens,
                records_sha256=shard.records_sha256,
                budget=dict(record.budget),
            )
        )
    serving = first.serving
    if "base_url" in serving.model_fields_set:
        serving = serving.model_copy(
            update={"base_url": (document.get("model") or {}).get("base_url")}
        )
    assert first.shard is not None
    return first.model_copy(
        update={
            "preregistration": document,
            "preregistration_hash": digest(document),
            "serving": serving,
            "sessions": sessions,
            "shard": None,
            "merged": MergeRecord(
                count=len(shards),
                rule=first.shard.rule,
                plan_hash=first.shard.plan_hash,
                merged_at=now(),
                shards=merged,
            ),
        }
    )


def _make_parents(parent: Path) -> list[Path]:
    """Make `parent` and whatever above it is missing; the folders made, deepest first."""
    made: list[Path] = []
    here = parent
    while not here.exists():
        made.append(here)
        here = here.parent
    parent.mkdir(parents=True, exist_ok=True)
    return made


def _remove_made(made: list[Path]) -> None:
    """Remove the folders _make_parents made, where they are still empty."""
    for folder in made:
        with contextlib.suppress(OSError):
            folder.rmdir()


def _line(source: BinaryIO, offset: int, length: int, session: dict[int, int]) -> bytes:
    """One line read again, its session renumbered; a line that changed since it was checked is
    refused rather than written."""
    source.seek(offset)
    raw = source.read(length)
    try:
        line = EpisodeLine.model_validate_json(raw)
        renumbered = line.model_copy(update={"session": session[line.session]})
    except (ValidationError, KeyError):
        raise MergeError(
            f"{getattr(source, 'name', 'a shard')}: changed while it was merged (a line at byte "
            f"{offset} is no longer the one checked): stop whatever writes it, and merge again"
        ) from None
    return renumbered.model_dump_json().encode() + b"\n"


def _check_unchanged(shard: ShardFolder, source: BinaryIO) -> None:
    """The shard's lines are still the bytes scan_lines checked and hashed (its records_sha256):
    a folder written to while it was merged is refused, not merged."""
    end = shard.offsets[-1] + shard.lengths[-1] if shard.slots else 0
    hasher = hashlib.sha256()
    source.seek(0)
    while end > 0:
        block = source.read(min(end, 1 << 20))
        if not block:
            break
        hasher.update(block)
        end -= len(block)
    if end or hasher.hexdigest() != shard.records_sha256:
        raise MergeError(
            f"{shard.path / EPISODES}: changed while it was merged: stop whatever writes it, and "
            "merge again"
        )


def _write(out: Path, shards: list[ShardFolder], header: RunHeader) -> int:
    """Every line in plan order, sessions renumbered, into a temporary folder renamed to `out`;
    on any failure nothing is left: not the temporary folder, nor a parent folder made for it."""
    check_creatable(out)
    parent = out.parent
    made: list[Path] = []
    try:
        made = _make_parents(parent)
        scratch = Path(tempfile.mkdtemp(prefix=f".{out.name}.merging-", dir=parent))
    except OSError as exc:
        _remove_made(made)
        raise MergeError(f"{out}: cannot make the merged folder: {os_problem(exc)}") from None
    assert header.merged is not None
    renumber = [
        {old.index: new for old, new in zip(s.header.sessions, m.sessions, strict=True)}
        for s, m in zip(shards, header.merged.shards, strict=True)
    ]
    placed = sorted(
        (slot, position, source)
        for source, shard in enumerate(shards)
        for position, slot in enumerate(shard.slots)
    )
    handles: list[BinaryIO] = []
    written = 0
    try:
        handles = [open_regular(s.path / EPISODES) for s in shards]
        fd = os.open(scratch / EPISODES, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            chunk: list[bytes] = []
            for _, position, source in placed:
                shard = shards[source]
                offset, length = shard.offsets[position], shard.lengths[position]
                chunk.append(_line(handles[source], offset, length, renumber[source]))
                written += 1
                if len(chunk) >= 256:
                    write_all(fd, b"".join(chunk))
                    chunk = []
            write_all(fd, b"".join(chunk))
            for shard, handle in zip(shards, handles, strict=True):
                _check_unchanged(shard, handle)
            os.fsync(fd)
        finally:
            os.close(fd)
        write_header(scratch, header)
        fsync_dir(scratch)
        if out.exists():  # check_creatable let through only an empty folder (or a lock file)
            (out / LOCK).unlink(missing_ok=True)
            out.rmdir()
        os.rename(scratch, out)
        fsync_dir(parent)
    except OSError as exc:
        shutil.rmtree(scratch, ignore_errors=True)
        _remove_made(made)
        raise MergeError(f"{out}: the merged folder cannot be written: {os_problem(exc)}") from None
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        _remove_made(made)
        raise
    finally:
        for fh in handles:
            with contextlib.suppress(OSError):
                fh.close()
    return written


def merge_shards(folders: Sequence[Path | str] | None, out: Path | str | None) -> MergeSummary:
    """Check that `folders` are the n shard folders of one study (the module doc), then write their
    merge into the new run folder `out`. MergeError in one line names what is wrong (no folders
    and no `out` included: `merge` passes its arguments as given); nothing is written unless every
    check passes."""
    paths = [Path(f) for f in folders or ()]
    if not paths:
        raise MergeError(
            "give the shard folders to merge: poisson-tasks merge DIR_0 ... DIR_n-1 --out DIR"
        )
    if out is None:
        raise MergeError("give --out DIR: the new run folder the merge is written into")
    out_path = Path(out)
    check_creatable(out_path)
    shards = [read_shard_folder(path) for path in paths]
    _check_cut(shards)
    _check_plan(shards)
    _check_instrument(shards)
    _check_serving(shards)
    _check_unlocked(shards)
    plan = _plan(shards)
    _check_lines(plan, shards)
    header = _merged_header(shards, [str(s.path) for s in shards])
    lines = _write(out_path, shards, header)
    return MergeSummary(
        folder=out_path,
        shards=len(shards),
        slots=plan.episodes,
        lines=lines,
        tokens=sum(s.tokens for s in shards),
    )
