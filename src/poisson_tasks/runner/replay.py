"""A replay's sample: which scored slots of a run are run again, drawn the same way every time.

`poisson-tasks replay RUN_DIR --sample N [--seed S]` (and `design.replay: {sample: N, seed: S}`,
run after the main run) runs N of the run's scored slots again, through the same runner, into the
run folder RUN_DIR/replay/ (runfolder.REPLAY): same plan, endpoint, decoding and per-attempt seeds.

The draw (rule REPLAY_RULE), a pure function of the scored slots, the plan and (N, S): each arm's
scored slots are ordered by sha256("S|arm|seed|attempt"); the arms, in the order of
sha256("S|arm"), are dealt one slot each per round, an arm with none left skipped, until N are
dealt. So the sample spreads over every arm as evenly as the scored slots allow (stratified by
arm), and the same (slots, N, S) give the same sample in every process. The sample runs in plan
order. Nothing here touches the network; runner/run.py's replay_plan runs it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

from poisson_tasks.bundle import digest
from poisson_tasks.errors import ReplayError
from poisson_tasks.prereg import Plan, Slot
from poisson_tasks.runfolder import (
    REPLAY,
    ReplayRecord,
    RunHeader,
    is_run_folder,
    not_a_run_folder,
    open_run,
)

REPLAY_RULE = "poisson-tasks/replay@1"

__all__ = [
    "REPLAY_RULE",
    "check_replay_record",
    "draw_sample",
    "replay_folder",
    "replay_record",
    "replayable_header",
]


def _key(*parts: object) -> bytes:
    return hashlib.sha256("|".join(str(p) for p in parts).encode()).digest()


def draw_sample(scored: Iterable[Slot], plan: Plan, sample: int, seed: int) -> list[Slot]:
    """`sample` of the `scored` slots, dealt across arms round by round (module doc), in plan
    order; ReplayError in one line when `sample` is not 1 to the number of scored slots."""
    slots = sorted(set(scored))
    if sample < 1:
        raise ReplayError(
            f"--sample {sample}: a replay runs 1 or more of the run's scored slots; give --sample N "
            "with N from 1"
        )
    if sample > len(slots):
        raise ReplayError(
            f"--sample {sample} is more than the {len(slots)} scored slots the run holds: give "
            f"--sample {len(slots)} or fewer"
        )
    by_arm: dict[str, list[Slot]] = {}
    for slot in slots:
        by_arm.setdefault(slot.arm_id, []).append(slot)
    for arm, held in by_arm.items():
        held.sort(key=lambda slot: _key(seed, arm, slot.seed, slot.attempt))
    order = sorted(by_arm, key=lambda arm: _key(seed, arm))
    taken: list[Slot] = []
    depth = 0
    while len(taken) < sample:
        for arm in order:
            if depth < len(by_arm[arm]) and len(taken) < sample:
                taken.append(by_arm[arm][depth])
        depth += 1
    arms = {arm: index for index, arm in enumerate(plan.arms)}
    seeds = {task: index for index, task in enumerate(plan.seeds)}
    return sorted(
        taken,
        key=lambda slot: (arms.get(slot.arm_id, len(arms)), seeds.get(slot.seed, 0), slot.attempt),
    )


def replay_record(slots: list[Slot], seed: int, scored: int) -> ReplayRecord:
    """What the replay folder's header records about its sample."""
    listed = [(s.arm_id, s.seed, s.attempt) for s in slots]
    return ReplayRecord(
        sample=len(slots),
        seed=seed,
        rule=REPLAY_RULE,
        scored=scored,
        slots=listed,
        slots_sha256=digest([list(s) for s in listed]),
    )


def replay_folder(run_dir: Path) -> Path:
    """Where a run folder's replay goes: RUN_DIR/replay/."""
    return run_dir / REPLAY


def replayable_header(run_dir: Path) -> RunHeader:
    """The header of a run folder a replay can be drawn from (a whole run, a shard, or a merge):
    NotARunFolder where it holds no run, ReplayError where it is itself a replay."""
    if not is_run_folder(run_dir):
        raise not_a_run_folder(run_dir, "give the folder `poisson-tasks run` or `merge` wrote")
    header = open_run(run_dir).header
    if header.replay is not None:
        raise ReplayError(
            f"{run_dir} is itself a replay: give the run folder it belongs to ({run_dir.parent})"
        )
    return header


def check_replay_record(folder: Path, stored: ReplayRecord, drawn: ReplayRecord) -> None:
    """A replay folder is continued only with the sample it was drawn with; ReplayError naming
    the sample it holds otherwise (nothing written)."""
    if stored.slots_sha256 == drawn.slots_sha256 and stored.rule == drawn.rule:
        return
    if (stored.sample, stored.seed) != (drawn.sample, drawn.seed):
        raise ReplayError(
            f"{folder} holds a replay of {stored.sample} slots drawn with seed {stored.seed}: "
            f"continue it with --sample {stored.sample} --seed {stored.seed}, or move it away to "
            "draw another"
        )
    raise ReplayError(
        f"{folder} holds a replay drawn from the {stored.scored} slots the run had scored then; "
        f"the run now holds others, so the same --sample {stored.sample} --seed {stored.seed} "
        "draws another sample: move the replay folder away and replay again"
    )
