"""A string someone else chose (a model id in a pre-registration, a server's words, a model's reply,
a folder's name), printed as text: one function for a terminal, one for Markdown, one for HTML.

Each prints the value on one line, every character that is not printable written as an escape
(errors.escape_controls: a line break as \\n, a terminal escape as \\x1b, a right-to-left override
as \\u202e), and at most MAX_CHARS characters of it. Markdown also escapes what would open markup
(a heading cannot start, nor a tag, link, image, code span or table cell), HTML what would open a
tag or an entity. The view's script applies the same rule to what it shows (view/assets/view.js,
`visible`).
"""

from __future__ import annotations

import html as _html
import re

from poisson_tasks.errors import escape_controls

__all__ = ["MAX_CHARS", "html", "markdown", "markdown_code", "one_line", "terminal"]

MAX_CHARS = 2000  # characters of one supplied value any output prints; docs/commands.md says so

# HTML's & and < as entities (no tag, entity or autolink can open), Markdown's \ ` [ ] | with a
# backslash (no code span, link, image or table cell can open); with no line break left, no
# heading or list can start. Emphasis (* and _) is left alone: it cannot carry anything, and file
# names keep them.
_MARKUP = str.maketrans(
    {
        "&": "&amp;",
        "<": "&lt;",
        "\\": "\\\\",
        "`": "\\`",
        "[": "\\[",
        "]": "\\]",
        "|": "\\|",
    }
)


def one_line(value: object) -> str:
    """`value` as text on one line: clipped to MAX_CHARS (an ellipsis marks the cut), then every
    character that is not printable written as an escape."""
    text = str(value)
    if len(text) > MAX_CHARS:
        text = text[: MAX_CHARS - 1] + "…"
    return escape_controls(text)


def terminal(value: object) -> str:
    """`value` as a terminal prints it: one line, no escape sequence or line break left raw."""
    return one_line(value)


def markdown(value: object) -> str:
    """`value` as Markdown text: one line, its markup escaped."""
    return one_line(value).translate(_MARKUP)


def markdown_code(value: object) -> str:
    """`value` as a Markdown code span: one line, fenced by one backtick more than its longest run
    of backticks (a code span shows its text as it is, HTML included)."""
    text = one_line(value)
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    if not longest:
        return f"`{text}`"
    fence = "`" * (longest + 1)
    return f"{fence} {text} {fence}"


def html(value: object) -> str:
    """`value` as HTML text (an element's text or an attribute's value): one line, & < > " '
    as entities."""
    return _html.escape(one_line(value), quote=True)
