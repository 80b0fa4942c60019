"""The card's closing texts: what the card is, what it does not claim, and how depth is read.

Each "does not claim" line has a key and a condition; every line whose condition holds is on the
card, in the order below, and no other.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise

from poisson_tasks.arms import DEPTH_TOP, KNOB_DEFS, parse_arm_id
from poisson_tasks.calibration.artifact import Cell, Claim, KnobTable, PublishedFacts, Statements
from poisson_tasks.calibration.beside import measured_differently, short_hash
from poisson_tasks.calibration.provenance import Provenance
from poisson_tasks.errors import ArmError, PolicyError
from poisson_tasks.nouns import counted, noun
from poisson_tasks.policycatalogue import graded_rate, parse_model
from poisson_tasks.power import called_difference, mdd_worst_case
from poisson_tasks.prereg import Thresholds
from poisson_tasks.runfolder import stop_words
from poisson_tasks.supplied import markdown, markdown_code

PUBLISHED_DESIGN_TASKS = 60  # tasks per level in the published cards' design
TOP_DEPTH = DEPTH_TOP

__all__ = [
    "PUBLISHED_DESIGN_TASKS",
    "TOP_DEPTH",
    "build_statements",
    "can_tell",
    "graded_design",
    "served_phrase",
    "stale_hashes",
    "stale_text",
]

DEPTH_NOTE = (
    "At every depth level the whole eight-stage ladder is on offer, so below "
    f"d{TOP_DEPTH} a model can keep going past its goal stage. The strict rate therefore mixes two "
    "abilities, getting to the goal and stopping on it, and models differ in which one fails. "
    "This card reads depth on leaky pass@1, which asks only whether the goal was reached, "
    "compares those rates level by level in a table of their own, and shows in the overshoot "
    "column how often the record was carried further. Strict pass@1 is still computed, compared "
    f"and printed first in every table. At d{TOP_DEPTH} the goal is the top stage, nothing can "
    "overshoot, and the strict and leaky rates are the same."
)


_WHAT_MOVES = {
    "generator": "the tasks it measured are not the tasks this install generates",
    "engine": "the tools' answers it saw are not the ones this install's engine gives",
}


def stale_hashes(provenance: Provenance, installed: dict[str, str]) -> list[str]:
    """The builds (`generator`, `engine`) whose hash on the card is not this install's."""
    theirs = {"generator": provenance.generator_hash, "engine": provenance.engine_hash}
    return [name for name in ("generator", "engine") if theirs[name] != installed[name]]


def stale_text(provenance: Provenance, installed: dict[str, str], moved: Sequence[str]) -> str:
    """Which hash moved, from what to what, and what that changes: the one staleness wording."""
    theirs = {"generator": provenance.generator_hash, "engine": provenance.engine_hash}
    builds = " and ".join(
        f"{name} build {markdown(short_hash(theirs[name]))} (this install's is "
        f"{short_hash(installed[name])})"
        for name in moved
    )
    effects = "; ".join(_WHAT_MOVES[name] for name in moved)
    return f"it was made with {builds}: {effects}"


def served_phrase(provenance: Provenance) -> str:
    """How the model was reached, in a few words."""
    serving = provenance.serving
    if serving.kind == "api":
        return (
            f"through {markdown(serving.provider)}'s API"
            if serving.provider
            else "through a provider's API"
        )
    if serving.kind == "self-served":
        stack = " ".join(x for x in (serving.stack or serving.provider, serving.stack_version) if x)
        return f"on an endpoint its user served ({markdown(stack) or 'stack not reported'})"
    if serving.kind == "reference":
        return "by poisson-tasks' own reference endpoint"
    return "from an endpoint whose kind the run did not record"


def _direction(chances: Sequence[float], knob: str) -> str:
    """How a give-up chance moves up a knob's levels, in words."""
    steps = [b - a for a, b in pairwise(chances)]
    if all(step > 0 for step in steps):
        return f"more often at higher {knob}"
    if all(step < 0 for step in steps):
        return f"less often at higher {knob}"
    if all(step == 0 for step in steps):
        return f"equally at every {knob} level"
    return f"more often at some {knob} levels than at others"


