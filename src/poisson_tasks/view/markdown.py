"""card.md as HTML: the card's own text in the report, every section, escaped.

The Markdown a card is written in (render.py) uses headings, paragraphs, one block quote, bullet
lists, pipe tables, `code` and **bold**; this renders exactly that and shows anything else as
plain text. Every character of the source is escaped before any markup is added, so no text in
a card (a model's name, a server's words) can become markup. A table's header cell that names a
glossary term carries the term's definition, which the page shows on hover (`defined`).
"""

from __future__ import annotations

import html
import re

from poisson_tasks.glossary import TERMS, lookup

__all__ = ["card_html", "defined", "glossary_html", "inline"]

# Read left to right: a backslash escape (what supplied.markdown writes), a code span (a run of
# backticks, then the shortest text up to a run of the same length: render.py fences a value that
# holds backticks with a longer run, as CommonMark reads it), or one of the two entities.
_TOKEN = re.compile(r"\\([\\`\[\]|])|(?<!`)(`+)(?!`)(.+?)(?<!`)\2(?!`)|&amp;|&lt;")
_ENTITIES = {"&amp;": "&", "&lt;": "<"}
_BOLD = re.compile(r"\*\*([^*]+)\*\*")
_HEADING = re.compile(r"^(#{1,6}) (.*)$")


def inline(text: str) -> str:
    """One line of Markdown as escaped HTML: `code` and **bold**, escapes read back, everything
    else text."""
    pieces: list[str] = []
    plain: list[str] = []
    last = 0
    for match in _TOKEN.finditer(text):
        plain.append(text[last : match.start()])
        last = match.end()
        if match[1] is not None:  # a backslash escape
            plain.append(match[1])
        elif match[2] is not None:  # a code span
            pieces.append(_bold(html.escape("".join(plain))))
            plain.clear()
            code = match[3]
            if len(code) > 2 and code.startswith(" ") and code.endswith(" ") and code.strip():
                code = code[1:-1]
            pieces.append(f"<code>{html.escape(code)}</code>")
        else:
            plain.append(_ENTITIES[match[0]])
    plain.append(text[last:])
    pieces.append(_bold(html.escape("".join(plain))))
    return "".join(pieces)


def defined(label: str, shown: str | None = None) -> str:
    """A label as HTML (`shown`, already HTML, or the label itself as inline Markdown) that shows
    its glossary definition on hover and on keyboard focus; the label alone when the glossary has
    no term for it."""
    text = inline(label) if shown is None else shown
    term = lookup(label)
    if term is None:
        return text
    definition = html.escape(f"{term.name}: {term.definition}", quote=True)
    return f'<span class=term tabindex=0 data-def="{definition}">{text}</span>'


def glossary_html() -> str:
    """Every glossary term and its definition, as the page's Glossary section."""
    rows = "".join(
        f'<dt id="term-{index}">{html.escape(term.name)}</dt><dd>{inline(term.definition)}</dd>'
        for index, term in enumerate(TERMS)
    )
    return (
        "<section id=glossary><h2>Glossary</h2><p class=dim>Every term the card prints "
        f"(docs/glossary.md); a dotted label shows its definition on hover.</p><dl>{rows}</dl>"
        "</section>"
    )


def _bold(escaped: str) -> str:
    return _BOLD.sub(lambda found: f"<strong>{found[1]}</strong>", escaped)


def _cells(line: str) -> list[str]:
    body = line.strip()
    body = body[1:] if body.startswith("|") else body
    body = body[:-1] if body.endswith("|") and not body.endswith("\\|") else body
    return [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", body)]


def _table(lines: list[str]) -> str:
    head, rows = _cells(lines[0]), [_cells(line) for line in lines[2:]]
    out = ["<div class=scroll><table class=md><thead><tr>"]
    out += [f"<th>{defined(cell)}</th>" for cell in head]
    out.append("</tr></thead><tbody>")
    for row in rows:
        out.append("<tr>" + "".join(f"<td>{inline(cell)}</td>" for cell in row) + "</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def card_html(markdown: str, heading_offset: int = 1) -> str:
    """The card's Markdown as HTML; headings move down `heading_offset` levels (h1 becomes h2)."""
    out: list[str] = []
    lines = markdown.splitlines()
    at = 0
    while at < len(lines):
        line = lines[at]
        if not line.strip():
            at += 1
            continue
        heading = _HEADING.match(line)
        if heading:
            level = min(6, len(heading[1]) + heading_offset)
            out.append(f"<h{level}>{inline(heading[2])}</h{level}>")
            at += 1
            continue
        block: list[str] = []
        kind = _kind(line)
        while at < len(lines) and lines[at].strip() and _kind(lines[at]) == kind:
            block.append(lines[at])
            at += 1
        if kind == "table" and len(block) >= 2:
            out.append(_table(block))
        elif kind == "quote":
            text = " ".join(b.lstrip(">").strip() for b in block)
            out.append(f"<blockquote>{inline(text)}</blockquote>")
        elif kind == "list":
            items = "".join(f"<li>{inline(b[2:])}</li>" for b in block)
            out.append(f"<ul>{items}</ul>")
        else:
            out.append("<p>" + "<br>".join(inline(b) for b in block) + "</p>")
    return "\n".join(out)


def _kind(line: str) -> str:
    if line.startswith("|"):
        return "table"
    if line.startswith(">"):
        return "quote"
    if line.startswith(("- ", "* ")):
        return "list"
    if _HEADING.match(line):
        return "heading"
    return "text"
