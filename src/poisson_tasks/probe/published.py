"""The knob probe as published: what the design's authors measured once, on another build.

knob_status() is the table of knobs-and-arms.md, with its provenance and its three disclosures;
`poisson-tasks knobs` prints it. Outside the generator hash (hashes._generator_files does not list
this file): rewording a disclosure or correcting a figure here changes no task id and makes no
card stale.
"""

from __future__ import annotations

from poisson_tasks.arms import KNOB_DEFS, Knob
from poisson_tasks.probe.figures import (
    PROBE_MODELS,
    KnobStatus,
    KnobStatusRow,
    ProbeCell,
    ProbeFigure,
)

_PROVENANCE = (
    "Measured once by the design's authors, on gpt-5-nano and Qwen3-8B, on another (earlier) "
    "build of the generator, not on this one: 60 tasks x 2 attempts per arm, strict pass@1, "
    "each knob's lowest and highest level and its control arm where it has one, with "
    "task-clustered 95% intervals. These figures describe that build and those two models once; "
    "they are not a measurement of this build."
)
_RULE = (
    "A knob bites on a model when the interval excludes zero and the drop is at least 0.15; "
    "faults, block and arguments need the same drop from their control arm to the top, and "
    "shape counts either direction, as long as its length control differs from the base by "
    "less than 0.15. Cannot tell replaces \u201cdoes not bite\u201d where the base arm passed "
    "below 0.15 on that model; it also replaces \u201ctop easier\u201d where the top arm passed "
    "above 0.85. A knob ships when it bites on at least one model and is easier at the top on "
    "neither."
)
_DISCLOSURES = (
    "Phase 1's check changed after its first result (gpt-5-nano). As registered, phase 1 "
    "stopped the probe if any base-arm episode made no tool call, and gpt-5-nano's first "
    "phase 1 stopped on 1 of 21 (the model asked for the record id in plain text; nothing on "
    "our side failed). After seeing that, on 2026-10-13, the check was changed to the published "
    "cards' own rule: stop when more than 10% of the 21 base episodes make no tool call (3 or "
    "more). The recorded phase 1 was read again once under it, with no episode run again: 1 of "
    "21, so it passed, and the probe went on in the same folder within the same $4.00 cap. "
    "Qwen3-8B's phase 1 passed under the first rule.",
    "A crash at the start, and one arm run again (gpt-5-nano). The run crashed at its start on "
    "macOS's limit on open files, with its first arm, similarity:s0, in flight. The limit was "
    "raised and the run resumed. Episodes in flight at the crash failed on our side, so that "
    "arm was void (instrument rate 0.104; every other arm 0.000) and was run once more, as the "
    "pre-registration allows once for a cause on our side. The void attempt is kept. In all, "
    "gpt-5-nano cost $1.5981 of the $4.00 cap.",
    "More time for Qwen3-8B. The Qwen3-8B run on Colab reached its two-hour allowance with 14 "
    "of its 18 arms done and stopped cleanly. It was given more time and resumed, the 14 "
    "finished arms kept and the last four run with the same settings; it used 2.56 hours in all.",
)


def _f(value: float, low: float, high: float) -> ProbeFigure:
    return ProbeFigure(value=value, low=low, high=high)


def _row(knob: Knob, nano: ProbeCell, qwen: ProbeCell) -> KnobStatusRow:
    definition = KNOB_DEFS[knob]
    return KnobStatusRow(
        knob=knob,
        shipped=definition.shipped,
        base_arm=f"{knob}:{definition.prefix}{definition.levels[0]}",
        top_arm=f"{knob}:{definition.prefix}{definition.levels[-1]}",
        control_arm=definition.controls[0] if definition.controls else None,
        cells=(nano, qwen),
    )


def knob_status() -> KnobStatus:
    """The knob-probe table of knobs-and-arms.md: seven knobs x two models, with provenance.

    Depth and distractor are the published cards' knobs and were not part of the probe, so they
    have no row (row() returns None). Figures are as published, measured on another build.
    """
    nano, qwen = PROBE_MODELS
    rows = (
        _row(
            "similarity",
            ProbeCell(model=nano, verdict="does not bite", delta=_f(-0.050, -0.150, 0.042)),
            ProbeCell(model=qwen, verdict="does not bite", delta=_f(0.000, 0.000, 0.000)),
        ),
        _row(
            "faults",
            ProbeCell(
                model=nano,
                verdict="does not bite",
                delta=_f(0.400, 0.300, 0.500),
                control=_f(0.142, 0.033, 0.250),
            ),
            ProbeCell(
                model=qwen,
                verdict="bites",
                delta=_f(0.825, 0.742, 0.900),
                control=_f(0.308, 0.150, 0.458),
            ),
        ),
        _row(
            "history",
            ProbeCell(model=nano, verdict="bites", delta=_f(0.683, 0.608, 0.750)),
            ProbeCell(model=qwen, verdict="bites", delta=_f(0.308, 0.217, 0.417)),
        ),
        _row(
            "block",
            ProbeCell(
                model=nano,
                verdict="does not bite",
                delta=_f(-0.067, -0.142, 0.000),
                control=_f(-0.008, -0.058, 0.042),
            ),
            ProbeCell(
                model=qwen,
                verdict="does not bite",
                delta=_f(0.000, 0.000, 0.000),
                control=_f(0.000, 0.000, 0.000),
            ),
        ),
        _row(
            "arguments",
            ProbeCell(
                model=nano,
                verdict="does not bite",
                delta=_f(0.092, 0.000, 0.183),
                control=_f(0.000, -0.108, 0.100),
            ),
            ProbeCell(
                model=qwen,
                verdict="does not bite",
                delta=_f(0.150, 0.067, 0.242),
                control=_f(0.100, 0.017, 0.183),
            ),
        ),
        _row(
            "shape",
            ProbeCell(
                model=nano,
                verdict="does not bite",
                delta=_f(-0.300, -0.425, -0.175),
                length_control=_f(0.158, 0.058, 0.258),
            ),
            ProbeCell(
                model=qwen,
                verdict="bites",
                delta=_f(0.358, 0.233, 0.483),
                length_control=_f(0.000, -0.033, 0.033),
                note="shape:w4 harder",
            ),
        ),
        _row(
            "spread",
            ProbeCell(model=nano, verdict="top easier", delta=_f(-0.250, -0.358, -0.142)),
            ProbeCell(
                model=qwen, verdict="cannot tell", delta=_f(0.008, 0.000, 0.033), base_pass=0.008
            ),
        ),
    )
    return KnobStatus(
        rows=rows,
        provenance=_PROVENANCE,
        rule=_RULE,
        disclosure_phase1_check=_DISCLOSURES[0],
        disclosure_crash_and_rerun=_DISCLOSURES[1],
        disclosure_more_time=_DISCLOSURES[2],
    )