def graded_design(policy: str | None, cells: Sequence[Cell]) -> str | None:
    """For a card of the `graded` fixture: the give-up chance its parameters set at each level on
    the card (read with the built-in defaults, the in-process server's), and that a difference
    between its levels is the one the fixture was built to have; None for any other policy."""
    try:
        spec = parse_model(policy or "")
        arms = [(cell, parse_arm_id(cell.arm_id)) for cell in cells]
    except (PolicyError, ArmError):
        return None
    if spec.name != "graded":
        return None
    knobs = list(dict.fromkeys(cell.knob for cell in cells))
    parts = []
    for knob in knobs:
        mine = sorted(
            ((cell, arm) for cell, arm in arms if cell.knob == knob and not cell.control),
            key=lambda pair: pair[1].level,
        )
        if not mine:
            continue
        chances = [graded_rate(spec, arm) for _, arm in mine]
        at = " and ".join(
            f"{chance:.3f} at {cell.arm_id}"
            for (cell, _), chance in zip(mine, chances, strict=True)
        )
        parts.append(at + (f", so {_direction(chances, knob)}" if len(mine) > 1 else ""))
    text = (
        "`graded` is the oracle built to give up after its own first call, with a chance its "
        f"parameters set for each level: {'; '.join(parts)}, by construction. A difference "
        "between its levels is therefore the one the fixture was built to have: this card shows "
        "the instrument resolving a known effect, not a property of any model."
    )
    if any(cell.control for cell in cells):
        text += (
            " Its control arms give up at the chance of the level they stand in for (it is hurt "
            "by length as well)."
            if spec.get("length_follows")
            else " Its control arms give up at the chance of their own level (length alone does "
            "not hurt it), so each should pass about as often as a level of its own depth."
        )
    one_call = [cell.arm_id for cell in cells if cell.min_calls == 1]
    if one_call:
        text += (
            " A task that one call completes passes whatever the chance: "
            f"{', '.join(one_call)} here."
        )
    return text


def _what_it_is(kind: str, provenance: Provenance, cells: Sequence[Cell], th: Thresholds) -> str:
    episodes = sum(c.episodes for c in cells)
    scored = sum(c.scored for c in cells)
    pct = f"{th.confidence * 100:g}%"
    designed = None
    if kind == "reference-policy":
        policy = provenance.serving.policy or provenance.model
        who = (
            f"This card is the record of the reference policy {markdown_code(policy)}, "
            "a scripted baseline served by poisson-tasks' own reference endpoint. It is not a "
            "language model, and its figures show how the instrument reads a known behaviour"
        )
        designed = graded_design(policy, cells)
    else:
        who = (
            f"This card is the record of {markdown_code(provenance.model)}, served "
            f"{served_phrase(provenance)}"
        )
    return (
        f"{who}, on {len(provenance.seeds)} generated {noun(len(provenance.seeds), 'task')} per "
        f"level with {counted(provenance.attempts, 'attempt')} at each: "
        f"{counted(episodes, 'episode')} over {counted(len(cells), 'arm')}, {scored} of them "
        "scored. "
        f"{designed + ' ' if designed else ''}"
        "A level's pass@1 is the average of its tasks' own pass rates, so each task counts once, "
        f"and its {pct} interval is an Agresti-Coull interval on the effective number of attempts "
        "(attempts at one task move together, so they count for less than independent ones), "
        "with an exact bound when every task passes or every task fails. Two neighbouring levels "
        f"are called different only when the {pct} interval of their paired difference, over "
        "the seeds both share, stays clear of zero, the difference is at least "
        f"{th.resolution:g}, and an exact sign test over the seeds whose rate differs agrees at "
        "the same level; otherwise the card says the difference is too small for this design "
        "to call. An interval marked few events rests on fewer than 15 passes or 15 failures and "
        "is wide."
    )


