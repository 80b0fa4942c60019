"""One card against another, less time and placement: the promise a merge of shards keeps.

Two runs of one plan on the reference policies serve the same episodes, verdicts and tokens: a
policy's every draw is a function of the request. What two runs cannot share is when and where
they ran, and when a stop landed (a scheduler's requeue or cancel, a kill): how many episodes a
resumed session made, and the sentence that discloses it. TIME_AND_PLACEMENT lists those fields of
a card, each with the reason it is time or placement; `compare_cards` blanks them in both cards and
compares what is left byte for byte, as card.json and as card.md. Everything else a card holds,
every rate, interval, comparison, count, token, hash and sentence, must be equal.

This is the one definition of "the card one machine would have made" (issue 25): the merge's
tests and its CI step call it, and nothing else decides it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from poisson_tasks.calibration.artifact import Artifact
from poisson_tasks.calibration.cardjson import card_json, rounded
from poisson_tasks.calibration.render import render_document

__all__ = ["TIME_AND_PLACEMENT", "CardComparison", "Excluded", "compare_cards", "masked"]


@dataclass(frozen=True, slots=True)
class Excluded:
    """A field of card.json that is time or placement: its dotted path (`*`: every item of a
    list; `key=value` last: the list's items whose `key` is `value`, dropped), what both cards
    hold in its place, and why it is left out."""

    path: str
    blank: Any
    why: str


_SECONDS = "seconds measured around the episode: the serving and its load, not the task"

TIME_AND_PLACEMENT: tuple[Excluded, ...] = (
    Excluded("cells.*.median_episode_s", None, _SECONDS),
    Excluded("cells.*.costs.episode_s_median", None, _SECONDS),
    Excluded("cells.*.costs.episode_s_p90", None, _SECONDS),
    Excluded("cells.*.costs.model_s_median", None, _SECONDS),
    Excluded("cells.*.costs.model_s_p90", None, _SECONDS),
    Excluded("cells.*.costs.harness_s_median", None, _SECONDS),
    Excluded("cells.*.costs.harness_s_p90", None, _SECONDS),
    Excluded("cells.*.costs.setup_s_median", None, _SECONDS),
    Excluded(
        "provenance.sessions",
        [],
        "when each runner session started and ended and what it wrote: one session on one "
        "machine, one or more per shard",
    ),
    Excluded("provenance.concurrency", None, "episodes in flight at once, per machine"),
    Excluded(
        "rate_limited",
        None,
        "how many responses were 429 depends on when requests went out and on what else the "
        "account sent",
    ),
    Excluded("provenance.shards", None, "how the study was cut and where each shard's folder was"),
    Excluded(
        "cells.*.resumed",
        0,
        "how many of the cell's episodes a resumed session made: where in the run a stop (a "
        "requeue, a cancel, a kill) landed, which is time",
    ),
    Excluded(
        "statements.does_not_claim.key=resumed",
        None,
        "the sentence that discloses a resume and counts the episodes made after it (above)",
    ),
    Excluded(
        "provenance.records_sha256",
        "",
        "a digest of the episode lines as written, which hold each episode's seconds and session "
        "number, in the order they finished",
    ),
)


def _blank(node: Any, keys: list[str], blank: Any) -> None:
    """Set the field at `keys` under `node` to `blank`, wherever the path exists."""
    if not keys or node is None:
        return
    key, rest = keys[0], keys[1:]
    if "=" in key:  # the list's items whose field has this value are dropped
        field, value = key.split("=", 1)
        if isinstance(node, list):
            node[:] = [i for i in node if not (isinstance(i, dict) and i.get(field) == value)]
        return
    if key == "*":
        for item in node if isinstance(node, list) else []:
            _blank(item, rest, blank)
        return
    if not isinstance(node, dict) or key not in node:
        return
    if rest:
        _blank(node[key], rest, blank)
    else:
        node[key] = blank


def masked(artifact: Artifact) -> Artifact:
    """The card with every TIME_AND_PLACEMENT field blanked."""
    document = rounded(artifact.model_dump(mode="json"))
    for excluded in TIME_AND_PLACEMENT:
        _blank(document, excluded.path.split("."), excluded.blank)
    return Artifact.model_validate(document)


def _differences(first: Any, second: Any, prefix: str = "") -> list[str]:
    if isinstance(first, dict) and isinstance(second, dict):
        out: list[str] = []
        for key in sorted(set(first) | set(second)):
            out += _differences(first.get(key), second.get(key), f"{prefix}{key}.")
        return out
    if isinstance(first, list) and isinstance(second, list) and len(first) == len(second):
        out = []
        for position, (left, right) in enumerate(zip(first, second, strict=True)):
            out += _differences(left, right, f"{prefix}{position}.")
        return out
    return [] if first == second else [prefix.rstrip(".")]


@dataclass(frozen=True)
class CardComparison:
    """Two cards compared less time and placement: equal when card.json and card.md both are."""

    json_equal: bool
    markdown_equal: bool
    differences: list[str]

    @property
    def equal(self) -> bool:
        return self.json_equal and self.markdown_equal

    def line(self) -> str:
        if self.equal:
            return (
                "equal: card.json and card.md are byte for byte the same, less "
                f"{len(TIME_AND_PLACEMENT)} time and placement fields"
            )
        where = ", ".join(self.differences[:6]) or "card.md only"
        more = f" and {len(self.differences) - 6} more" if len(self.differences) > 6 else ""
        return f"different: {where}{more}"


def compare_cards(first: Artifact, second: Artifact) -> CardComparison:
    """`first` against `second`, every TIME_AND_PLACEMENT field blanked in both."""
    left, right = masked(first), masked(second)
    return CardComparison(
        json_equal=card_json(left) == card_json(right),
        markdown_equal=render_document(left) == render_document(right),
        differences=_differences(left.model_dump(mode="json"), right.model_dump(mode="json")),
    )
