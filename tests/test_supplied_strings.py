"""Strings a user, a model or a server chose, printed as text (issue 33, items 5 and 9).

A model id, `model.rates.source`, a merged shard's folder name and every other supplied value try
to become Markdown (a forged `## Verdict` heading), HTML (`<img onerror>`, `<script>`) or terminal
control (an escape sequence, a right-to-left override). card.md is read back by a real CommonMark
renderer (markdown-it, which rich brings), the view's page by the standard library's HTML parser,
and validate's stdout as a terminal would show it: each finds only text, on the line it belongs
to, at most 2,000 characters of any one value (supplied.MAX_CHARS).
"""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import yaml
from endpoint_double import Answer, serve
from markdown_it import MarkdownIt
from test_key_defects import document

from poisson_tasks.calibration import card_from_run, render_document
from poisson_tasks.cli import run_cli
from poisson_tasks.runfolder import MergedShard, MergeRecord
from poisson_tasks.supplied import MAX_CHARS, html, markdown, markdown_code, terminal

FORGED = (
    "x`y\n\n## Verdict\n\nforged [a](javascript:alert(0)) <img src=x onerror=alert(1)> "
    "<script>alert(2)</script> | cell | \u202egnp.exe\x1b[31mred\u2028"
)


def headings(card_md: str) -> list[str]:
    return [line for line in card_md.splitlines() if line.startswith("#")]


def plain_headings(artifact: Any) -> list[str]:
    """The headings of the same card with a plain model id: the card's own."""
    provenance = artifact.provenance.model_copy(update={"model": "m", "rates": None})
    plain = artifact.model_copy(update={"model": "m", "provenance": provenance})
    return headings(render_document(plain).replace("# Card: `m`", "# Card"))


def rendered(card_md: str) -> str:
    return MarkdownIt("commonmark").render(card_md)


class _Tags(HTMLParser):
    """Every start tag and its attributes, and the text outside <script> blocks."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.text: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if not self._in_script:
            self.text.append(data)


def tags_of(page: str) -> _Tags:
    parser = _Tags()
    parser.feed(page)
    return parser


# --------------------------------------------------------------------------- the functions


@pytest.mark.parametrize("show", [terminal, markdown, markdown_code, html])
def test_every_output_writes_one_line_of_at_most_max_chars(show: Any) -> None:
    out = show(FORGED * 10_000)
    assert "\n" not in out and "\x1b" not in out and "\u202e" not in out and "\u2028" not in out
    assert len(out) <= MAX_CHARS * 2  # escapes may lengthen the clipped text
    assert "\\u202e" in out and "\\x1b" in out


def test_markdown_of_a_value_renders_as_that_text() -> None:
    html_out = rendered(f"- model: {markdown(FORGED)}\n- as code: {markdown_code(FORGED)}\n")
    assert "<img" not in html_out and "<script" not in html_out and "<h2" not in html_out
    assert "<a " not in html_out and html_out.count("<li>") == 2
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in html_out


# --------------------------------------------------------------------------- through the CLI


@pytest.fixture(scope="module")
def forged_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A run whose model id, rates source and description try to become markup: validate's
    output, the card and the view."""
    tmp = tmp_path_factory.mktemp("forged")
    doc = document("http://127.0.0.1:9/v1")
    doc["model"]["model"] = FORGED
    doc["model"]["rates"] = {
        "input": 1.0,
        "cached_input": 0.5,
        "output": 2.0,
        "as_of": "2026-01-01",
        "source": "see `x` <script>alert(3)</script>\n## Forged source " + "s" * 700_000,
    }
    out: dict[str, Any] = {}
    with serve(routes={"/v1/models": Answer(200, {"data": [{"id": FORGED}]})}) as double:
        doc["model"]["base_url"] = double.base_url
        path = tmp / "forged.yaml"
        path.write_text(yaml.safe_dump(doc))
        out["prereg"] = path
        out["folder"] = tmp / "run"
        assert run_cli(["run", str(path), "--out", str(out["folder"]), "--quiet"]) == 0
    assert run_cli(["view", str(out["folder"]), "--out", str(tmp / "view.html")]) == 0
    out["card_md"] = render_document(card_from_run(out["folder"]))
    out["page"] = (tmp / "view.html").read_text(encoding="utf-8")
    return out


def test_validate_prints_the_model_id_on_its_own_line_escaped(
    forged_run: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["validate", str(forged_run["prereg"])]) == 0
    printed = capsys.readouterr().out
    model = [line for line in printed.splitlines() if line.startswith("  model ")]
    assert len(model) == 1 and "\\n\\n## Verdict" in model[0]
    assert not [line for line in printed.splitlines() if "Verdict" in line and line not in model]
    assert "\x1b" not in printed and "\u202e" not in printed and "\u2028" not in printed


