"""The card's closing texts: what it is, what it does not claim, and how depth is read (built in
calibration/statements.py); their headings are written here once, for card.md and the view."""

from __future__ import annotations

from poisson_tasks.calibration.artifact import Artifact

__all__ = ["DEPTH_TITLE", "NOT_CLAIMED_TITLE", "WHAT_IT_IS_TITLE", "closing_section"]

WHAT_IT_IS_TITLE = "What this card is"
NOT_CLAIMED_TITLE = "What this card does not claim"
DEPTH_TITLE = "How depth is read"


def closing_section(artifact: Artifact) -> list[str]:
    """The closing texts as card.md prints them, one claim a bullet."""
    statements = artifact.statements
    out = ["", f"## {WHAT_IT_IS_TITLE}", "", statements.what_it_is]
    out += ["", f"## {NOT_CLAIMED_TITLE}", ""]
    out += [f"- {c.text}" for c in statements.does_not_claim]
    if statements.depth_note:
        out += ["", f"## {DEPTH_TITLE}", "", statements.depth_note]
    return out
