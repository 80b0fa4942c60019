"""merge: a study's shard folders put back together into the run folder one machine would make.

Before anything is written the merge checks, in this order, that the folders make one study, and
refuses in one line naming what is missing, duplicated or different (MergeError, exit 2):

1. every folder is a shard folder (its run.json records `shard`) and none is itself a merge;
2. one cut: every folder has the same n, and each index 0 .. n-1 is given exactly once;
3. one plan: the same plan hash (the pre-registration less `model.base_url`) and partition rule;
4. one instrument: the same generator, engine and vocabulary hashes, environment hash and
   poisson-tasks version;
5. one serving: every session of every shard served as shard 0's first session was, under pin N10
   (servingpin.compare_serving: model, revision, engine and version, flags, sampling ...);
6. no shard folder is being written (its lock is free);
7. every slot exactly once: each shard holds lines only for its own slots (the partition is
   recomputed from the plan), and every slot of the plan has lines in exactly one shard.

The merged folder is a run folder. run.json holds the shards' pre-registration (with
`model.base_url` where every shard used the same address, null where they differed: where a
shard reached its server is placement, not the study), every shard's sessions renumbered in shard
order, and `merged`: each shard's folder, its sessions' new numbers, its lines, tokens, budget share
and the sha256 of its episodes.jsonl. episodes.jsonl holds every line of every shard in plan order
(a slot's lines in the order its shard wrote them), each line's session renumbered to match. It
is written into a temporary folder beside --out and renamed into place, so a kill or a full disk
never leaves half a merge. A merged folder is read by `card` like any other; it is not resumed
(resume the shard and merge again).
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import hashlib
import json
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from pydantic import ValidationError

from poisson_tasks.bundle import digest
from poisson_tasks.errors import MergeError, PreregistrationError
from poisson_tasks.files import fsync_dir, lines_limited, open_regular, os_problem, write_all
from poisson_tasks.prereg import Plan, Slot, validate_preregistration
from poisson_tasks.runfolder import (
    EPISODES,
    HEADER,
    LINE_MAX_BYTES,
    EpisodeLine,
    MergedShard,
    MergeRecord,
    RunHeader,
    Session,
    read_header,
    write_header,
)
from poisson_tasks.runner.folder import LOCK, check_creatable, differing_paths, now, resume_hint
from poisson_tasks.runner.shard import partition, placement_free, slots_digest
from poisson_tasks.servingpin import compare_serving, session_facts
from poisson_tasks.verifier import INSTRUMENT_OUTCOMES

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


@dataclass
class _Shard:
    """One shard folder as the merge reads it."""

    path: Path
    header: RunHeader
    # pass 1: each line's slot, byte offset and length, in file order
    lines: list[tuple[Slot, int, int]]
    tokens: int = 0
    records_sha256: str = ""

    @property
    def index(self) -> int:
        assert self.header.shard is not None
        return self.header.shard.index

    @property
    def name(self) -> str:
        assert self.header.shard is not None
        return f"shard {self.header.shard.index}/{self.header.shard.count} ({self.path})"


def _read_shards(folders: list[Path]) -> list[_Shard]:
    if not folders:
        raise MergeError("give the shard folders to merge: poisson-tasks merge DIR ... --out DIR")
    out: list[_Shard] = []
    for path in folders:
        if not (path / HEADER).is_file():
            raise MergeError(
                f"{path} is not a run folder ({HEADER} is missing): give the --out folders of "
                "`poisson-tasks run PREREG --shard i/n`"
            )
        header = read_header(path)
        if header.merged is not None:
            raise MergeError(
                f"{path} is already a merge of {header.merged.count} shards: give the shard "
                "folders themselves"
            )
        if header.shard is None:
            raise MergeError(
                f"{path} is not a shard folder (its {HEADER} records no shard): merge reads the "
                "folders of `poisson-tasks run PREREG --shard i/n`"
            )
        out.append(_Shard(path, header, []))
    return out


def _check_cut(shards: list[_Shard]) -> int:
    first = shards[0]
    assert first.header.shard is not None
    count = first.header.shard.count
    by_index: dict[int, _Shard] = {}
    for shard in shards:
        record = shard.header.shard
        assert record is not None
        if record.count != count:
            raise MergeError(
                f"{shard.name} is one of {record.count} shards, {first.name} one of {count}: the "
                "shards of one study are cut the same way; give the folders of one --shard i/n"
            )
        if record.index in by_index:
            raise MergeError(
                f"shard {record.index}/{count} is given twice: {by_index[record.index].path} and "
                f"{shard.path}; give each shard's folder once"
            )
        by_index[record.index] = shard
    missing = [i for i in range(count) if i not in by_index]
    if missing:
        given = ", ".join(str(i) for i in sorted(by_index))
        absent = missing[0]
        raise MergeError(
            f"shard {absent}/{count} is missing"
            + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
            + f": given {given}; run it with poisson-tasks run PREREG --shard {absent}/{count} "
            "--out DIR, then merge again with its folder"
        )
    shards.sort(key=lambda shard: shard.index)
    return count


def _check_plan(shards: list[_Shard]) -> None:
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


def _check_instrument(shards: list[_Shard]) -> None:
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


def _check_serving(shards: list[_Shard]) -> None:
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


def _check_unlocked(shards: list[_Shard]) -> None:
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


def _scan(shard: _Shard) -> None:
    """Pass 1 over a shard's lines: each one's slot, offset and length; its tokens and sha256."""
    path = shard.path / EPISODES
    hasher = hashlib.sha256()
    try:
        fh = open_regular(path)
    except OSError as exc:
        raise MergeError(f"{path} cannot be read: {os_problem(exc)}") from None
    with fh:
        try:
            _scan_lines(shard, path, lines_limited(fh, LINE_MAX_BYTES, str(path)), hasher)
        except OSError as exc:
            raise MergeError(f"{path} cannot be read: {os_problem(exc)}") from None
    shard.records_sha256 = hasher.hexdigest()


def _scan_lines(shard: _Shard, path: Path, lines: Iterator[bytes], hasher: Any) -> None:
    """_scan's loop: every complete line's slot, offset and length, and its tokens."""
    offset = 0
    for number, raw in enumerate(lines, start=1):
        if not raw.endswith(b"\n"):
            break  # a torn last line (a kill mid-write): never counted, its slot not run
        hasher.update(raw)
        try:
            line = EpisodeLine.model_validate_json(raw)
        except ValidationError as exc:
            raise MergeError(
                f"{path}:{number} is not an episode line ({str(exc).splitlines()[0]}): "
                "that shard folder is damaged; run the shard again into a new folder"
            ) from None
        usage = line.usage
        shard.tokens += (
            (usage.uncached_input_tokens or 0)
            + (usage.cached_input_tokens or 0)
            + (usage.completion_tokens or 0)
        )
        shard.lines.append((Slot(line.arm_id, line.seed, line.attempt), offset, len(raw)))
        offset += len(raw)


def _slot_text(slot: Slot) -> str:
    return f"{slot.arm_id} seed {slot.seed} attempt {slot.attempt}"


def _check_slots(plan: Plan, shards: list[_Shard]) -> None:
    cut = partition(plan, len(shards))
    owner = {slot: i for i, slots in enumerate(cut) for slot in slots}
    count = len(shards)
    held: dict[Slot, int] = {}  # slot -> the shard whose lines hold it
    for shard in shards:
        record = shard.header.shard
        assert record is not None
        if record.slots_sha256 != slots_digest(cut[shard.index]):
            raise MergeError(
                f"{shard.name} holds another cut of the plan than this install makes (its slots' "
                "digest differs): merge with the poisson-tasks build that ran the shards"
            )
        for slot, _, _ in shard.lines:
            if slot not in owner:
                raise MergeError(
                    f"{shard.name} holds a line for {_slot_text(slot)}, which the plan does not "
                    "hold: that folder is not this study's; run the shard again into a new folder"
                )
            if held.setdefault(slot, shard.index) != shard.index:
                raise MergeError(
                    f"slot {_slot_text(slot)} is duplicated: {shards[held[slot]].name} and "
                    f"{shard.name} both hold it, and it is shard {owner[slot]}/{count}'s alone; run "
                    "the shard that should not hold it again into a new folder, and merge again"
                )
        _check_scored_once(shard)
    for slot, index in held.items():
        if owner[slot] != index:
            raise MergeError(
                f"{shards[index].name} holds {_slot_text(slot)}, which is shard {owner[slot]}/{count}'s: "
                "that folder was not made by its own --shard; run it again into a new folder"
            )
    missing = [s for s in plan.slots() if s not in held]
    if missing:
        by_shard = Counter(owner[s] for s in missing)
        first = shards[owner[missing[0]]]
        lacking = ", ".join(f"shard {i}/{count} lacks {k}" for i, k in sorted(by_shard.items()))
        raise MergeError(
            f"{len(missing)} of the plan's {len(owner)} slots "
            f"{'is' if len(missing) == 1 else 'are'} missing (first: "
            f"{_slot_text(missing[0])}; {lacking}): a shard stopped before it was done; continue "
            f"it with {resume_hint(first.path)} and merge again"
        )


def _check_scored_once(shard: _Shard) -> None:
    """A shard holds at most one scored line per slot, as the runner writes (a slot's other lines
    are instrument failures, which a resume runs again)."""
    counts = Counter(slot for slot, _, _ in shard.lines)
    repeated = {s for s, k in counts.items() if k > 1}
    if not repeated:
        return
    scored: Counter[Slot] = Counter()
    with open_regular(shard.path / EPISODES) as fh:
        for slot, offset, length in shard.lines:
            if slot in repeated:
                fh.seek(offset)
                outcome = EpisodeLine.model_validate_json(fh.read(length)).outcome
                scored[slot] += outcome not in INSTRUMENT_OUTCOMES
    twice = [s for s, k in scored.items() if k > 1]
    if twice:
        raise MergeError(
            f"slot {_slot_text(twice[0])} is duplicated in {shard.name}: it holds two scored "
            "lines, which no run writes; that folder is damaged: run the shard again into a new "
            "folder"
        )


def _plan(shards: list[_Shard]) -> Plan:
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


def _common_address(shards: list[_Shard]) -> dict[str, Any]:
    """The shards' pre-registration, `model.base_url` kept where all agree and null otherwise."""
    document: dict[str, Any] = copy.deepcopy(shards[0].header.preregistration)
    addresses = {(s.header.preregistration.get("model") or {}).get("base_url") for s in shards}
    if isinstance(document.get("model"), dict):
        document["model"]["base_url"] = addresses.pop() if len(addresses) == 1 else None
    return document


