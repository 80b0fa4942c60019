"""A study cut into shards: a deterministic partition of a plan's slots, and each shard's budget.

`run PREREG --shard i/n` runs shard i (numbered from 0, as a Kubernetes completion index or a
SLURM array index) of n; `merge` puts the n folders back together (runner/merge.py).

The partition (rule SHARD_RULE). The unit is a task, an arm at a seed, with all its attempts, so
a task is generated once and its attempts share a server's prefix cache. Arms are taken in plan
order; each arm's T tasks are dealt so that every shard holds T // n of them (seed j of the first
n * (T // n) goes to shard j mod n), and the T mod n left over go one each to the T mod n shards
with the fewest expected model calls so far (ties to the lower index). A task's expected model calls are
its arm's reference turns (the calls a correct episode makes, plus its reply) times the
attempts: known from the arm alone, so the partition is a pure function of the plan and n, every
slot is in exactly one shard, every shard holds each arm's tasks within one, and the shards'
expected calls differ by at most one task's.

The plan hash. Every shard records the hash of its pre-registration less `model.base_url`, the
address where that shard reached its server: shards of one study may each talk to their own
replica. Everything else in the document, budget and execution included, is the study's.

Budgets. A study's token and dollar caps are the study's: each shard stops at its share, the cap
divided by n (tokens rounded down), which it records; the wall-clock cap is per session, as on one
machine, so it is every shard's own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from poisson_tasks.arms import parse_arm_id
from poisson_tasks.bundle import digest
from poisson_tasks.errors import ShardError
from poisson_tasks.prereg import Budget, Plan, Slot
from poisson_tasks.registered import plan_hash
from poisson_tasks.runfolder import ShardRecord, is_run_folder, open_run

SHARD_RULE = "poisson-tasks/shard@1"
_SHARD = re.compile(r"(\d{1,6})/(\d{1,6})")


@dataclass(frozen=True, slots=True)
class Shard:
    """Shard `index` (from 0) of `count`."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        """`i/n`, e.g. 0/4; ShardError in one line otherwise."""
        match = _SHARD.fullmatch(text.strip())
        if match is None:
            raise ShardError(
                f"--shard {text!r} is not i/n: give the shard's index (from 0) and the number of "
                "shards, e.g. --shard 0/4"
            )
        index, count = int(match.group(1)), int(match.group(2))
        if count < 1:
            raise ShardError(f"--shard {text}: the number of shards must be 1 or more")
        if index >= count:
            raise ShardError(
                f"--shard {text}: the index runs from 0 to {count - 1} (a Kubernetes completion "
                f"index or a SLURM array index 0-{count - 1}), not {index}"
            )
        return cls(index, count)

    @property
    def label(self) -> str:
        return f"{self.index}/{self.count}"


def partition(plan: Plan, count: int) -> list[list[Slot]]:
    """Every slot of the plan in exactly one of `count` shards, each shard in plan order."""
    tasks = len(plan.arms) * len(plan.seeds)
    if count < 1:
        raise ShardError(f"the number of shards must be 1 or more, got {count}")
    if count > tasks:
        raise ShardError(
            f"{count} shards cannot cut this plan: it holds {tasks} tasks ({len(plan.arms)} arms "
            f"x {len(plan.seeds)} seeds) and a shard holds whole tasks; use at most {tasks} shards"
        )
    load = [0] * count
    owner: dict[tuple[str, int], int] = {}
    for arm in plan.arms:
        weight = parse_arm_id(arm).reference_turns * plan.attempts
        seeds = plan.seeds
        dealt = (len(seeds) // count) * count
        for position, seed in enumerate(seeds[:dealt]):
            owner[(arm, seed)] = position % count
            load[position % count] += weight
        lightest = sorted(range(count), key=lambda index: (load[index], index))
        for seed, shard in zip(seeds[dealt:], lightest, strict=False):
            owner[(arm, seed)] = shard
            load[shard] += weight
    shards: list[list[Slot]] = [[] for _ in range(count)]
    for slot in plan.slots():
        shards[owner[(slot.arm_id, slot.seed)]].append(slot)
    return shards


def shard_slots(plan: Plan, shard: Shard) -> list[Slot]:
    """The slots shard `shard` runs, in plan order."""
    return partition(plan, shard.count)[shard.index]


def slots_digest(slots: list[Slot]) -> str:
    """The digest a shard records of its slots (merge recomputes it)."""
    return digest([list(s) for s in slots])


def budget_share(budget: Budget, count: int) -> Budget:
    """A shard's share of the study's caps: tokens // n, dollars / n; the wall clock its own."""
    return budget.model_copy(
        update={
            "tokens": budget.tokens // count,
            "dollars": None if budget.dollars is None else budget.dollars / count,
        }
    )


def shard_record(plan: Plan, shard: Shard) -> ShardRecord:
    """What a shard folder records about its shard (run.json's `shard`)."""
    slots = shard_slots(plan, shard)
    return ShardRecord(
        index=shard.index,
        count=shard.count,
        rule=SHARD_RULE,
        plan_hash=plan_hash(plan.preregistration.model_dump(mode="json")),
        slots=len(slots),
        slots_sha256=slots_digest(slots),
        budget=budget_share(plan.preregistration.budget, shard.count).model_dump(mode="json"),
    )


def stored_shard(folder: Path) -> Shard | None:
    """The shard a run folder holds (None for a whole run, or where there is no run.json yet):
    what `run --resume DIR` continues when no --shard is given."""
    if not is_run_folder(folder):
        return None
    record = open_run(folder).header.shard
    return None if record is None else Shard(record.index, record.count)
