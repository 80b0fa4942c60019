"""History: how many tokens of earlier tool work sit in the conversation (t0 ... t2400, any T >= 0).

The base task with a seeded history of read calls from the block, each answered ok (N24), whose
draft.history_tokens (each message's canonical JSON, counted with the pinned tokenizer) is the
level within two (N23); the last seeded query is lengthened or shortened to land in the band.
t0 has no history, so its prompt is a plain string, while every T > 0 prompt is a message list
(the user request, then the seeded pairs): the request text itself is the same at every level
(N6). A level above 0 but below the smallest call/answer pair (about 80 tokens, seed-dependent)
has no task and is refused with ArmError naming the smallest buildable level at that seed.
The history has no control arm: length is its own factor.
"""

from __future__ import annotations

from dataclasses import replace

from poisson_tasks.arms import ArmSpec, arm_id
from poisson_tasks.errors import ArmError
from poisson_tasks.generator.draft import Draft, base_block, base_task, padded_history
from poisson_tasks.generator.scenario import Scenario
from poisson_tasks.generator.tools import stage_tool
from poisson_tasks.transcript import history_tokens

__all__ = ["build", "history_tokens"]


def build(spec: ArmSpec, sc: Scenario) -> Draft:
    right = {s: stage_tool(sc.cls, s) for s in (1, 2)}
    block = base_block(sc, right)
    reads = [b.name for b in block if b.kind == "read"]
    try:
        history = padded_history(sc, reads, spec.level)
    except ValueError as exc:
        raise ArmError(
            f"{arm_id(spec)} at seed {sc.seed}: {exc}; use history:t0 or a level of at least "
            "100 tokens"
        ) from None
    return replace(base_task(sc, block, right), history=history)
