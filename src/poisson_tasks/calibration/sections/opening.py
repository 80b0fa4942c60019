"""The card's opening: its title, the reference-policy and stale banners, what it can tell, and the
summary of what was planned, written, scored and withheld.
"""

from __future__ import annotations

from poisson_tasks.calibration.artifact import Artifact
from poisson_tasks.calibration.statements import stale_text
from poisson_tasks.nouns import counted
from poisson_tasks.runfolder import stop_words

__all__ = ["banner_lines", "summary_lines"]


def summary_lines(artifact: Artifact) -> list[str]:
    cells = artifact.cells
    planned = sum(c.planned for c in cells)
    episodes = sum(c.episodes for c in cells)
    scored = sum(c.scored for c in cells)
    failed = sum(c.instrument.count for c in cells)
    provenance = artifact.provenance
    lines = [
        f"{counted(len(cells), 'arm')} × {counted(len(provenance.seeds), 'task')} × "
        f"{counted(provenance.attempts, 'attempt')}: {counted(planned, 'episode')} planned, "
        f"{episodes} written, {scored} scored, {failed} failed on the instrument's side. The "
        f"run's last session {stop_words(provenance.stop_reason)}.",
    ]
    peak = artifact.no_call_peak
    if peak is not None:
        lines.append(
            f"The no-call refusal passed: the highest no-call share in any cell is "
            f"{peak.share:.3f}, on `{peak.arm_id}` "
            f"(the limit is {artifact.thresholds.no_call_max:g})."
        )
    withheld = [c.arm_id for c in cells if not c.published]
    if withheld:
        lines.append(
            "Withheld for instrument failures above "
            f"{artifact.thresholds.instrument_max:g}: "
            + ", ".join(f"`{w}`" for w in withheld)
            + "."
        )
    incomplete = [c.arm_id for c in cells if c.incomplete]
    if incomplete:
        lines.append("Incomplete: " + ", ".join(f"`{w}`" for w in incomplete) + ".")
    return lines


def banner_lines(artifact: Artifact) -> list[str]:
    out = []
    if artifact.kind == "reference-policy":
        out.append(
            "> **Reference policy.** Every figure below is a scripted baseline's, served by "
            "poisson-tasks itself: it shows how the instrument reads a known behaviour and is "
            "no language model's result."
        )
    if artifact.stale:
        installed = {
            "generator": artifact.installed_generator_hash,
            "engine": artifact.installed_engine_hash or artifact.provenance.engine_hash,
        }
        text = stale_text(artifact.provenance, installed, artifact.stale_hashes or ["generator"])
        out.append(f"> **Stale.** {text[0].upper()}{text[1:]}.")
    return out