def can_tell(
    provenance: Provenance,
    cells: Sequence[Cell],
    knobs: Sequence[KnobTable],
    th: Thresholds,
) -> str:
    """The card's opening sentence: how finely it reads a level's rate, and the smallest
    difference between neighbouring levels its size calls at 80% power even in the worst case
    (power.called_difference at the card's own confidence), or that it compares none."""
    widths = [
        figure.high - figure.low
        for cell in cells
        if cell.published
        for figure in (cell.strict, cell.leaky)
        if figure is not None
    ]
    within = "within the interval beside it" + (
        f" (at most {max(widths):.2f} wide here)" if widths else ""
    )
    head = f"It tells each level's pass rate {within}"
    if not any(len(table.levels) > 1 for table in knobs):
        return f"{head}; it has one level of each knob, so it compares no levels."
    tasks = len(provenance.seeds)
    alpha = 1.0 - th.confidence
    per_level = f"{counted(tasks, 'task')} per level"
    if mdd_worst_case(tasks, alpha=alpha) > 1.0:
        return (
            f"{head}; with {per_level} no difference between neighbouring levels is sure to be "
            "called however large, and one is called only when the levels' tasks agree closely, "
            "so a pair that reads too small to call may still differ a great deal."
        )
    called = called_difference(tasks, th.resolution, alpha=alpha)
    return (
        f"{head}, and with {per_level} it calls a difference of {called:.2f} or more between "
        "neighbouring levels at 80% power even in the worst case; it cannot tell a smaller "
        "difference from none unless the levels' tasks agree closely, and it calls none "
        f"measured below {th.resolution:g}."
    )


def _arms_text(cells: Sequence[Cell]) -> str:
    return ", ".join(c.arm_id for c in cells)


@dataclass(frozen=True, slots=True)
class ClaimFacts:
    """What the "does not claim" lines are read from: the card's own facts, nothing else."""

    kind: str
    provenance: Provenance
    cells: Sequence[Cell]
    knobs: Sequence[KnobTable]
    installed: dict[str, str]
    published: Sequence[PublishedFacts]
    thresholds: Thresholds


def _claim(key: str, text: str) -> list[Claim]:
    return [Claim(key=key, text=text)]


def _one_model(facts: ClaimFacts) -> list[Claim]:
    who = "one reference policy" if facts.kind == "reference-policy" else "one model"
    return _claim(
        "one_model",
        f"These are {who}'s results on these generated tasks. They put no models in "
        "order and say nothing about any other model, or about tasks other than these.",
    )


def _reference_policy(facts: ClaimFacts) -> list[Claim]:
    if facts.kind != "reference-policy":
        return []
    return _claim(
        "reference_policy",
        "Its figures come from a scripted reference policy, not from a language model; "
        "they stand in for no model's results.",
    )


def _fewer_tasks(facts: ClaimFacts) -> list[Claim]:
    tasks = len(facts.provenance.seeds)
    if tasks >= PUBLISHED_DESIGN_TASKS:
        return []
    return _claim(
        "fewer_tasks",
        f"It has {counted(tasks, 'task')} per level, fewer than the "
        f"{PUBLISHED_DESIGN_TASKS} of the "
        "published design, so its intervals are wider than theirs and a pair it reads "
        "too small to call may still differ. That is the resolution of this design, "
        "not evidence that the levels are alike.",
    )


def _other_generator(facts: ClaimFacts) -> list[Claim]:
    mine = facts.provenance.generator_hash
    other = sorted({p.generator_hash for p in facts.published if p.generator_hash != mine})
    if not other:
        return []
    return _claim(
        "other_generator",
        "It was made with generator build "
        f"{markdown(short_hash(mine))}, not "
        f"the build the published cards were measured on "
        f"({', '.join(short_hash(h) for h in other)}), so it is not to be read beside them.",
    )