def _merged_header(shards: list[_Shard], folder_names: list[str]) -> RunHeader:
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
                episodes=len(shard.lines),
                tokens=shard.tokens,
                records_sha256=shard.records_sha256,
                budget=dict(record.budget),
            )
        )
    serving = dict(first.serving)
    if "base_url" in serving:
        serving["base_url"] = (document.get("model") or {}).get("base_url")
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


def _write(out: Path, plan: Plan, shards: list[_Shard], header: RunHeader) -> int:
    """Every line in plan order, sessions renumbered, into a temporary folder renamed to `out`."""
    check_creatable(out)
    parent = out.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=f".{out.name}.merging-", dir=parent))
    except OSError as exc:
        raise MergeError(f"{out}: cannot make the merged folder: {os_problem(exc)}") from None
    assert header.merged is not None
    renumber = [
        {old.index: new for old, new in zip(s.header.sessions, m.sessions, strict=True)}
        for s, m in zip(shards, header.merged.shards, strict=True)
    ]
    order = {slot: i for i, slot in enumerate(plan.slots())}
    placed = sorted(
        (
            (order[slot], k, i, offset, length)
            for i, s in enumerate(shards)
            for k, (slot, offset, length) in enumerate(s.lines)
        ),
    )
    handles: list[BinaryIO] = []
    written = 0
    try:
        handles = [open_regular(s.path / EPISODES) for s in shards]
        fd = os.open(scratch / EPISODES, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            chunk: list[bytes] = []
            for _, _, source, offset, length in placed:
                handles[source].seek(offset)
                doc = json.loads(handles[source].read(length))
                doc["session"] = renumber[source][doc["session"]]
                chunk.append(EpisodeLine.model_validate(doc).model_dump_json().encode() + b"\n")
                written += 1
                if len(chunk) >= 256:
                    write_all(fd, b"".join(chunk))
                    chunk = []
            write_all(fd, b"".join(chunk))
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
        raise MergeError(f"{out}: the merged folder cannot be written: {os_problem(exc)}") from None
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    finally:
        for fh in handles:
            with contextlib.suppress(OSError):
                fh.close()
    return written


def merge_shards(folders: list[Path | str], out: Path | str) -> MergeSummary:
    """Check that `folders` are the n shard folders of one study (the module doc), then write their
    merge into the new run folder `out`. MergeError in one line names what is wrong; nothing is
    written unless every check passes."""
    paths = [Path(f) for f in folders]
    out_path = Path(out)
    check_creatable(out_path)
    shards = _read_shards(paths)
    _check_cut(shards)
    _check_plan(shards)
    _check_instrument(shards)
    _check_serving(shards)
    _check_unlocked(shards)
    for shard in shards:
        _scan(shard)
    plan = _plan(shards)
    _check_slots(plan, shards)
    header = _merged_header(shards, [str(s.path) for s in shards])
    lines = _write(out_path, plan, shards, header)
    return MergeSummary(
        folder=out_path,
        shards=len(shards),
        slots=plan.episodes,
        lines=lines,
        tokens=sum(s.tokens for s in shards),
    )
