"""Pin N13, realised first-request input tokens, from a run's records (reported, never refused).

Each episode line carries its first request's input tokens as the server counted them and the
pinned tokenizer's count of the same request (runfolder.Usage). Per arm the card gives both, and
the server's less the pinned, as medians over the arm's tasks (the first line of each task: every
attempt of a task sends the same first request). The row holds across a contrast's arms (the
arms of one knob, split and strictness, pins.plan.contrast_groups) when, on every seed all its
arms counted, the server's less the pinned count is the same on every arm within the ledger's
band (two tokens, transcript.BAND): then the token pins held in the pinned tokenizer's tokens
(N5, N6, N9, N20, N23, N26, N29, N32, N34) carry over into the model's own, the chat template
adding the same to every arm. Where they do not, the widest spread says by how much.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import median

from poisson_tasks.arms import parse_arm_id
from poisson_tasks.calibration.artifact import (
    FirstRequestArm,
    FirstRequestContrast,
    FirstRequestPin,
)
from poisson_tasks.calibration.tally import RunTally
from poisson_tasks.pins.plan import contrast_groups
from poisson_tasks.transcript import BAND

__all__ = ["first_request_pin"]


def _arm(arm: str, counts: dict[int, tuple[int, int]]) -> FirstRequestArm:
    if not counts:
        return FirstRequestArm(
            arm_id=arm, tasks=0, server_median=None, pinned_median=None, offset_median=None
        )
    pairs = list(counts.values())
    return FirstRequestArm(
        arm_id=arm,
        tasks=len(pairs),
        server_median=float(median(s for s, _ in pairs)),
        pinned_median=float(median(p for _, p in pairs)),
        offset_median=float(median(s - p for s, p in pairs)),
    )


def _contrast(
    knob: str, arms: list[str], counts: dict[str, dict[int, tuple[int, int]]], seeds: Sequence[int]
) -> FirstRequestContrast:
    shared = [seed for seed in seeds if all(seed in counts[arm] for arm in arms)]
    widest: tuple[int, int, dict[str, int]] | None = None
    held_seeds = 0
    for seed in shared:
        offsets = {arm: counts[arm][seed][0] - counts[arm][seed][1] for arm in arms}
        spread = max(offsets.values()) - min(offsets.values())
        if spread <= BAND:
            held_seeds += 1
        if widest is None or spread > widest[0]:
            widest = (spread, seed, offsets)
    return FirstRequestContrast(
        knob=knob,
        arms=arms,
        seeds=len(shared),
        held_seeds=held_seeds,
        held=held_seeds == len(shared) if shared else None,
        widest=widest[0] if widest else None,
        widest_seed=widest[1] if widest else None,
        widest_offsets=widest[2] if widest else {},
    )


def first_request_pin(
    tally: RunTally, arms: Sequence[str], seeds: Sequence[int]
) -> FirstRequestPin:
    """N13 per arm and per contrast of two or more arms, from a run's tally."""
    if not tally.first_pinned:
        return FirstRequestPin(status="not_recorded", band=BAND)
    counts = tally.first_requests
    if not any(counts.values()):
        return FirstRequestPin(status="no_server_count", band=BAND)
    named = {parse_arm_id(arm): arm for arm in arms}
    groups = [[named[spec] for spec in group] for group in contrast_groups(arms)]
    return FirstRequestPin(
        status="measured",
        band=BAND,
        arms=[_arm(arm, counts[arm]) for arm in arms],
        contrasts=[
            _contrast(parse_arm_id(group[0]).knob, group, counts, seeds)
            for group in groups
            if len(group) > 1
        ],
    )