def _measured_differently(facts: ClaimFacts) -> list[Claim]:
    ways = sorted({w for p in facts.published for w in measured_differently(facts.provenance, p)})
    if not ways:
        return []
    return _claim(
        "measured_differently",
        f"It was measured differently from the published cards ({', '.join(ways)} "
        "differ), so none of its figures is to be set against theirs.",
    )


def _not_covered(facts: ClaimFacts) -> list[Claim]:
    plan = set(facts.provenance.arms)
    if any(plan & set(p.arms) for p in facts.published):
        return []
    return _claim(
        "not_covered",
        "No published card holds any level of this plan, so no figure here has a "
        "published figure to be read beside.",
    )


def _self_served(facts: ClaimFacts) -> list[Claim]:
    if facts.provenance.serving.kind != "self-served":
        return []
    return _claim(
        "self_served",
        "Its model was served by the person who ran it. The serving is pinned only as far "
        "as the server reported it, so the same weights served another way later would "
        "be another measurement.",
    )


def _experimental_text(table: KnobTable) -> str:
    """An experimental knob's line, read from this card's own strict comparisons and nothing
    else; the knob's KnobDef says that it is experimental and what else it is called."""
    comps = [c for c in table.comparisons if c.rate == "strict"]
    falls = [
        f"{c.lower.split(':', 1)[1]}→{c.upper.split(':', 1)[1]}"
        for c in comps
        if c.verdict == "distinguishable" and (c.diff or 0.0) > 0.0
    ]
    also = KNOB_DEFS[parse_arm_id(table.levels[0]).knob].also_called
    head = f"The {table.knob} knob{f' ({also})' if also else ''} is experimental"
    if falls:
        return (
            f"{head}. On this card the strict rate falls distinguishably at {', '.join(falls)}; "
            "that is this card's own measurement, not a calibrated difficulty setting."
        )
    small = sum(1 for c in comps if c.verdict == "too_small")
    left = sum(1 for c in comps if c.verdict == "left_out")
    return (
        f"{head}: on this card no adjacent pair of its levels shows the strict rate falling "
        f"distinguishably ({small} too small to call, {left} left out), so its rows do not show "
        "a difficulty setting."
    )


def _experimental(facts: ClaimFacts) -> list[Claim]:
    return [
        Claim(key=f"{table.knob}_experimental", text=_experimental_text(table))
        for table in facts.knobs
        if table.levels and KNOB_DEFS[parse_arm_id(table.levels[0]).knob].experimental
    ]


def _stale(facts: ClaimFacts) -> list[Claim]:
    moved = stale_hashes(facts.provenance, facts.installed)
    if not moved:
        return []
    return _claim("stale", f"It is stale: {stale_text(facts.provenance, facts.installed, moved)}.")


def _resumed(facts: ClaimFacts) -> list[Claim]:
    resumed = sum(c.resumed for c in facts.cells)
    if not resumed:  # a resume that ran nothing (the run was already complete) resumed nothing
        return []
    return _claim(
        "resumed",
        f"The run was interrupted and resumed, and {resumed} of its episodes were made "
        "after the resume. A resumed attempt is a new attempt, not a replay of the one it "
        "replaces.",
    )


def _pooled_servings(facts: ClaimFacts) -> list[Claim]:
    provenance = facts.provenance
    if not provenance.pooled_servings:
        return []
    changed = "; ".join(
        f"session #{s.index}: {markdown(s.serving_change)}"
        for s in provenance.sessions
        if s.serving_change
    )
    return _claim(
        "pooled_servings",
        "Its figures pool several servings: a resumed session was not served as the "
        f"first ({changed}), and the run went on with --accept-serving-change. Pin "
        "N10 did not hold across its sessions, so no figure here stands for one "
        "serving; the provenance lists every session's.",
    )


def _withheld(facts: ClaimFacts) -> list[Claim]:
    withheld = [c for c in facts.cells if not c.published]
    if not withheld:
        return []
    return _claim(
        "withheld",
        f"It claims nothing for {_arms_text(withheld)}: more than "
        f"{facts.thresholds.instrument_max:g} of their episodes failed on the instrument's side, "
        "so their figures are left out.",
    )


