"""The knob probe as published: what the design's authors measured once, on another build.

Only the figures and their words: each probed knob's cells (by knob name, in the published order),
the provenance, the rule and the three disclosures. knobtable.knob_status() joins them to the knob
definitions into the table of knobs-and-arms.md, and `poisson-tasks knobs` prints it; this module
imports no arms, and no file of the generator hash imports it. Outside the generator hash
(hashes._generator_files does not list this file): rewording a disclosure or correcting a figure
here changes no task id and makes no card stale.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from poisson_tasks.probe.figures import PROBE_MODELS, ProbeCell, ProbeFigure

if TYPE_CHECKING:
    CELLS: Mapping[str, tuple[ProbeCell, ...]]  # built on first use: __getattr__ below

PROVENANCE = (
    "Measured once by the design's authors, on gpt-5-nano and Qwen3-8B, on another (earlier) "
    "build of the generator, not on this one: 60 tasks x 2 attempts per arm, strict pass@1, "
    "each knob's lowest and highest level and its control arm where it has one, with "
    "task-clustered 95% intervals. These figures describe that build and those two models once; "
    "they are not a measurement of this build."
)
RULE = (
    "A knob bites on a model when the interval excludes zero and the drop is at least 0.15; "
    "faults, block and arguments need the same drop from their control arm to the top, and "
    "shape counts either direction, as long as its length control differs from the base by "
    "less than 0.15. Cannot tell replaces \u201cdoes not bite\u201d where the base arm passed "
    "below 0.15 on that model; it also replaces \u201ctop easier\u201d where the top arm passed "
    "above 0.85. A knob ships when it bites on at least one model and is easier at the top on "
    "neither."
)
DISCLOSURES: tuple[str, str, str] = (
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


_NANO, _QWEN = PROBE_MODELS


def _cells() -> Mapping[str, tuple[ProbeCell, ...]]:
    """CELLS: each probed knob's cells, one per model of PROBE_MODELS, in the published order;
    knobs the probe did not measure (depth, distractor: the published cards' knobs) have none.
    Built when first read: arms imports this module at every start-up, and building the models
    then would cost every command line (generate among them) a few milliseconds."""
    return {
        "similarity": (
            ProbeCell(model=_NANO, verdict="does not bite", delta=_f(-0.050, -0.150, 0.042)),
            ProbeCell(model=_QWEN, verdict="does not bite", delta=_f(0.000, 0.000, 0.000)),
        ),
        "faults": (
            ProbeCell(
                model=_NANO,
                verdict="does not bite",
                delta=_f(0.400, 0.300, 0.500),
                control=_f(0.142, 0.033, 0.250),
            ),
            ProbeCell(
                model=_QWEN,
                verdict="bites",
                delta=_f(0.825, 0.742, 0.900),
                control=_f(0.308, 0.150, 0.458),
            ),
        ),
        "history": (
            ProbeCell(model=_NANO, verdict="bites", delta=_f(0.683, 0.608, 0.750)),
            ProbeCell(model=_QWEN, verdict="bites", delta=_f(0.308, 0.217, 0.417)),
        ),
        "block": (
            ProbeCell(
                model=_NANO,
                verdict="does not bite",
                delta=_f(-0.067, -0.142, 0.000),
                control=_f(-0.008, -0.058, 0.042),
            ),
            ProbeCell(
                model=_QWEN,
                verdict="does not bite",
                delta=_f(0.000, 0.000, 0.000),
                control=_f(0.000, 0.000, 0.000),
            ),
        ),
        "arguments": (
            ProbeCell(
                model=_NANO,
                verdict="does not bite",
                delta=_f(0.092, 0.000, 0.183),
                control=_f(0.000, -0.108, 0.100),
            ),
            ProbeCell(
                model=_QWEN,
                verdict="does not bite",
                delta=_f(0.150, 0.067, 0.242),
                control=_f(0.100, 0.017, 0.183),
            ),
        ),
        "shape": (
            ProbeCell(
                model=_NANO,
                verdict="does not bite",
                delta=_f(-0.300, -0.425, -0.175),
                length_control=_f(0.158, 0.058, 0.258),
            ),
            ProbeCell(
                model=_QWEN,
                verdict="bites",
                delta=_f(0.358, 0.233, 0.483),
                length_control=_f(0.000, -0.033, 0.033),
                note="shape:w4 harder",
            ),
        ),
        "spread": (
            ProbeCell(model=_NANO, verdict="top easier", delta=_f(-0.250, -0.358, -0.142)),
            ProbeCell(
                model=_QWEN, verdict="cannot tell", delta=_f(0.008, 0.000, 0.033), base_pass=0.008
            ),
        ),
    }


def __getattr__(name: str) -> Any:
    if name != "CELLS":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = _cells()
    globals()["CELLS"] = value  # later look-ups skip __getattr__
    return value
