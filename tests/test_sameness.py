"""calibration.sameness: the one comparison of a card with another, less time and placement."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_runner import prereg

from poisson_tasks.calibration import card_from_run
from poisson_tasks.calibration.artifact import Artifact
from poisson_tasks.calibration.provenance import SessionInfo
from poisson_tasks.calibration.sameness import TIME_AND_PLACEMENT, compare_cards, masked
from poisson_tasks.reference import ReferenceServer
from poisson_tasks.runfolder import EPISODES
from poisson_tasks.runner import run_preregistration


@pytest.fixture(scope="module")
def card(tmp_path_factory: pytest.TempPathFactory, server: ReferenceServer) -> Artifact:
    root = tmp_path_factory.mktemp("same")
    path = prereg(root, base_url=server.base_url, tasks=3, attempts=2)
    run_preregistration(path, root / "run", show_progress=False)
    return card_from_run(root / "run")


def _edit(artifact: Artifact, path: str, value: object) -> Artifact:
    """A copy of the card with one field of card.json set (dotted path, list items by number)."""
    document = artifact.model_dump(mode="json")
    *head, last = path.split(".")
    node = document
    for key in head:
        node = node[int(key)] if isinstance(node, list) else node[key]
    node[last] = value
    return Artifact.model_validate(document)


def test_a_card_equals_itself(card: Artifact) -> None:
    assert compare_cards(card, card).equal


def test_every_excluded_field_is_one_a_card_has(card: Artifact) -> None:
    # A path that names nothing would exclude nothing: each one resolves on a real card (shards
    # only on a merged one, which test_merge.py reads).
    # The resume's sentence only on a resumed card (test_a_resumed_run_compares_equal...).
    document = card.model_dump(mode="json")
    for excluded in TIME_AND_PLACEMENT:
        if excluded.path == "provenance.shards" or "=" in excluded.path:
            continue
        node = document
        for key in excluded.path.split("."):
            node = node[0] if key == "*" else node[key]
        assert excluded.why


def test_time_and_placement_alone_leave_two_cards_equal(card: Artifact) -> None:
    sessions = [
        SessionInfo(
            index=i,
            started_at="2030-01-01T00:00:00+00:00",
            ended_at=None,
            stop_reason="complete",
            episodes_written=1,
            concurrency=64,
        )
        for i in range(4)
    ]
    other = card.model_copy(
        update={
            "provenance": card.provenance.model_copy(
                update={"sessions": sessions, "concurrency": 64, "records_sha256": "0" * 64}
            )
        }
    )
    for number in range(len(card.cells)):
        other = _edit(other, f"cells.{number}.median_episode_s", 12.5)
        if card.cells[number].costs is not None:
            other = _edit(other, f"cells.{number}.costs.model_s_p90", 99.0)
    assert other != card
    assert compare_cards(other, card).equal


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("cells.0.strict.pass_at_1", 0.123),
        ("cells.0.median_tokens", 1.0),
        ("cells.1.outcomes", {"passed": 1}),
        ("provenance.generator_hash", "f" * 64),
        ("provenance.preregistration_hash", "f" * 64),
        ("provenance.budget", {"tokens": 1}),
        ("cells.0.costs.timed_episodes", 0),
    ],
)
def test_any_other_field_makes_two_cards_different(
    card: Artifact, path: str, value: object
) -> None:
    comparison = compare_cards(_edit(card, path, value), card)
    assert not comparison.equal
    assert any(d.startswith(path) for d in comparison.differences), comparison.differences
    assert comparison.line().startswith("different: ")


def test_masking_blanks_only_the_listed_fields(card: Artifact) -> None:
    blank = masked(card)
    assert blank.provenance.sessions == [] and blank.provenance.records_sha256 == ""
    assert blank.cells[0].strict == card.cells[0].strict
    assert blank.cells[0].median_episode_s is None


def test_the_comparison_reads_card_md_too(card: Artifact, monkeypatch: pytest.MonkeyPatch) -> None:
    import poisson_tasks.calibration.sameness as sameness

    monkeypatch.setattr(sameness, "render_document", lambda artifact: str(id(artifact)))
    comparison = compare_cards(card, card)
    assert comparison.json_equal and not comparison.markdown_equal and not comparison.equal


@pytest.fixture(scope="module")
def resumed(tmp_path_factory: pytest.TempPathFactory, server: ReferenceServer) -> Artifact:
    """The `card` fixture's study, its run cut after four lines (as a stop leaves it) and resumed."""
    root = tmp_path_factory.mktemp("resumed")
    path = prereg(root, base_url=server.base_url, tasks=3, attempts=2)
    run_preregistration(path, root / "run", show_progress=False)
    episodes = root / "run" / EPISODES
    episodes.write_bytes(b"".join(episodes.read_bytes().splitlines(keepends=True)[:4]))
    run_preregistration(path, root / "run", resume=True, show_progress=False)
    return card_from_run(root / "run")


def test_a_resumed_run_compares_equal_to_one_that_was_not(
    card: Artifact, resumed: Artifact
) -> None:
    # Where a stop landed is time: the card discloses the resume (the cells' counts and one
    # sentence), and both are left out; every figure must still be equal.
    assert sum(c.resumed for c in resumed.cells) == 8 and not any(c.resumed for c in card.cells)
    assert "resumed" in {c.key for c in resumed.statements.does_not_claim}
    assert compare_cards(resumed, card).equal
    blank = masked(resumed)
    assert "resumed" not in {c.key for c in blank.statements.does_not_claim}
    assert [c.key for c in blank.statements.does_not_claim] == [
        c.key for c in card.statements.does_not_claim
    ]
    other = _edit(resumed, "cells.0.strict.pass_at_1", 0.123)
    assert compare_cards(other, card).differences == ["cells.0.strict.pass_at_1"]


def test_an_artifact_read_back_from_card_json_compares_equal(
    card: Artifact, tmp_path: Path
) -> None:
    from poisson_tasks.calibration.cardjson import card_json, read_card_json

    assert compare_cards(read_card_json(card_json(card)), card).equal
