"""The card's "Pins read off the run" section: the pin rows no bundle can carry, N10 (the serving
held across sessions) and N13 (first-request input tokens, per arm and across each contrast).
"""

from __future__ import annotations

from poisson_tasks.calibration.artifact import Artifact, FirstRequestContrast, FirstRequestPin
from poisson_tasks.calibration.provenance import Provenance
from poisson_tasks.calibration.sections.text import NOT_RECORDED, md_table
from poisson_tasks.nouns import counted
from poisson_tasks.servingpin import N10_FIELDS
from poisson_tasks.supplied import markdown

__all__ = ["pins_section"]


def _n10_line(provenance: Provenance) -> str:
    held = (
        f"held across the run's {len(provenance.sessions)} session"
        + ("s" if len(provenance.sessions) != 1 else "")
        if not provenance.pooled_servings
        else "not held: "
        + "; ".join(
            f"session #{s.index} {markdown(s.serving_change)}"
            for s in provenance.sessions
            if s.serving_change
        )
        + "; the figures pool several servings (each is listed under Provenance)"
    )
    return f"- N10, the serving pin ({', '.join(label for _, label in N10_FIELDS)}): {held}"


def _median(value: float | None) -> str:
    return NOT_RECORDED if value is None else f"{value:,g}"


def _offset(value: float | None) -> str:
    return NOT_RECORDED if value is None else f"{value:+,g}"


def _n13_contrast(contrast: FirstRequestContrast) -> str:
    if contrast.held is None:
        return "no seed on which every arm was counted"
    if contrast.held:
        return f"held on {contrast.held_seeds} of {counted(contrast.seeds, 'seed')}"
    offsets = ", ".join(f"`{a}` {o:+d}" for a, o in contrast.widest_offsets.items())
    return (
        f"not held on {contrast.seeds - contrast.held_seeds} of {counted(contrast.seeds, 'seed')}: "
        f"server less pinned spreads up to {contrast.widest} tokens across the arms "
        f"(seed {contrast.widest_seed}: {offsets})"
    )


def _n13_lines(pin: FirstRequestPin | None) -> list[str]:
    head = (
        "- N13, realised first-request input tokens (reported, never refused): per arm, the first "
        "request's input tokens as the server counted them beside the pinned tokenizer's count "
        "of the same request; across a contrast's arms it holds when the server's less the "
        f"pinned count is the same on every arm, within {pin.band if pin else 2} tokens, on "
        "every seed"
    )
    if pin is None or pin.status == "not_recorded":
        return [head + ": not recorded (this run's episode lines predate the first-request counts)"]
    if pin.status == "no_server_count":
        return [
            head + ": the server reported no usage on any first request, so nothing is set "
            "beside the pinned count"
        ]
    lines = [head + ":", ""]
    lines += md_table(
        ["arm", "tasks", "server tokens", "pinned tokens", "server less pinned"],
        [
            [
                f"`{a.arm_id}`",
                str(a.tasks),
                _median(a.server_median),
                _median(a.pinned_median),
                _offset(a.offset_median),
            ]
            for a in pin.arms
        ],
    )
    if pin.contrasts:
        lines += [""]
        lines += md_table(
            ["contrast", "arms", "N13"],
            [[f"`{c.knob}`", str(len(c.arms)), _n13_contrast(c)] for c in pin.contrasts],
        )
    return lines


def pins_section(artifact: Artifact) -> list[str]:
    """The pin rows no bundle can carry, read off the run: N10 across sessions, N13 per arm."""
    return [
        "",
        "## Pins read off the run",
        "",
        _n10_line(artifact.provenance),
        *_n13_lines(artifact.first_request),
    ]
