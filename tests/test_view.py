"""poisson-tasks view: the report's contents, its safety, its determinism and its bad inputs.

The browser-driven checks are in tests/browser/ (their own CI step); these read the page's bytes.
Run folders are cut from the published reference-noisy records (tests/view_runs.py): a scripted
baseline's episodes, never a model's.
"""

from __future__ import annotations

import base64
import gc
import hashlib
import html
import json
import os
import re
import subprocess
import sys
import zlib
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner
from view_runs import small_run

import poisson_tasks.view
from poisson_tasks.calibration import card_from_run
from poisson_tasks.calibration.sections.knob import render_knob
from poisson_tasks.cli import app
from poisson_tasks.generator import generate
from poisson_tasks.runfolder import HEADER, RunHeader
from poisson_tasks.view import build_view, write_view
from poisson_tasks.view.cardhtml import card_sections
from poisson_tasks.view.diverge import first_divergence, task_changes
from poisson_tasks.view.markdown import card_html
from poisson_tasks.view.packing import escaped_json

HOSTILE = (
    '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'
    '<a href="javascript:window.__pwned=3">click</a></script><!--'
)


class _Page(HTMLParser):
    """The page's elements: tags with their attributes, and each script block's text."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: dict[str, str] = {}
        self._script: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._script = dict(attrs).get("id") or "inline"
            self.scripts[self._script] = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._script = None

    def handle_data(self, data: str) -> None:
        if self._script is not None:
            self.scripts[self._script] += data


def _parse(page: bytes) -> _Page:
    parsed = _Page()
    parsed.feed(page.decode("utf-8"))
    return parsed


def _inflate(parsed: _Page, name: str) -> Any:
    return json.loads(zlib.decompress(base64.b64decode(parsed.scripts[name])))


def _chunks(parsed: _Page) -> dict[str, Any]:
    meta = json.loads(parsed.scripts["meta"])
    out = {
        arm: {part: _inflate(parsed, name) for part, name in names.items()}
        for arm, names in meta["chunks"].items()
    }
    out["__pairs__"] = _inflate(parsed, "pairs")
    out["__meta__"] = meta
    return out


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_run(tmp_path_factory.mktemp("view") / "run")


@pytest.fixture(scope="module")
def small_page(small: Path) -> bytes:
    return build_view(small)[1]


def test_the_pass_leaves_the_cycle_collector_as_it_found_it(
    small: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the view pauses automatic collection during its pass and freezes what it made (a third
    # of the write's time): on, it is on again after; off (a caller's choice), it stays off
    assert gc.isenabled()
    seen: list[bool] = []
    original = poisson_tasks.view.collect

    def watching(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return original(*args, **kwargs)

    monkeypatch.setattr(poisson_tasks.view, "collect", watching)
    gc.unfreeze()
    page = build_view(small)[1]
    assert gc.isenabled() and seen == [False] and gc.get_freeze_count() > 0
    gc.disable()
    try:
        assert build_view(small)[1] == page and not gc.isenabled()
    finally:
        gc.enable()


def test_the_page_is_self_contained(small_page: bytes) -> None:
    parsed = _parse(small_page)
    for tag, attrs in parsed.tags:
        assert tag not in ("link", "img", "iframe", "object", "embed"), tag
        assert "src" not in attrs, (tag, attrs)
        href = attrs.get("href")
        assert href is None or href.startswith("#"), href
    csp = next(
        a["content"] for t, a in parsed.tags if a.get("http-equiv") == "Content-Security-Policy"
    )
    assert csp is not None and "default-src 'none'" in csp
    script = parsed.scripts["inline"]
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    assert f"'sha256-{digest}'" in csp  # the one script the page may run is its own
    assert b"http://" not in small_page and b"https://" not in small_page


def test_every_episode_and_task_is_in_the_page(small: Path, small_page: bytes) -> None:
    chunks = _chunks(_parse(small_page))
    lines = [json.loads(raw) for raw in (small / "episodes.jsonl").read_text().splitlines()]
    for arm in ("depth:d1", "depth:d2", "depth:d3"):
        rows = chunks[arm]["episodes"]
        assert len(rows) == sum(1 for line in lines if line["arm_id"] == arm)
        for row in rows:
            assert row["task"] == "ok"
            task = chunks[arm]["tasks"][str(row["seed"])]
            assert task["task_id"] == row["task_id"] == generate(arm, row["seed"]).task_id
            assert row["transcript"]["messages"]  # the whole transcript travels
    seeds = chunks["__meta__"]["seeds"]
    assert [r["seed"] for r in chunks["depth:d1"]["episodes"]] == sorted(
        (r["seed"] for r in chunks["depth:d1"]["episodes"]), key=seeds.index
    )


def test_the_figures_are_the_cards(small: Path, small_page: bytes) -> None:
    artifact = card_from_run(small)
    meta = _chunks(_parse(small_page))["__meta__"]
    assert meta["cells"] == {c.arm_id: c.model_dump(mode="json") for c in artifact.cells}
    assert meta["knobs"] == [t.model_dump(mode="json") for t in artifact.knobs]
    text = small_page.decode()
    for cell in artifact.cells:
        assert cell.strict is not None
        assert f"{cell.strict.pass_at_1:.3f} <span class=dim>[{cell.strict.low:.3f}" in text
    for claim in artifact.statements.does_not_claim:
        assert f'data-key="{claim.key}"' in text


def test_pairs_hold_the_adjacent_levels(small_page: bytes) -> None:
    chunks = _chunks(_parse(small_page))
    assert set(chunks["__pairs__"]) == {"depth:d1|depth:d2", "depth:d2|depth:d3"}
    seed = str(chunks["__meta__"]["seeds"][0])
    changes = chunks["__pairs__"]["depth:d2|depth:d3"][seed]
    assert {c["what"] for c in changes["changed"]} == {
        "goal stage",
        "minimum calls",
        "reference turns",
    }
    assert "tool block names and order" in changes["same"]


def test_a_task_id_this_build_does_not_make_is_named(tmp_path: Path) -> None:
    def edit(doc: dict[str, Any]) -> None:
        if doc["arm_id"] == "depth:d2" and doc["attempt"] == 0:
            doc["task_id"] = "0" * 64

    folder = small_run(tmp_path / "run", edit=edit)
    collected, page = build_view(folder)
    rows = [r for r in collected.episodes["depth:d2"] if r["attempt"] == 0]
    assert rows and all(r["task"] == "mismatch" and "divergence" not in r for r in rows)
    assert collected.mismatched == len(rows)
    assert f"{len(rows)} episodes record a task id" in page.decode()


def test_the_same_run_gives_the_same_bytes_in_every_process(small: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    subprocess.run(
        [sys.executable, "-m", "poisson_tasks", "view", str(small), "--out", str(out)],
        check=True,
        env=env,
        capture_output=True,
    )
    assert os.environ.get("PYTHONHASHSEED") != "12345"
    assert out.read_bytes() == build_view(small)[1]


def test_hostile_text_stays_text(tmp_path: Path) -> None:
    """A transcript and a session's stop detail carrying markup (made up here, for this test): the
    page's JSON cannot close its script block, and the card's HTML shows the detail escaped."""

    def edit(doc: dict[str, Any]) -> None:
        doc["transcript"]["messages"][-1]["content"] = HOSTILE

    def header_edit(header: dict[str, Any]) -> None:
        header["sessions"][0]["detail"] = HOSTILE

    folder = small_run(tmp_path / "run", edit=edit, header_edit=header_edit)
    page = build_view(folder)[1]
    parsed = _parse(page)
    assert html.escape(HOSTILE) in page.decode()  # the provenance shows it, as text
    assert [t for t, _ in parsed.tags].count("script") == len(parsed.scripts) == 1 + 3 * 2 + 1 + 1
    assert not any(t in ("img", "a") and "javascript" in str(a) for t, a in parsed.tags)
    assert "onerror" not in " ".join(str(a) for _, a in parsed.tags)
    chunks = _chunks(parsed)
    assert chunks["depth:d1"]["episodes"][0]["transcript"]["messages"][-1]["content"] == HOSTILE


def test_the_runs_key_is_redacted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = "sk-viewtest-1234567890abcdefXYZ"

    def edit(doc: dict[str, Any]) -> None:
        doc["transcript"]["messages"][-1]["content"] = f"the key is {key}."

    def header_edit(header: dict[str, Any]) -> None:
        header["preregistration"]["model"]["api_key_env"] = "VIEW_TEST_KEY"

    monkeypatch.setenv("VIEW_TEST_KEY", key)
    folder = small_run(tmp_path / "run", edit=edit, header_edit=header_edit)
    page = build_view(folder)[1]
    chunks = _chunks(_parse(page))
    text = json.dumps(chunks)
    assert key not in text and key[:12] not in text and key not in page.decode()
    assert (
        "[redacted]" in chunks["depth:d1"]["episodes"][0]["transcript"]["messages"][-1]["content"]
    )


def test_a_refused_card_still_shows_its_episodes(tmp_path: Path) -> None:
    def edit(doc: dict[str, Any]) -> None:  # every depth:d1 episode made no tool call
        if doc["arm_id"] == "depth:d1":
            doc.update(tool_calls=0, outcome="wrong_state", strict_label="wrong_state")
            doc.update(leaky_pass=False, passed=False)

    folder = small_run(tmp_path / "run", edit=edit)
    collected, page = build_view(folder)
    assert collected.artifact is None and collected.refusal is not None
    assert "card refused" in collected.refusal
    text = page.decode()
    assert "Card refused" in text and 'data-arm="depth:d1"' in text
    assert len(_chunks(_parse(page))["depth:d1"]["episodes"]) == 20


def test_first_divergence() -> None:
    ref = [{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {"x": 2}}]
    same = [{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {"x": 2}}]
    assert first_divergence(same, ref) is None
    other = [same[0], {"name": "b", "arguments": {"x": 3}}]
    assert first_divergence(other, ref) == {"step": 1, "kind": "different", "fields": ["x"]}
    wrong_tool = [{"name": "c", "arguments": {"x": 1}}]
    assert first_divergence(wrong_tool, ref) == {"step": 0, "kind": "different", "fields": ["name"]}
    assert first_divergence(same[:1], ref) == {"step": 1, "kind": "stopped", "fields": []}
    assert first_divergence([*same, same[0]], ref) == {"step": 2, "kind": "extra", "fields": []}
    unparsed = [{"name": "a", "arguments": None, "raw_arguments": "{x"}]
    assert first_divergence(unparsed, ref) == {
        "step": 0,
        "kind": "different",
        "fields": ["arguments"],
    }


def test_task_changes_of_a_control() -> None:
    changes = task_changes(generate("depth:d1", 3), generate("depth:d1+h8", 3))
    # eight seeded read calls and their answers: as many tokens as depth:d8 adds over d1 (N9)
    assert changes["changed"] == [{"what": "seeded history messages", "lower": 0, "upper": 16}]
    assert all(op == "=" for op, _ in changes["instruction"]["lower"])


def test_markdown_is_escaped() -> None:
    out = card_html("# A `<b>` card\n\n| a | b |\n|---|---|\n| <i>x</i> | **y** |\n\n- <script>")
    assert "<h2>A <code>&lt;b&gt;</code> card</h2>" in out
    assert "<td>&lt;i&gt;x&lt;/i&gt;</td><td><strong>y</strong></td>" in out
    assert "<li>&lt;script&gt;</li>" in out and "<script>" not in out


runner = CliRunner()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["view", "--out", "{tmp}/r.html"], "give a run folder, or --published NAME"),
        (["view", "{run}", "--published", "reference-noisy", "--out", "{tmp}/r.html"], "not both"),
        (["view", "--published", "nope", "--out", "{tmp}/r.html"], "is not a published card"),
        (["view", "{tmp}/absent", "--out", "{tmp}/r.html"], "is not a run folder (no such folder)"),
        (["view", "{run}/run.json", "--out", "{tmp}/r.html"], "is not a run folder (not a folder)"),
        (["view", "{tmp}", "--out", "{tmp}/r.html"], "run.json is missing"),
        (["view", "{run}"], "--out is required"),
        (["view", "{run}", "--out", "{tmp}"], "is a folder"),
        (["view", "{run}", "--out", "{tmp}/no/such/r.html"], "does not exist; create it first"),
    ],
)
def test_bad_inputs_are_one_line(small: Path, tmp_path: Path, args: list[str], needle: str) -> None:
    argv = [a.format(tmp=tmp_path, run=small) for a in args]
    result = runner.invoke(app, argv)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], lines
    assert not (tmp_path / "r.html").exists()


def test_the_cli_writes_the_report(small: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    result = runner.invoke(app, ["view", str(small), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert re.match(rf"{re.escape(str(out))}: [\d,]+ bytes, 60 episodes", result.output)
    assert out.read_bytes() == build_view(small)[1]


def test_write_view_replaces_atomically(small: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    out.write_text("old")
    report = write_view(out, small)
    assert report.size == out.stat().st_size and out.read_bytes().startswith(b"<!doctype html>")
    assert not list(tmp_path.glob(".report.html.*"))


def test_the_pages_json_cannot_close_its_script() -> None:
    out = escaped_json({"x": "</script><script>alert(1)</script>", "y": "a & b > c"})
    assert "<" not in out and ">" not in out and "&" not in out
    assert json.loads(out) == {"x": "</script><script>alert(1)</script>", "y": "a & b > c"}


def _text_of(page: bytes, start: str, end: str) -> str:
    """The visible text of the static page between two markers (scripts and tags left out)."""
    body = page.decode()
    body = body[body.index(start) : body.index(end, body.index(start))]
    body = re.sub(r"<script.*?</script>", "", body, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", body))


def test_the_cost_tables_are_labelled_as_the_cards_and_no_backtick_shows(
    small: Path, small_page: bytes
) -> None:
    # issue 34 item 5: the cost table printed raw keys (mean_model_calls) with three decimals
    costs = _text_of(small_page, "<section id=costs>", "</section>")
    for label in ("mean model calls", "median tokens", "uncached input", "computed dollars"):
        assert label in costs, label
    assert not re.search(r"[a-z]+_[a-z_]+", costs), re.findall(r"[a-z]+_[a-z_]+", costs)
    card = card_from_run(small)
    total = card.run_totals.uncached_input_tokens
    assert total is not None and f"{total:,}" in costs
    shown = _text_of(small_page, "<main id=card>", "<details id=cardmd>")
    assert "`" not in shown  # code spans are <code>, never a literal backtick


def test_terms_carry_their_definition_and_the_page_holds_the_glossary(small_page: bytes) -> None:
    # issue 34 item 5: the view shows a term's definition on hover (CSS: .term:hover::after)
    from poisson_tasks.glossary import TERMS, lookup

    text = small_page.decode()
    churn = lookup("churn")
    assert churn is not None
    assert f'data-def="churn: {html.escape(churn.definition, quote=True)}">churn<' in text
    assert ".term:hover::after" in text and "content:attr(data-def)" in text
    section = text[text.index("<section id=glossary>") :]
    assert all(f">{html.escape(t.name)}</dt>" in section for t in TERMS)
    assert "<a href=#glossary>glossary</a>" in text  # linked from the page's header
    assert "<p class=cantell><strong>What this card can tell.</strong>" in text


def test_the_comparison_rows_show_the_cards_own_cells(small: Path) -> None:
    """The view's adjacent-level table and card.md print the same cells, verdict words and `n/a`
    for a missing interval included (issue 35: the two tables used to word them apart)."""
    card = card_from_run(small)
    table = card.knobs[0]
    first, *rest = table.comparisons
    missing = first.model_copy(update={"low": None, "high": None, "diff": None})
    left_out = first.model_copy(update={"verdict": "left_out", "reason": "d1 is saturated"})
    table = table.model_copy(update={"comparisons": [missing, left_out, *rest]})
    card = card.model_copy(update={"knobs": [table, *card.knobs[1:]]})
    page = card_sections(card)
    rows = [
        html.unescape(re.sub(r"<[^>]+>", "", row))
        for row in re.findall(r'<tr class="cmp .*?</tr>', page)
    ]
    markdown = render_knob(card, table.knob)
    md_rows = [line for line in markdown.splitlines() if line.startswith("|") and "→" in line]
    md_head = next(line for line in markdown.splitlines() if line.startswith("| pair |"))
    page_head = html.unescape(re.sub(r"<[^>]+>", "|", page.split('<tr class="cmp', 1)[0]))
    for label in md_head.strip("| ").split(" | "):
        assert f"|{label}|" in page_head, label
    assert len(rows) == len(md_rows) == 2 + len(rest)
    for md_row in md_rows:
        cells = [c.strip().replace("`", "") for c in md_row.strip("|").split(" | ")]
        assert any(all(c in row for c in cells) for row in rows), (cells, rows)
    assert "n/a" in rows[0] and "—" not in rows[0]
    assert "left out: d1 is saturated" in rows[1]


def test_a_missing_figure_reads_as_on_the_card(small: Path) -> None:
    """A rate with nothing to rate reads `n/a` in the view's level table, as card.md prints it."""
    card = card_from_run(small)
    cell = card.cells[0].model_copy(update={"overshoot": None, "leaky": None})
    card = card.model_copy(update={"cells": [cell, *card.cells[1:]]})
    page = card_sections(card)
    row = re.search(rf'<tr class=cellrow data-arm="{re.escape(cell.arm_id)}">.*?</tr>', page)
    assert row is not None
    text = html.unescape(re.sub(r"<[^>]+>", "|", row[0]))
    assert "|n/a|" in text and "—" not in text


def test_the_view_reads_its_run_json_once(small: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One header read for the whole page: the folder's check, its card and its episodes all
    take the header open_run read (the view used to parse run.json three times)."""
    ours = (small / HEADER).read_bytes()
    reads: list[bool] = []  # one per run.json parsed: this folder's, or a published card's
    parse = RunHeader.model_validate_json

    def counted(data: Any, *args: Any, **kwargs: Any) -> RunHeader:
        reads.append(data == ours)
        return parse(data, *args, **kwargs)

    monkeypatch.setattr(RunHeader, "model_validate_json", counted)
    build_view(small)
    assert reads.count(True) == 1
