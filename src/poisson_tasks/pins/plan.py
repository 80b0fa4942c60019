"""check_plan(arms, seeds): the pin ledger over a study's arms, one contrast per knob and seed.

Arms are grouped into contrasts by (knob, split, strictness); each group is checked at every
seed with check_pins, and the group's reports are kept whole and summarised row by row.
"""

from __future__ import annotations

import multiprocessing
import os
import re
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor

from pydantic import BaseModel, ConfigDict

from poisson_tasks.arms import ArmSpec, arm_id, parse_arm_id
from poisson_tasks.errors import PinError
from poisson_tasks.generator import generate
from poisson_tasks.lifetime import die_with_parent
from poisson_tasks.pins.check import NAME_WIDTH, Figure, PinReport, PinVerdict, check_pins
from poisson_tasks.pins.measure import measure_pins
from poisson_tasks.pins.rows import BY_ID, ROWS
from poisson_tasks.tokens import warm

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
_MAX_VIOLATION_LINES = 12
_VERDICT_ORDER: tuple[PinVerdict, ...] = (
    "violated",
    "held",
    "reported",
    "not applicable",
    "unmeasured",
)


DEFAULT_SEEDS = "0-59"
MAX_WORKERS = 64  # generate --workers: processes the pin ledger may fork


PlanTargets = Callable[[], tuple[Sequence[str], Sequence[int]]]


def pin_targets(
    *,
    arm: str | None = None,
    plan: PlanTargets | None = None,
    arms: str | None = None,
    seeds: str | None = None,
) -> tuple[list[str], list[int]]:
    """The arms and seeds `generate --plan/--arms` checks; PinError names a bad combination.

    --plan: `plan` reads a pre-registration's arms (with the design's split and strictness) and
    derived seeds; the caller passes it (the ledger sits below the pre-registration, which the
    CLI loads). It is called only once the options are known to fit together. --arms takes ids
    and --seeds ranges.
    """
    if plan is not None and arms is not None:
        raise PinError("give --plan or --arms, not both: the plan lists its own arms")
    if arm is not None:
        raise PinError(f"ARM {arm!r} with --plan/--arms: put it in --arms, e.g. --arms {arm}")
    if plan is not None:
        if seeds is not None:
            raise PinError("--seeds comes from the plan (design.seed_string and tasks); drop it")
        plan_arms, plan_seeds = plan()
        return list(plan_arms), list(plan_seeds)
    ids = [a.strip() for a in (arms or "").split(",") if a.strip()]
    if not ids:
        raise PinError("--arms is empty: list arm ids, e.g. --arms depth:d1,depth:d3,depth:d1+h8")
    for arm_name in ids:
        parse_arm_id(arm_name)
    return ids, parse_seeds(DEFAULT_SEEDS if seeds is None else seeds)


MAX_SEEDS = 100_000  # seeds one pin check may cover (each is a generated task per arm)


def parse_seeds(text: str) -> list[int]:
    """Seeds from `0-59`, `7` or `0-9,20,30-31`, in the order written, without repeats."""
    shown = text if len(text) <= 60 else text[:57] + "..."
    out: dict[int, None] = {}
    for part in text.split(","):
        match = _RANGE.match(part.strip())
        if match is None or len(match[1]) > 19 or len(match[2] or "") > 19:
            raise PinError(f"--seeds {shown!r}: write ranges and numbers like 0-59 or 0-9,20")
        lo, hi = int(match[1]), int(match[2] if match[2] is not None else match[1])
        if hi < lo:
            raise PinError(f"--seeds {shown!r}: range {lo}-{hi} runs backwards; write {hi}-{lo}")
        if hi >= 2**63 or len(out) + (hi - lo + 1) > MAX_SEEDS:
            raise PinError(
                f"--seeds {shown!r}: at most {MAX_SEEDS:,} seeds, each below 2^63; "
                "check a smaller range"
            )
        out.update(dict.fromkeys(range(lo, hi + 1)))
    return list(out)


class ContrastSummary(BaseModel):
    """One contrast group (a knob's arms at one split and strictness) over every seed."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    knob: str
    split: str
    strictness: str
    arms: list[str]
    seeds: list[int]
    reports: list[PinReport]

    @property
    def refused(self) -> bool:
        return any(r.refused for r in self.reports)

    @property
    def refused_seeds(self) -> list[int]:
        return [r.seed for r in self.reports if r.refused]

    def lines(self) -> list[str]:
        """Per row: the verdicts over the seeds and each arm's figure (a range over seeds)."""
        seed_count = len(self.reports)
        out = [
            f"contrast {self.knob} ({self.split}, {self.strictness}) · {len(self.arms)} arms · "
            f"{seed_count} seed{'s' if seed_count != 1 else ''} ({_seed_text(self.seeds)})",
            f"  arms: {', '.join(self.arms)}",
        ]
        for index, row in enumerate(ROWS):
            verdicts = [r.rows[index].verdict for r in self.reports]
            tally = ", ".join(
                f"{v} {verdicts.count(v)}/{seed_count}" if seed_count > 1 else v
                for v in _VERDICT_ORDER
                if v in verdicts
            )
            figures = _figures_over_seeds([r.rows[index].values for r in self.reports], self.arms)
            detail = self.reports[0].rows[index].detail if seed_count == 1 else ""
            cells = (f"{row.id:<4} {row.name:<{NAME_WIDTH}}  {tally:<23}", figures, detail)
            out.append("  " + "  ".join(x for x in cells if x))
        violations = [(r.seed, v) for r in self.reports for v in r.violations]
        for seed, violation in violations[:_MAX_VIOLATION_LINES]:
            out.append(f"  seed {seed}: {violation.line()}")
        if len(violations) > _MAX_VIOLATION_LINES:
            out.append(f"  ... and {len(violations) - _MAX_VIOLATION_LINES} more violations")
        refused = self.refused_seeds
        out.append(
            f"  refused at {len(refused)} of {seed_count} seeds ({_seed_text(refused)})"
            if refused
            else "  not refused"
        )
        return out


