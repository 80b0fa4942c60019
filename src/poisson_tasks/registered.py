"""What a stored pre-registration registers, recomputed from the document alone.

A run folder's run.json stores the pre-registration its run was made with (its JSON form, as
validate left it) beside copies of what that document decides: the plan's arms, seeds and
attempts, the thresholds, the concurrency, and for a shard or a merge the plan hash. Those copies are what a card
and a merge read, so a reader holds each one to the document (runfolder.check_header); this
module recomputes them. It reads a document from another machine: every size is bounded by the
limits `validate` enforces before anything is derived from it (deriving seeds is work), and a
document that is not as a run writes it is refused in one line (RunFolderError).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from poisson_tasks.arms import arm_id, parse_arm_id
from poisson_tasks.bundle import digest
from poisson_tasks.errors import ArmError, RunFolderError
from poisson_tasks.prereg import (
    MAX_ARMS,
    MAX_ATTEMPTS,
    MAX_EPISODES,
    MAX_SEED_STRING,
    MAX_TASKS,
    Thresholds,
    derive_seeds,
    planned_spec,
    seed_list_hash,
)

__all__ = ["PLACEMENT", "Registered", "placement_free", "plan_hash", "registered"]

PLACEMENT = ("model.base_url",)  # where a shard reached its server: not part of the plan hash


def placement_free(document: dict[str, Any]) -> dict[str, Any]:
    """A pre-registration's JSON form less the address of its endpoint (PLACEMENT)."""
    model = document.get("model")
    if not isinstance(model, dict):
        return dict(document)
    return {**document, "model": {k: v for k, v in model.items() if k != "base_url"}}


def plan_hash(document: dict[str, Any]) -> str:
    """The hash every shard of one study records: the pre-registration less its placement."""
    return digest(placement_free(document))


@dataclass(frozen=True)
class Registered:
    """A stored pre-registration's own hash and plan hash, and the plan it registers."""

    preregistration_hash: str
    plan_hash: str
    arms: tuple[str, ...]
    seeds: tuple[int, ...]
    seed_list_hash: str
    attempts: int
    thresholds: Thresholds
    concurrency: int | None = None  # execution.concurrency; None in a document without it

    @property
    def tasks(self) -> int:
        """Arms x seeds: the most shards the plan can be cut into (a shard holds whole tasks)."""
        return len(self.arms) * len(self.seeds)


def _damaged(source: Path, what: str) -> RunFolderError:
    return RunFolderError(
        f"{source}: preregistration.{what}: the folder is damaged or from another version"
    )


def _field(design: Mapping[str, Any], key: str, kind: type, source: Path) -> Any:
    value = design.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise _damaged(source, f"design.{key} is not {kind.__name__} as a run writes it")
    return value


@functools.lru_cache(maxsize=8)
def _derived_seeds(seed_string: str, tasks: int) -> tuple[int, ...]:
    return tuple(derive_seeds(seed_string, tasks))


def _arms(design: Mapping[str, Any], source: Path) -> tuple[str, ...]:
    """design.arms as the plan holds them: under the design's split and strictness."""
    arms = _field(design, "arms", list, source)
    split, strictness = design.get("split", "eval"), design.get("strictness", "strict")
    if len(arms) > MAX_ARMS or not all(isinstance(arm, str) for arm in arms):
        raise _damaged(source, f"design.arms is not a list of at most {MAX_ARMS} arm ids")
    if split not in ("eval", "train") or strictness not in ("strict", "leaky"):
        raise _damaged(source, "design.split or design.strictness is not one a run writes")
    try:
        return tuple(arm_id(planned_spec(parse_arm_id(arm), split, strictness)) for arm in arms)
    except ArmError as exc:
        raise RunFolderError(f"{source}: preregistration.design.arms: {exc}") from None


def _seeds(design: Mapping[str, Any], source: Path) -> tuple[int, ...]:
    """The seeds design.seed_string and design.tasks derive, their sizes bounded first."""
    seed_string = _field(design, "seed_string", str, source)
    tasks = _field(design, "tasks", int, source)
    if not 1 <= tasks <= MAX_TASKS:
        raise _damaged(source, f"design.tasks {tasks} is outside 1 to {MAX_TASKS:,}")
    if not seed_string.strip() or len(seed_string) > MAX_SEED_STRING:
        raise _damaged(source, f"design.seed_string is not 1 to {MAX_SEED_STRING:,} characters")
    return _derived_seeds(seed_string, tasks)


def _thresholds(document: Mapping[str, Any], source: Path) -> Thresholds:
    try:
        return Thresholds.model_validate(document.get("thresholds") or {})
    except ValidationError as exc:
        raise _damaged(source, f"thresholds ({str(exc).splitlines()[0]})") from None


def _concurrency(document: Mapping[str, Any], source: Path) -> int | None:
    execution = document.get("execution")
    value = execution.get("concurrency") if isinstance(execution, Mapping) else None
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise _damaged(source, "execution.concurrency is not a positive integer as a run writes it")
    return value


def registered(document: dict[str, Any], source: Path) -> Registered:
    """What `document` (a stored pre-registration; `source` names the file it came from)
    registers. RunFolderError in one line where it is not as a run writes one."""
    design = document.get("design")
    if not isinstance(design, Mapping):
        raise _damaged(source, "design is not a mapping")
    arms = _arms(design, source)
    seeds = _seeds(design, source)
    attempts = _field(design, "attempts", int, source)
    if not 1 <= attempts <= MAX_ATTEMPTS or len(arms) * len(seeds) * attempts > MAX_EPISODES:
        raise _damaged(
            source,
            f"design.attempts {attempts} is outside 1 to {MAX_ATTEMPTS:,}, or the plan above "
            f"{MAX_EPISODES:,} episodes",
        )
    try:
        hashes = digest(document), plan_hash(document)
    except TypeError:  # orjson: an integer wider than 64 bits, which no run writes
        raise RunFolderError(
            f"{source}: preregistration holds an integer wider than 64 bits, which no run "
            "writes and no hash is computed over: the folder is damaged or from another version"
        ) from None
    return Registered(
        preregistration_hash=hashes[0],
        plan_hash=hashes[1],
        arms=arms,
        seeds=seeds,
        seed_list_hash=seed_list_hash(seeds),
        attempts=attempts,
        thresholds=_thresholds(document, source),
        concurrency=_concurrency(document, source),
    )
