"""A count with its noun in the number it takes: `1 episode`, `80 episodes`, never `1 calls`.

Standard library only, so every layer that prints a count (the card, the view, the CLI) can use
the one rule.
"""

from __future__ import annotations

__all__ = ["counted", "noun"]


def noun(count: float, singular: str, plural: str | None = None) -> str:
    """The noun for `count`: singular for exactly one, else the plural (singular + "s")."""
    return singular if count == 1 else (plural if plural is not None else f"{singular}s")


def counted(count: int, singular: str, plural: str | None = None) -> str:
    """`count` and its noun, as one phrase: counted(1, "episode") == "1 episode"."""
    return f"{count} {noun(count, singular, plural)}"