def test_the_card_renders_no_forged_heading_tag_or_link(forged_run: dict[str, Any]) -> None:
    card_md = forged_run["card_md"]
    out = rendered(card_md)
    assert "<img" not in out and "<script" not in out and "<a " not in out
    found = headings(card_md)
    assert found[0].startswith("# Card: `` x`y\\n\\n## Verdict")
    assert ["# Card", *found[1:]] == plain_headings(card_from_run(forged_run["folder"]))
    assert out.count("<h1>") == 1 and "<h1>Card: <code>" in out
    assert "\x1b" not in card_md and "\u202e" not in card_md and "\u2028" not in card_md


def test_the_card_prints_at_most_2000_characters_of_a_value(forged_run: dict[str, Any]) -> None:
    source_line = next(x for x in forged_run["card_md"].splitlines() if "Forged source" in x)
    assert source_line.count("s") < MAX_CHARS + 400  # the 700,000-character source, clipped
    assert max(len(line) for line in forged_run["card_md"].splitlines()) < 8_000


def test_the_view_shows_the_forged_strings_as_text(forged_run: dict[str, Any]) -> None:
    page = tags_of(forged_run["page"])
    names = {tag for tag, _ in page.tags}
    assert "img" not in names and "a" in names  # the page's own nav links only
    assert all(
        value is None or not value.startswith("javascript")
        for tag, attrs in page.tags
        for name, value in attrs
        if tag == "a" and name == "href"
    )
    scripts = [attrs for tag, attrs in page.tags if tag == "script"]
    assert all(dict(attrs).get("type") or attrs == [] for attrs in scripts)  # the page's own
    assert len([attrs for attrs in scripts if not attrs]) == 1  # one executable script: view.js
    text = "".join(page.text)
    assert "\u202e" not in text and "\x1b" not in text and "<script>alert(2)</script>" in text


def test_a_merged_shards_folder_name_is_text_on_the_card(forged_run: dict[str, Any]) -> None:
    artifact = card_from_run(forged_run["folder"])
    shard = MergedShard(
        index=0,
        folder=FORGED,
        sessions=[0],
        episodes=1,
        tokens=1,
        records_sha256="0" * 64,
        budget={"tokens": 1},
    )
    merged = MergeRecord(count=1, rule=FORGED, plan_hash="`", merged_at=FORGED, shards=[shard])
    provenance = artifact.provenance.model_copy(update={"shards": merged})
    card_md = render_document(artifact.model_copy(update={"provenance": provenance}))
    out = rendered(card_md)
    assert "<img" not in out and "<script" not in out and "<a " not in out
    assert headings(card_md)[1:] == plain_headings(artifact)[1:]
    (line,) = [x for x in card_md.splitlines() if x.startswith("- shard folders: ")]
    assert "\\| cell \\|" in line and "\\\\n\\\\n## Verdict" in line


def test_the_views_title_is_the_folders_name_as_text(tmp_path: Path) -> None:
    from view_runs import small_run

    from poisson_tasks.view import build_view

    folder = small_run(tmp_path / "<b>x</b>\x1b[2J\u202e", arms=("depth:d1",), seeds=1)
    _, page = build_view(folder)
    head = page.decode().split("</header>", 1)[0]
    assert "<b>" not in head and "&lt;b&gt;" in head
    assert "\x1b" not in head and "\u202e" not in head and "\\x1b[2J\\u202e" in head


def test_probe_md_prints_a_served_model_folder_and_disclosure_as_text() -> None:
    """probe.md, the knob probe's own Markdown, prints what the registration chose as text."""
    from poisson_tasks.probe.figures import ProbeResult, RunProvenance
    from poisson_tasks.probe.render import render_probe

    provenance = RunProvenance(
        model="m",
        phase="arms",
        folder=FORGED,
        served_model=FORGED + " | x",
        provider="openai-compatible",
        episodes=1,
        sessions=1,
        stop_reasons=["complete"],
        preregistration_hash="0" * 64,
        seed_list_hash="0" * 64,
        generator_hash="0" * 64,
        engine_hash="0" * 64,
        vocabulary_hash="0" * 64,
        package_version="0",
        records_sha256="0" * 64,
    )
    result = ProbeResult(
        name="p",
        registration_hash="0" * 64,
        reference_policies=False,
        models=["m"],
        tasks=1,
        attempts=1,
        rule="r",
        rows=[],
        unmeasured=[],
        contrasts=[],
        phase1=[],
        arm_runs=[],
        disclosures=[FORGED],
        provenance=[provenance],
    )
    md = render_probe(result)
    out = MarkdownIt("commonmark").enable("table").render(md)
    assert "<img" not in out and "<script" not in out
    assert [x for x in md.splitlines() if x.startswith("## ")] == [
        "## Contrasts",
        "## Arm attempts",
        "## Disclosures",
        "## Provenance",
    ]
    row = next(x for x in md.splitlines() if x.startswith("| m | arms |"))
    assert row.count(" | ") == 9  # ten cells: no value opened another
    assert "\x1b" not in md and "\u202e" not in md
