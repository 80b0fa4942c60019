"""The `poisson-tasks knobs` table: each knob's levels, control, shipped status and probe figures.

Probe figures come from knob_status(), the published figures (probe.published) joined to the knob
definitions, and are always printed with their provenance: measured once by the design's authors on
another build, never on this one. It sits above arms so that no report code is in the generator hash.
"""

from __future__ import annotations

from poisson_tasks.arms import (
    KNOB_DEFS,
    KNOBS,
    ArmSpec,
    Knob,
    KnobDef,
    arm_id,
    levels,
)
from poisson_tasks.errors import ArmError
from poisson_tasks.probe import published
from poisson_tasks.probe.figures import KnobStatus, KnobStatusRow

_NOT_SHIPPED = "no (Available \u00b7 retested in v2; its arms work all the same)"


def knob_status() -> KnobStatus:
    """The knob-probe table of knobs-and-arms.md: seven knobs x two models, with provenance.

    The figures are probe.published's, measured once on another build; each row takes whether the
    knob shipped and the arms the probe ran from its KnobDef. Depth and distractor were not part of
    the probe, so they have no row (row() returns None).
    """
    by_name: dict[str, KnobDef] = {d.name: d for d in KNOB_DEFS.values()}
    rows: list[KnobStatusRow] = []
    for name, cells in published.CELLS.items():
        definition = by_name.get(name)
        if definition is None:
            raise ArmError(
                f"the published knob probe has a row for {name!r}, which is not a knob of this "
                f"build; valid knobs: {', '.join(KNOBS)}"
            )
        rows.append(
            KnobStatusRow(
                knob=name,
                shipped=definition.shipped,
                base_arm=f"{name}:{definition.prefix}{definition.levels[0]}",
                top_arm=f"{name}:{definition.prefix}{definition.levels[-1]}",
                control_arm=definition.controls[0] if definition.controls else None,
                cells=cells,
            )
        )
    return KnobStatus(
        rows=tuple(rows),
        provenance=published.PROVENANCE,
        rule=published.RULE,
        disclosure_phase1_check=published.DISCLOSURES[0],
        disclosure_crash_and_rerun=published.DISCLOSURES[1],
        disclosure_more_time=published.DISCLOSURES[2],
    )


def _unprobed_text(definition: KnobDef) -> str:
    """The shipped line of a knob the probe did not measure."""
    if not definition.published:
        return f"{'yes' if definition.shipped else 'no'} (not part of the knob probe)"
    if definition.experimental:
        return (
            "published-card knob, experimental (on both calibrated models it does not make "
            "tasks harder); not part of the knob probe"
        )
    return "published-card knob; not part of the knob probe"


def control_format(knob: Knob) -> str:
    """How the knob's control arm is written, with the arms a study of it must carry."""
    definition = KNOB_DEFS[knob]
    if definition.control_form is None:
        return f"none ({definition.no_control})"
    form = "<arm>+h<level>" if definition.control_form == "h" else "<arm>+len(<higher arm>)"
    return f"{form}{definition.suffix}; a sweep carries {', '.join(definition.controls)}"


def _example_level(definition: KnobDef) -> int | None:
    """A valid level that is not a candidate (twice the top candidate where that is valid, else
    the first such level), or None when the candidates are every valid level."""
    top = 2 * max(definition.levels)
    if definition.level_ok(top):
        return top
    spare = (
        level
        for lo, hi in definition.valid
        for level in range(lo, hi + 1)
        if level not in definition.levels
    )
    return next(spare, None)


def arms_line(knob: Knob) -> str:
    """Which levels make an arm: any valid level, not only the candidates, with an example."""
    definition = KNOB_DEFS[knob]
    example = _example_level(definition)
    if example is None:
        return f"the candidates are every valid level ({definition.valid_text})"
    return (
        f"any valid level is an arm, not only the candidates: {definition.valid_text} "
        f"(e.g. {arm_id(ArmSpec(knob, example))})"
    )


def render_knobs(only: str | None = None) -> str:
    """Every knob (or the one named) as text, ending with the probe's provenance and disclosures."""
    if only is not None and only not in KNOBS:
        raise ArmError(f"knob {only!r} is unknown; valid knobs: {', '.join(KNOBS)}")
    status = knob_status()
    out: list[str] = []
    for knob in KNOBS:
        if only is not None and knob != only:
            continue
        lv = levels(knob)
        definition = KNOB_DEFS[knob]
        out.append(f"{knob}: {definition.varies}")
        out.append(
            f"  levels   {', '.join(map(str, lv))} (the candidates a sweep picks from), "
            f"e.g. {arm_id(ArmSpec(knob, lv[1]))}"
        )
        out.append(f"  arms     {arms_line(knob)}")
        out.append(f"  control  {control_format(knob)}")
        row = status.row(knob)
        if row is None:
            out.append(f"  shipped  {_unprobed_text(definition)}")
        else:
            out.append(f"  shipped  {'yes' if definition.shipped else _NOT_SHIPPED}")
            arms = f"{row.base_arm} vs {row.top_arm}"
            if row.control_arm:
                arms += f", control {row.control_arm}"
            out.append(f"  knob probe ({arms}; another build, see provenance below):")
            for cell in row.cells:
                out.append(f"    {cell.model:<11} {cell.text}")
        out.append("")
    out.append("Provenance of the probe figures: " + status.provenance)
    out.append("How a verdict is read: " + status.rule)
    out.append("Three things about how the probe ran:")
    out.extend(f"  {i}. {text}" for i, text in enumerate(status.disclosures, start=1))
    return "\n".join(out)
