"""The `poisson-tasks knobs` table: each knob's levels, control, shipped status and probe figures.

Probe figures come from arms.knob_status() and are always printed with its provenance: measured
once by the design's authors on another build, never on this one.
"""

from __future__ import annotations

from poisson_tasks.arms import (
    CONTROL_ARMS,
    KNOBS,
    SHIPPED_KNOBS,
    ArmSpec,
    Knob,
    arm_id,
    knob_status,
    levels,
)
from poisson_tasks.errors import ArmError

VARIES: dict[Knob, str] = {
    "depth": "how many chained stage calls the goal is away",
    "distractor": "how many of the sixteen tools in the block are irrelevant",
    "similarity": "how many digits each lookalike ledger's four-digit number shares, in place, "
    "with the target's",
    "faults": "how many calls on the way answer unavailable and must be made again",
    "history": "how many tokens of earlier tool work sit in the conversation",
    "block": "how many tools are offered",
    "arguments": "how many values each stage call must carry",
    "shape": "how many records four stage calls advance side by side",
    "spread": "how many tool answers the entry code is split across",
}
_NO_CONTROL_WHY: dict[Knob, str] = {
    "similarity": "none (similarity holds length equal across its levels)",
    "spread": "none (spread holds length equal across its levels)",
    "history": "none (length is history's own factor)",
}
_NOT_SHIPPED = "no (Available \u00b7 retested in v2; its arms work all the same)"
_PUBLISHED: dict[Knob, str] = {
    "depth": "published-card knob; not part of the knob probe",
    "distractor": "published-card knob, experimental (on both calibrated models it does not make "
    "tasks harder); not part of the knob probe",
}


def control_format(knob: Knob) -> str:
    """How the knob's control arm is written, with the arms a study of it must carry."""
    if knob in _NO_CONTROL_WHY:
        return _NO_CONTROL_WHY[knob]
    form = (
        "<arm>+h<level>"
        if knob == "depth"
        else "<arm>+len(<higher arm>)@k16"
        if knob == "distractor"
        else "<arm>+len(<higher arm>)"
    )
    return f"{form}; a sweep carries {', '.join(CONTROL_ARMS[knob])}"


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
        out.append(f"{knob}: {VARIES[knob]}")
        out.append(f"  levels   {', '.join(map(str, lv))}   e.g. {arm_id(ArmSpec(knob, lv[1]))}")
        out.append(f"  control  {control_format(knob)}")
        row = status.row(knob)
        if row is None:
            out.append(f"  shipped  {_PUBLISHED[knob]}")
        else:
            out.append(f"  shipped  {'yes' if knob in SHIPPED_KNOBS else _NOT_SHIPPED}")
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
