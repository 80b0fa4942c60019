"""One self-contained HTML file: the card as static HTML, the episodes packed for the script.

Data travels in the page, never fetched: the card's cells and the run's plan as one JSON block,
and per arm one chunk (its episodes, transcripts included, and its regenerated tasks), compressed
with zlib and base64-encoded in a non-executing <script type=application/octet-stream>; the page's
script inflates a chunk with the browser's DecompressionStream("deflate") when a cell is opened.
The page's Content-Security-Policy allows its one inline script (by hash) and nothing else: no
request can leave it (default-src 'none'), and no markup a transcript might hold can run, since
the script only ever writes text (textContent) and JSON blocks escape "<".
"""

from __future__ import annotations

import base64
import hashlib
import html
from importlib import resources
from typing import Any

from poisson_tasks import supplied
from poisson_tasks.view.cardhtml import card_sections, prose
from poisson_tasks.view.gather import Collected
from poisson_tasks.view.markdown import card_html, glossary_html, inline
from poisson_tasks.view.packing import escaped_json, pack

__all__ = ["FORMAT", "render_page"]

FORMAT = "poisson-tasks/view@1"


def _asset(name: str) -> str:
    return (resources.files("poisson_tasks.view") / "assets" / name).read_text(encoding="utf-8")


def _meta(report: Collected, chunks: dict[str, dict[str, str]]) -> dict[str, Any]:
    artifact = report.artifact
    cells: dict[str, Any] = {}
    if artifact is not None:
        cells = {cell.arm_id: cell.model_dump(mode="json") for cell in artifact.cells}
    pairs = [
        {"key": key, "lower": key.split("|", 1)[0], "upper": key.split("|", 1)[1]}
        for key in report.tasks.pairs
    ]
    return {
        "format": FORMAT,
        "title": report.title,
        "kind": artifact.kind if artifact is not None else None,
        "model": artifact.model if artifact is not None else None,
        "arms": report.header.arms,
        "seeds": list(dict.fromkeys(report.header.seeds)),
        "attempts": report.header.attempts,
        "cells": cells,
        "knobs": [table.model_dump(mode="json") for table in artifact.knobs] if artifact else [],
        "controls": artifact.controls if artifact is not None else [],
        "chunks": chunks,
        "pairs": pairs,
        "refusal": report.refusal,
        "task_problems": report.task_problems,
        "episodes": {arm: len(rows) for arm, rows in report.episodes.items()},
    }


def render_page(report: Collected) -> bytes:
    """The report's bytes: the same Collected gives the same bytes."""
    chunks: dict[str, dict[str, str]] = {}
    blobs: list[str] = []
    for index, arm in enumerate(report.header.arms):
        chunks[arm] = {"episodes": f"episodes-{index}", "tasks": f"tasks-{index}"}
        packed = {
            f"episodes-{index}": pack(report.episodes.get(arm, []), report.secret),
            f"tasks-{index}": report.tasks.packed.get(arm) or pack({}, report.secret),
        }
        blobs += [_blob(name, data) for name, data in packed.items()]
    blobs.append(_blob("pairs", pack(report.tasks.pairs, report.secret)))
    meta = report.scrub(_meta(report, chunks))
    script, style = _asset("view.js"), _asset("view.css")
    script_hash = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    csp = (
        "default-src 'none'; "
        f"script-src 'sha256-{script_hash}'; "
        "style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"
    )
    title = supplied.html(report.scrub(report.title))  # a folder's name: the key redacted
    lines = (report.card_md or "").splitlines()
    heading = next((line[2:] for line in lines if line.startswith("# ")), "")
    subtitle = f"<p class=subtitle>{inline(heading)}</p>" if heading else ""
    banner = ""
    if report.artifact is not None and report.artifact.kind == "reference-policy":
        banner = (
            "<p class=banner><strong>Reference-policy card.</strong> Every figure and episode here "
            "is a scripted baseline's, served by poisson-tasks itself; no language model's.</p>"
        )
    can_tell = report.artifact.statements.can_tell if report.artifact is not None else ""
    if can_tell:
        banner += (
            f"<p class=cantell><strong>What this card can tell.</strong> {prose(can_tell)} "
            "<a href=#glossary>Every term on it is defined in the glossary</a>, and a dotted "
            "label shows its definition on hover.</p>"
        )
    problems = "".join(f"<li>{prose(p)}</li>" for p in report.task_problems)
    notes = f"<ul class=problems>{problems}</ul>" if problems else ""
    refusal = (
        f"<section id=refusal><h2>Card refused</h2><p class=refusal>{prose(report.refusal)}</p>"
        "<p>The card is not published; its episodes are below, one cell per arm.</p>"
        f"<ul>{''.join(_arm_button(a) for a in report.header.arms)}</ul></section>"
        if report.refusal
        else ""
    )
    body = card_sections(report.artifact) if report.artifact is not None else ""
    full = (
        f"<details id=cardmd><summary>The card as card.md writes it (every section)</summary>"
        f"{card_html(report.card_md)}</details>"
        if report.card_md
        else ""
    )
    nav = "".join(
        f'<a href="#knob-{html.escape(table.knob)}">{html.escape(table.knob)}</a>'
        for table in (report.artifact.knobs if report.artifact else [])
    )
    page = (
        "<!doctype html>\n<html lang=en><head><meta charset=utf-8>"
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
        '<meta name=viewport content="width=device-width, initial-scale=1">'
        f'<meta name=generator content="{FORMAT}">'
        f"<title>{title}</title><style>{style}</style></head><body>"
        f"<header><h1>{title}</h1>{subtitle}<nav>{nav}<a href=#controls>controls</a>"
        "<a href=#statements>claims</a><a href=#costs>costs</a>"
        "<a href=#provenance>provenance</a><a href=#pairs-list>side by side</a>"
        "<a href=#glossary>glossary</a></nav></header>"
        f"<main id=card>{banner}{notes}{refusal}{body}"
        "<section id=pairs-list><h2>Side by side</h2><p class=dim>The same seed under two arms: "
        "what changed in the task, and what the model did.</p><div id=pairpicker></div></section>"
        f"{full}{glossary_html()}</main>"
        "<aside id=panel hidden><div class=panelbar><button id=close type=button>close ✕</button>"
        "<span id=crumbs></span></div><div id=panelbody></div></aside>"
        f'<script type="application/json" id="meta">{escaped_json(meta)}</script>'
        + "".join(blobs)
        + f"<script>{script}</script></body></html>\n"
    )
    return page.encode("utf-8")


def _blob(name: str, data: str) -> str:
    return f'<script type="application/octet-stream" id="{name}">{data}</script>'


def _arm_button(arm: str) -> str:
    arm = html.escape(arm)
    return f'<li><button class=open data-arm="{arm}">{arm}</button></li>'
