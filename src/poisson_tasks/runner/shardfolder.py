"""A shard folder from another machine, checked before a merge trusts a byte of it.

A shard folder is input: it was written elsewhere and may be damaged, edited or forged, so the
merge reads it as it would read a file a user typed. Its run.json is read within its limit and
held to the pre-registration it stores (runfolder.check_header: the document's hash, the plan's
arms, seeds, attempts and thresholds, the shard's plan hash, and its index and count of shards
bounded by the plan's tasks before anything is sized by them). Here the rest is checked against
the plan this install validates from that document: the shard's cut (rule, slots and their
digest, budget share), its sessions, and every episode line (`scan_lines`): inside the plan, in
this shard's own slots, naming one of the folder's sessions, scored at most once (the card's own
check, runfolder.PlanSlots). What is kept per line is three integers (its slot and where it
lies in the file), so memory is the plan's size plus a small fraction of the file's. Each
refusal is one MergeError line naming the folder and the fix.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from poisson_tasks.errors import MergeError, RunFolderError
from poisson_tasks.files import lines_limited, open_regular, os_problem
from poisson_tasks.prereg import Plan, Slot
from poisson_tasks.runfolder import (
    EPISODES,
    HEADER,
    LINE_MAX_BYTES,
    EpisodeLine,
    PlanSlots,
    RunHeader,
    is_run_folder,
    not_a_run_folder,
    open_run,
)
from poisson_tasks.runner.shard import SHARD_RULE, budget_share, slots_digest

__all__ = ["Cut", "ShardFolder", "read_shard_folder"]

_AGAIN = "run that shard again into a new folder and merge again"


@dataclass
class ShardFolder:
    """One shard folder as the merge reads it: its header, then (scan_lines) each line's slot in
    plan order, byte offset and length, in file order, its tokens and the sha256 of its lines."""

    path: Path
    header: RunHeader
    slots: array[int] = field(default_factory=lambda: array("q"))
    offsets: array[int] = field(default_factory=lambda: array("q"))
    lengths: array[int] = field(default_factory=lambda: array("q"))
    tokens: int = 0
    records_sha256: str = ""

    @property
    def index(self) -> int:
        assert self.header.shard is not None
        return self.header.shard.index

    @property
    def count(self) -> int:
        assert self.header.shard is not None
        return self.header.shard.count

    @property
    def name(self) -> str:
        return f"shard {self.index}/{self.count} ({self.path})"


def read_shard_folder(path: Path) -> ShardFolder:
    """The folder's header, held to its own pre-registration; refused unless it is a shard
    folder (not a whole run, not a merge) that records at least one session."""
    if not is_run_folder(path):  # merge's own error, in the words every command uses
        fix = "give the --out folders of `poisson-tasks run PREREG --shard i/n`"
        raise MergeError(str(not_a_run_folder(path, fix)))
    try:
        header = open_run(path).header
    except RunFolderError as exc:
        raise MergeError(str(exc)) from None
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
    if not header.sessions:
        raise MergeError(
            f"{path / HEADER} records no session, and every run records the session that made "
            f"it: that shard folder is damaged; {_AGAIN}"
        )
    return ShardFolder(path, header)


@dataclass(frozen=True)
class Cut:
    """The plan cut into its shards as this install cuts it: each task's shard (arm x seed, in
    plan order), and each shard's slots."""

    plan: Plan
    shards: list[list[Slot]]
    owners: array[int]

    @classmethod
    def of(cls, plan: Plan, shards: list[list[Slot]]) -> Cut:
        seeds = {seed: index for index, seed in enumerate(plan.seeds)}
        arms = {arm: index for index, arm in enumerate(plan.arms)}
        owners = array("i", bytes(4 * len(arms) * len(seeds)))
        for index, slots in enumerate(shards):
            for slot in slots:
                owners[arms[slot.arm_id] * len(seeds) + seeds[slot.seed]] = index
        return cls(plan, shards, owners)

    def owner(self, slot_index: int) -> int:
        """The shard that runs the slot at `slot_index` (plan order)."""
        return self.owners[slot_index // self.plan.attempts]


def check_shard_record(shard: ShardFolder, cut: Cut) -> None:
    """The shard's record against the plan's cut: its rule, how many slots it holds and their
    digest, and its budget share (the study's caps over its count)."""
    record = shard.header.shard
    assert record is not None
    if record.rule != SHARD_RULE:
        raise MergeError(
            f"{shard.name} was cut by the rule {record.rule}, this install cuts by {SHARD_RULE}: "
            "merge with the poisson-tasks build that ran the shards"
        )
    mine = cut.shards[record.index]
    if record.slots != len(mine) or record.slots_sha256 != slots_digest(mine):
        raise MergeError(
            f"{shard.name} holds another cut of the plan than this install makes (its slots or "
            "their digest differ): merge with the poisson-tasks build that ran the shards"
        )
    share = budget_share(cut.plan.preregistration.budget, record.count).model_dump(mode="json")
    if record.budget != share:
        raise MergeError(
            f"{shard.path / HEADER}: shard.budget is not the study's budget over "
            f"{record.count} shards ({share}): run.json was edited after its run; restore it as "
            f"the run wrote it, or {_AGAIN}"
        )


def scan_lines(
    shard: ShardFolder,
    cut: Cut,
    slots: PlanSlots,
    held: array[int],
    names: list[str],
) -> None:
    """Every complete line of the shard's episodes.jsonl, checked and kept (the module doc).

    `slots` is the card's check of each line against the plan (an attempt scored twice, min_calls
    that disagree), shared by every shard: a shard holds only its own slots, so a slot scored twice
    was scored twice in one folder. `held` records, per slot in plan order, the shard (plus one)
    whose lines hold it, so a slot of another shard is named as held twice or as misplaced;
    `names` names each shard by its index."""
    path = shard.path / EPISODES
    hasher = hashlib.sha256()
    try:
        fh = open_regular(path)
    except OSError as exc:
        raise MergeError(f"{path} cannot be read: {os_problem(exc)}") from None
    with fh:
        try:
            lines = lines_limited(fh, LINE_MAX_BYTES, str(path))
            _scan(shard, path, lines, hasher, _Checks(cut, slots, held, names))
        except OSError as exc:
            raise MergeError(f"{path} cannot be read: {os_problem(exc)}") from None
    shard.records_sha256 = hasher.hexdigest()


@dataclass(frozen=True)
class _Checks:
    """What scan_lines holds each line to."""

    cut: Cut
    slots: PlanSlots
    held: array[int]
    names: list[str]


def _scan(
    shard: ShardFolder, path: Path, lines: Iterator[bytes], hasher: Any, checks: _Checks
) -> None:
    slots, held = checks.slots, checks.held
    sessions = len(shard.header.sessions)
    offset = 0
    for number, raw in enumerate(lines, start=1):
        if not raw.endswith(b"\n"):
            break  # a torn last line (a kill mid-write): never counted, its slot not run
        hasher.update(raw)
        try:
            line = EpisodeLine.model_validate_json(raw)
        except ValidationError as exc:
            raise MergeError(
                f"{path}:{number} is not an episode line ({str(exc).splitlines()[0]}): that "
                f"shard folder is damaged; {_AGAIN}"
            ) from None
        try:
            index, _ = slots.locate(str(path), number, line.arm_id, line.seed, line.attempt)
        except RunFolderError as exc:
            raise MergeError(f"{exc}: that folder is not this study's; {_AGAIN}") from None
        _check_owner(shard, line, index, checks)
        if not 0 <= line.session < sessions:
            raise MergeError(
                f"{path}:{number} names session {line.session}, which its {HEADER} does not "
                f"record (it records sessions 0 to {sessions - 1}): that shard folder is "
                f"damaged; {_AGAIN}"
            )
        try:
            slots.check_slot(
                str(path),
                number,
                line.arm_id,
                line.seed,
                line.attempt,
                line.min_calls,
                line.outcome,
            )
        except RunFolderError as exc:
            raise MergeError(f"{exc}: that shard folder is damaged; {_AGAIN}") from None
        usage = line.usage
        shard.tokens += (
            (usage.uncached_input_tokens or 0)
            + (usage.cached_input_tokens or 0)
            + (usage.completion_tokens or 0)
        )
        held[index] = shard.index + 1
        shard.slots.append(index)
        shard.offsets.append(offset)
        shard.lengths.append(len(raw))
        offset += len(raw)


def slot_text(slot: Slot) -> str:
    return f"{slot.arm_id} seed {slot.seed} attempt {slot.attempt}"


def _check_owner(shard: ShardFolder, line: EpisodeLine, index: int, checks: _Checks) -> None:
    """The line's slot is this shard's own (the cut); a slot another shard already holds is named
    as duplicated, any other as misplaced."""
    owner = checks.cut.owner(index)
    if owner == shard.index:
        return
    slot = slot_text(Slot(line.arm_id, line.seed, line.attempt))
    if checks.held[index]:
        other = checks.names[checks.held[index] - 1]
        raise MergeError(
            f"slot {slot} is duplicated: {other} and {shard.name} both hold "
            f"it, and it is shard {owner}/{shard.count}'s alone; run the shard that should not "
            "hold it again into a new folder, and merge again"
        )
    raise MergeError(
        f"{shard.name} holds {slot}, which is shard {owner}/{shard.count}'s: that folder was not "
        f"made by its own --shard; {_AGAIN}"
    )
