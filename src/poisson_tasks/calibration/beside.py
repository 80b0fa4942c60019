"""Whether a run was measured the way a published card was, so the two can be read side by side.

Four things must match: the generator build (its hash), the seeds (every seed of the run is one
of the card's), the decoding, and the verifier strictness of the arms. Fewer tasks or attempts do
not stop a reading beside; the card's own "does not claim" lines say what that costs.
"""

from __future__ import annotations

from poisson_tasks.calibration.artifact import PublishedFacts
from poisson_tasks.calibration.provenance import Provenance

__all__ = ["differences", "measured_differently", "short_hash"]


def short_hash(value: str) -> str:
    """The first 12 characters of a hash, for a line a person reads."""
    return value.split(":", 1)[-1][:12]


def measured_differently(provenance: Provenance, card: PublishedFacts) -> list[str]:
    """What besides the generator differs: seeds, decoding, strictness (empty when none)."""
    out = []
    if not set(provenance.seeds) <= set(card.seeds):
        out.append("seeds")
    if provenance.decoding != card.decoding:
        out.append("decoding")
    if provenance.strictness != card.strictness:
        out.append("strictness")
    return out


def differences(provenance: Provenance, card: PublishedFacts) -> list[str]:
    """Everything that stops a run being read beside a published card (empty when it can be)."""
    out = []
    if provenance.generator_hash != card.generator_hash:
        out.append(
            f"generator hash ({short_hash(provenance.generator_hash)} here, "
            f"{short_hash(card.generator_hash)} there)"
        )
    for what in measured_differently(provenance, card):
        if what == "decoding":
            out.append(f"decoding ({provenance.decoding} here, {card.decoding} there)")
        elif what == "strictness":
            out.append(
                f"strictness ({', '.join(provenance.strictness)} here, "
                f"{', '.join(card.strictness)} there)"
            )
        else:
            out.append("seeds (this run has seeds the card does not)")
    return out
