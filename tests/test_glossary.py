"""The glossary (issue 34 item 5): every term a card prints is defined, the page is current, and
the card's header and the command line point a reader to it.

Labels are read off real renders: the published reference-noisy card rebuilt from its records (a
scripted baseline's, never a model's), a synthetic model card with declared rates, and a
Reproducibility section; each table header and each comparison verdict must name a term.
"""

from __future__ import annotations

import re
from pathlib import Path

from synthetic_runs import header, line, write_run
from typer.testing import CliRunner

from poisson_tasks.calibration import card_from_run, render_document
from poisson_tasks.calibration.artifact import FirstDifference, ReplayShare, Reproducibility
from poisson_tasks.calibration.published import rebuild_published
from poisson_tasks.calibration.sections.replay import reproducibility_lines
from poisson_tasks.cli import app
from poisson_tasks.glossary import GLOSSARY_PAGE, POINTER, TERMS, glossary_markdown, lookup

ROOT = Path(__file__).resolve().parents[1]
RATES = {"input": 1.0, "cached_input": 0.1, "output": 4.0, "as_of": "2026-01-01", "source": None}


def _headers(markdown: str) -> set[str]:
    """Every header cell of every pipe table in a card's markdown."""
    lines = markdown.splitlines()
    found: set[str] = set()
    for at, text in enumerate(lines[:-1]):
        if text.startswith("|") and lines[at + 1].startswith("|---"):
            found |= {cell.strip() for cell in text.strip().strip("|").split("|")}
    return found


def _verdicts(markdown: str) -> set[str]:
    """The verdict words of the comparison tables (the text before a reason)."""
    rows = [row for row in markdown.splitlines() if row.startswith("| `") and " → " in row]
    return {row.rstrip(" |").rsplit("| ", 1)[1].split(":")[0].split(" (")[0] for row in rows}


def _replay() -> Reproducibility:
    share = ReplayShare(count=1, share=0.5, low=0.1, high=0.9)
    return Reproducibility(
        sample=2,
        seed=0,
        rule="r",
        scored_in_run=8,
        replayed=2,
        not_yet_replayed=0,
        identical_transcript=share,
        same_tool_calls=share,
        same_verdict=share,
        different_verdict=share,
        pass_flips=1,
        first_differences=[FirstDifference(turn=1, kind="call", episodes=1)],
        resolution=0.15,
        run_serving={},
        replay_serving={},
        serving_differences=[],
        replay_records_sha256="0" * 64,
        reading="",
    )


def _model_card(tmp_path: Path) -> str:
    arms = ["depth:d1", "depth:d2", "depth:d1+h8", "depth:d2+h5"]
    lines = [
        line(a, s, t, "passed" if (s + t) % 3 else "wrong_state")
        for a in arms
        for s in range(4)
        for t in range(2)
    ]
    write_run(tmp_path, header(arms, range(4), 2, rates=RATES), lines)
    return render_document(card_from_run(tmp_path))


def test_every_label_a_card_prints_is_in_the_glossary(tmp_path: Path) -> None:
    cards = [
        render_document(rebuild_published("reference-noisy")),
        _model_card(tmp_path),
        "\n".join(reproducibility_lines(_replay(), 0.95)),
    ]
    labels = set().union(*(_headers(card) | _verdicts(card) for card in cards))
    assert {
        "churn",
        "95% interval",
        "strict pass^5",
        "uncached input",
        "of 2 replayed episodes",
    } <= (labels)
    missing = sorted(label for label in labels if lookup(label) is None)
    assert missing == [], f"labels a card prints with no glossary term: {missing}"
    for term in TERMS:  # one or two sentences each
        assert 1 <= len(re.findall(r"[.!?](?:\s|$)", term.definition)) <= 2, term.name


def test_the_glossary_page_is_current() -> None:
    page = (ROOT / GLOSSARY_PAGE).read_text(encoding="utf-8")
    assert page == glossary_markdown()  # python scripts/render_docs.py writes it


def test_the_cards_header_points_to_the_glossary(tmp_path: Path) -> None:
    card = _model_card(tmp_path)
    top = card.split("\n## ", 1)[0]
    assert POINTER in top and GLOSSARY_PAGE in POINTER


def test_the_glossary_command_prints_a_term_or_refuses_in_one_line() -> None:
    runner = CliRunner()
    one = runner.invoke(app, ["glossary", "paired 90% interval"])
    assert one.exit_code == 0 and one.stdout.startswith("paired interval: ")
    every = runner.invoke(app, ["glossary"])
    assert every.exit_code == 0 and len(every.stdout.splitlines()) == len(TERMS)
    bad = runner.invoke(app, ["glossary", "chrun"])
    assert bad.exit_code == 2 and bad.stdout == ""
    assert bad.stderr.count("\n") == 1 and "did you mean churn" in bad.stderr
