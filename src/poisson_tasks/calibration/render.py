"""render_document: the card as markdown, from its Artifact and nothing else.

The card is a list of sections (`SECTIONS`), each built in its own module of
calibration/sections/ from the Artifact alone. Rates and interval bounds print with three decimals
(the card's printed precision: 0.001), seconds with two, tokens and dollars as counted
(sections/text.py). Every confidence level printed comes from the card's thresholds, never from a
literal. A figure that was not measured reads `not recorded` (time, tokens) or `n/a` (a rate with
nothing to rate); it is never printed as zero.
"""

from __future__ import annotations

from collections.abc import Callable

from poisson_tasks.calibration.artifact import Artifact
from poisson_tasks.calibration.sections.closing import closing_section
from poisson_tasks.calibration.sections.costs import cost_sections
from poisson_tasks.calibration.sections.knob import controls_section, knob_section
from poisson_tasks.calibration.sections.opening import banner_lines, summary_lines
from poisson_tasks.calibration.sections.pins import pins_section
from poisson_tasks.calibration.sections.provenance import provenance_section
from poisson_tasks.calibration.sections.replay import reproducibility_lines
from poisson_tasks.glossary import POINTER
from poisson_tasks.supplied import markdown_code

__all__ = ["SECTIONS", "render_document"]

Section = Callable[[Artifact], list[str]]


def _title(artifact: Artifact) -> list[str]:
    title = (
        "# Reference-policy card: "
        + markdown_code(artifact.provenance.serving.policy or artifact.model)
        if artifact.kind == "reference-policy"
        else f"# Card: {markdown_code(artifact.model)}"
    )
    out = [title, ""]
    banner = banner_lines(artifact)
    if banner:
        out += [*banner, ""]
    if artifact.statements.can_tell:  # a card.json written before the sentence has none
        out += [f"**What this card can tell.** {artifact.statements.can_tell}", "", POINTER, ""]
    return out + summary_lines(artifact)


def _knobs(artifact: Artifact) -> list[str]:
    return [line for table in artifact.knobs for line in knob_section(artifact, table)]


def _reproducibility(artifact: Artifact) -> list[str]:
    return reproducibility_lines(artifact.reproducibility, artifact.thresholds.confidence)


# The card, top to bottom: each entry returns its section's lines.
SECTIONS: tuple[Section, ...] = (
    _title,
    _knobs,
    controls_section,
    cost_sections,
    pins_section,
    _reproducibility,
    provenance_section,
    closing_section,
)


def render_document(artifact: Artifact) -> str:
    """The card as markdown: its sections in order, each from the Artifact alone."""
    return "\n".join(line for section in SECTIONS for line in section(artifact)) + "\n"