class PlanReport(BaseModel):
    """Every contrast of a plan; refused when any contrast is refused at any seed."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    contrasts: list[ContrastSummary]

    @property
    def refused(self) -> bool:
        return any(c.refused for c in self.contrasts)

    def lines(self) -> list[str]:
        out: list[str] = []
        for summary in self.contrasts:
            out += [*summary.lines(), ""]
        return out[:-1] if out else out

    def message(self) -> str:
        """One line naming each refused contrast, its rows and the seeds they were refused at."""
        parts = []
        for summary in self.contrasts:
            if not summary.refused:
                continue
            rows = [
                BY_ID[row].label
                for row in sorted(
                    {v.row for r in summary.reports for v in r.violations}, key=_row_key
                )
            ]
            parts.append(
                f"{summary.knob} ({', '.join(rows)} at seed{'s' if len(summary.refused_seeds) > 1 else ''} "
                f"{_seed_text(summary.refused_seeds)})"
            )
        if not parts:
            return f"pin ledger: {len(self.contrasts)} contrasts held"
        return "pin ledger refused " + "; ".join(parts)


def _row_key(row: str) -> int:
    return int(row[1:])


def _seed_text(seeds: Sequence[int]) -> str:
    """0-59 for a run of seeds, else the first few and a count."""
    if not seeds:
        return "none"
    if list(seeds) == list(range(seeds[0], seeds[0] + len(seeds))):
        return str(seeds[0]) if len(seeds) == 1 else f"{seeds[0]}-{seeds[-1]}"
    head = ",".join(map(str, seeds[:6]))
    return head if len(seeds) <= 6 else f"{head},... ({len(seeds)})"


def _figures_over_seeds(per_seed: list[dict[str, Figure]], arms: list[str]) -> str:
    """Each arm's figures over the seeds: one value, a min..max range, or a count of values."""
    by_arm: dict[str, str] = {}
    for arm_name in arms:
        vals = [v[arm_name] for v in per_seed if arm_name in v]
        if not vals:
            continue
        distinct = sorted(set(vals), key=str)
        if len(distinct) == 1:
            by_arm[arm_name] = str(distinct[0])
        elif all(isinstance(v, int) for v in vals):
            by_arm[arm_name] = f"{min(vals)}..{max(vals)}"
        else:
            by_arm[arm_name] = f"{vals[0]} (+{len(distinct) - 1} more)"
    if not by_arm:
        return ""
    if len(set(by_arm.values())) == 1 and len(by_arm) > 1:
        return f"all {next(iter(by_arm.values()))}"
    return " ".join(f"{a}={v}" for a, v in by_arm.items())


def contrast_groups(arms: Iterable[ArmSpec | str]) -> list[list[ArmSpec]]:
    """Arms grouped by (knob, split, strictness), groups and arms in the order first given."""
    groups: dict[tuple[str, str, str], list[ArmSpec]] = {}
    for arm_name in arms:
        spec = parse_arm_id(arm_name) if isinstance(arm_name, str) else arm_name
        group = groups.setdefault((spec.knob, spec.split, spec.strictness), [])
        if spec not in group:
            group.append(spec)
    return list(groups.values())


def _check_contrast(job: tuple[tuple[str, ...], int]) -> PinReport:
    """One contrast: its arms generated at one seed, measured and held to the ledger."""
    ids, seed = job
    bundles = {a: generate(a, seed) for a in ids}
    measured = {k: measure_pins(b) for k, b in bundles.items()}
    return check_pins(bundles, measurements=measured)


def check_plan(
    arms: Iterable[ArmSpec | str], seeds: Iterable[int], *, workers: int = 1
) -> PlanReport:
    """Generate every arm at every seed and hold the pin ledger over each contrast.

    With workers > 1 the contrasts are spread over that many processes; each contrast is a pure
    function of its arms and seed, so the report is the same whatever the number of workers.
    """
    seed_list = list(seeds)
    if not seed_list:
        raise PinError("no seeds to check: give at least one, e.g. --seeds 0-59")
    if not 1 <= workers <= MAX_WORKERS:
        raise PinError(
            f"--workers {workers}: give 1 to {MAX_WORKERS} processes (one per core is plenty)"
        )
    groups = contrast_groups(arms)
    jobs = [(tuple(arm_id(s) for s in g), seed) for g in groups for seed in seed_list]
    if workers == 1 or len(jobs) < 2:
        results = [_check_contrast(j) for j in jobs]
    else:
        methods = multiprocessing.get_all_start_methods()
        ctx = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
        warm()  # built once here: forked workers inherit the tokenizer instead of each building it
        workers = min(workers, len(jobs))  # never a process with nothing to do
        with ProcessPoolExecutor(
            max_workers=workers,
            mp_context=ctx,
            initializer=die_with_parent,  # a killed parent leaves no worker behind
            initargs=(os.getpid(),),
        ) as pool:
            results = list(
                pool.map(_check_contrast, jobs, chunksize=max(1, len(jobs) // (4 * workers)))
            )
    summaries = []
    for gi, group in enumerate(groups):
        reports = results[gi * len(seed_list) : (gi + 1) * len(seed_list)]
        first = group[0]
        summaries.append(
            ContrastSummary(
                knob=first.knob,
                split=first.split,
                strictness=first.strictness,
                arms=reports[0].arms,
                seeds=seed_list,
                reports=reports,
            )
        )
    return PlanReport(contrasts=summaries)