def _incomplete(facts: ClaimFacts) -> list[Claim]:
    incomplete = [c for c in facts.cells if c.incomplete]
    if not incomplete:
        return []
    return _claim(
        "incomplete",
        f"{_arms_text(incomplete)} {'holds' if len(incomplete) == 1 else 'hold'} "
        "fewer episodes than planned (the run's last "
        f"session {stop_words(facts.provenance.stop_reason)}); their figures come from the "
        "smaller sample and do not stand for full cells.",
    )


def _own_tools(facts: ClaimFacts) -> list[Claim]:
    return own_tools_claims(facts.provenance)


def _thresholds_changed(facts: ClaimFacts) -> list[Claim]:
    if facts.thresholds == facts.provenance.thresholds:
        return []
    return _claim(
        "thresholds_changed",
        "Its thresholds are not the ones the run declared before it ran, so its calls "
        "were not made under the pre-registered rules.",
    )


# The "does not claim" lines in card order: each gives its line where its condition holds.
CLAIMS: tuple[Callable[[ClaimFacts], list[Claim]], ...] = (
    _one_model,
    _reference_policy,
    _fewer_tasks,
    _other_generator,
    _measured_differently,
    _not_covered,
    _self_served,
    _experimental,
    _stale,
    _resumed,
    _pooled_servings,
    _withheld,
    _incomplete,
    _own_tools,
    _thresholds_changed,
)


def own_tools_claims(provenance: Provenance) -> list[Claim]:
    """A card on the user's own tools: whose tools they are, that it does not read beside the
    published cards, and which pins could not be held (or that every checked pin held)."""
    own = provenance.own_tools
    if own is None:
        return []
    not_held = ", ".join(f"{markdown(r['row'])} ({markdown(r['holds'])})" for r in own.not_held)
    changed = ", ".join(markdown(r["row"]) for r in own.changed)
    seeds = ", ".join(map(str, own.checked_seeds))
    pins = (
        f"These pins could not be held on the user's tools: {not_held}; checked over "
        f"{own.contrasts} contrasts at seeds {seeds}."
        if own.not_held
        else f"Every pin that applies held on the user's tools over {own.contrasts} contrasts at "
        f"seeds {seeds}."
    )
    if changed:
        pins += f" The user's tools change the figures of rows {changed} (reported, not refused)."
    return [
        Claim(
            key="own_tools",
            text=(
                f"The tool block holds the user's own {counted(len(own.names), 'tool')} from "
                f"{markdown(own.file_name)} (sha256 {markdown(own.sha256[:16])}) in place of the "
                "generated read tools. They are the "
                "user's, not written for these tasks; a call to one is answered as a read and "
                "changes no record."
            ),
        ),
        Claim(
            key="own_tools_not_beside",
            text=(
                "Its figures do not read beside the published cards or any card on the generated "
                "tools: the block differs, so a difference may be the tools' and not the model's."
            ),
        ),
        Claim(key="own_tools_pins", text=pins),
    ]


def build_statements(
    kind: str,
    provenance: Provenance,
    cells: Sequence[Cell],
    knobs: Sequence[KnobTable],
    installed: dict[str, str],
    published: Sequence[PublishedFacts],
    thresholds: Thresholds,
) -> Statements:
    """The two closing texts and, when d8 is on the card, the depth reading note."""
    has_top_depth = any(c.knob == "depth" and c.level == TOP_DEPTH and not c.control for c in cells)
    facts = ClaimFacts(kind, provenance, cells, knobs, installed, published, thresholds)
    return Statements(
        can_tell=can_tell(provenance, cells, knobs, thresholds),
        what_it_is=_what_it_is(kind, provenance, cells, thresholds),
        does_not_claim=[claim for line in CLAIMS for claim in line(facts)],
        depth_note=DEPTH_NOTE if has_top_depth else None,
    )
