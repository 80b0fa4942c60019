"""A run's plan as slots: the one check of an episode line against its folder's plan."""

from __future__ import annotations

from array import array

from poisson_tasks.arms import ArmSpec, parse_arm_id
from poisson_tasks.errors import ArmError, RunFolderError
from poisson_tasks.runfolder.schema import RunHeader
from poisson_tasks.verifier import INSTRUMENT_OUTCOMES


class PlanSlots:
    """A run header's plan as lookups, each arm id parsed once, and a slot per planned (arm,
    seed, attempt) holding the line that scored it (0: none yet). The one integrity check of an
    episode line against its folder's plan, which `card` (calibration.records) and `run
    --resume` (runner.folder) both run: a line outside the plan, or a second scored line for one
    attempt, is a damaged folder."""

    def __init__(self, header: RunHeader) -> None:
        self.seeds = {seed: index for index, seed in enumerate(dict.fromkeys(header.seeds))}
        self.attempts = header.attempts
        self.specs: dict[str, tuple[int, ArmSpec]] = {}
        for arm in header.arms:
            try:
                spec = parse_arm_id(arm)
            except ArmError as exc:
                raise RunFolderError(f"run.json: arms: {exc}") from exc
            self.specs.setdefault(arm, (len(self.specs), spec))
        self.scored_at = array("q", bytes(8 * len(self.specs) * len(self.seeds) * self.attempts))

    def locate(
        self, source: str, number: int, arm: str, seed: int, attempt: int
    ) -> tuple[int, ArmSpec]:
        """The line's slot, as its index in plan order, and its arm, once the slot is found inside
        the plan."""
        found = self.specs.get(arm)
        if found is None:
            raise RunFolderError(f"{source}:{number}: arm {arm!r} is not in run.json's plan")
        arm_index, spec = found
        seed_index = self.seeds.get(seed)
        if seed_index is None:
            raise RunFolderError(f"{source}:{number}: seed {seed} is not in run.json's seed list")
        if not 0 <= attempt < self.attempts:
            raise RunFolderError(
                f"{source}:{number}: attempt {attempt} is outside 0..{self.attempts - 1} "
                f"(attempts are numbered from 0; the plan has {self.attempts})"
            )
        return (arm_index * len(self.seeds) + seed_index) * self.attempts + attempt, spec

    def check_slot(
        self,
        source: str,
        number: int,
        arm: str,
        seed: int,
        attempt: int,
        min_calls: int,
        outcome: str,
    ) -> ArmSpec:
        """The line's arm, once the line is found inside the plan and its slot not scored
        before (an instrument failure may be retried; a scored attempt is run once)."""
        slot, spec = self.locate(source, number, arm, seed, attempt)
        if min_calls != spec.min_calls:
            raise RunFolderError(
                f"{source}:{number}: min_calls {min_calls} disagrees with {arm}'s {spec.min_calls}"
            )
        if outcome not in INSTRUMENT_OUTCOMES:
            if self.scored_at[slot]:
                raise RunFolderError(
                    f"{source}:{number}: {arm} seed {seed} attempt {attempt} was already scored at "
                    f"line {self.scored_at[slot]}; an attempt is run once (only an instrument "
                    "failure may be retried)"
                )
            self.scored_at[slot] = number
        return spec
