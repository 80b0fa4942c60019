"""The code blocks of README.md and docs/*.md that a user would paste, read and run as a user would.

A block a user would paste is a fenced block tagged bash, sh, shell, console or python, or an
untagged (or `text`) block whose first line starts with `$ ` (a command and what it prints). Each
page runs in a fresh folder that holds the repository's tracked top-level files and folders (as
links), as a clone would: its blocks in page order, in one shell folder and one Python namespace,
so a block may use what an earlier block on the page made.

A shell block is run command by command (a line ending in `\\` continues; `# ...` comments are
kept for bash to drop); `. .venv/bin/activate && ` before a command is left out, since the test
already runs in that environment. A plain `poisson-tasks ARGS` runs in this process through the
CLI's own entry (cli.run_cli); anything with shell syntax runs in bash. Every command must exit 0.
In a `$ ` block the lines after a command are what it prints: each line must be printed (stdout,
then stderr), in order and adjacent, and a line `...` stands for lines left out.
A Python block runs statement by statement; `EXPR  # -> SHOWN` checks that the expression's
value, as the Python prompt prints it (repr), is SHOWN (whitespace runs are one space; comment
lines `#    more` right after it continue SHOWN).

HTML comments on the lines just before a block say what the test does with it otherwise:

    <!-- docs-test: skip REASON -->             the block is not run, for REASON
    <!-- docs-test: skip "TEXT" REASON -->      its commands holding TEXT are not run
    <!-- docs-test: slow REASON -->             run only by the slow suite (same "TEXT" form)
    <!-- docs-test: given COMMAND -->           a shell command run first (what the page assumes)
    <!-- docs-test: then COMMAND -->            a shell command run after it, which must exit 0
"""

from __future__ import annotations

import ast
import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
import tokenize
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from poisson_tasks.cli import run_cli

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL = frozenset({"bash", "sh", "shell", "console"})
PYTHON = frozenset({"python", "py"})
FENCE = re.compile(r"^(?P<ticks>`{3,})(?P<lang>[^`\s]*)\s*$")
MARKER = re.compile(r"^<!-- docs-test: (?P<body>.*?) -->$")
KINDS = ("skip", "slow", "given", "then")
ACTIVATE = ". .venv/bin/activate && "
COMMAND_SECONDS = 900


@dataclass(frozen=True)
class Marker:
    """One `<!-- docs-test: ... -->` line: its kind, the quoted TEXT it is limited to (skip and
    slow), and its reason (skip and slow) or command (given and then)."""

    kind: str
    text: str | None
    rest: str
    line: int


@dataclass
class Block:
    """One pasted block: where it is, its language, its lines and its markers."""

    page: Path
    line: int  # the opening fence's line, from 1
    lang: str
    body: list[str]
    markers: list[Marker] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{_name(self.page)}:{self.line}"

    @property
    def python(self) -> bool:
        return self.lang in PYTHON

    @property
    def transcript(self) -> bool:
        return self.lang not in SHELL | PYTHON

    def commands(self) -> list[tuple[str, list[str]]]:
        """Each command with the lines shown after it (a `$ ` block's output; else none)."""
        if self.transcript:
            out: list[tuple[str, list[str]]] = []
            for text in self.body:
                if text.startswith("$ "):
                    out.append((text[2:].strip(), []))
                elif out:
                    out[-1][1].append(text.rstrip())
            return out
        joined, pending = [], ""
        for text in self.body:
            if text.rstrip().endswith("\\"):
                pending += text.rstrip()[:-1] + " "
                continue
            whole = (pending + text).strip()
            pending = ""
            if whole and not whole.startswith("#"):
                joined.append((whole, []))
        return joined

    def kind_of(self, command: str) -> tuple[str, str]:
        """("run" | "slow" | "skip", reason) for one command of the block."""
        for kind in ("skip", "slow"):
            for marker in self.markers:
                if marker.kind == kind and (marker.text is None or marker.text in command):
                    return kind, marker.rest
        return "run", ""

    def hooks(self, kind: str) -> list[str]:
        return [m.rest for m in self.markers if m.kind == kind]


def _name(page: Path) -> str:
    """A page as the failure names it: relative to the repository when it is one of its pages."""
    return str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else str(page)


def parse_marker(body: str, line: int) -> Marker:
    """A marker's body: `KIND ["TEXT"] REST`; ValueError naming what is wrong."""
    kind, _, rest = body.partition(" ")
    if kind not in KINDS:
        raise ValueError(f"line {line}: docs-test kind {kind!r} is not one of {', '.join(KINDS)}")
    text = None
    if kind in ("skip", "slow") and rest.startswith('"'):
        text, sep, rest = rest[1:].partition('" ')
        if not sep or not text:
            raise ValueError(f'line {line}: write {kind} "TEXT" REASON')
    if not rest.strip():
        what = "a reason" if kind in ("skip", "slow") else "a command"
        raise ValueError(f"line {line}: docs-test {kind} needs {what}")
    return Marker(kind, text, rest.strip(), line)


def blocks(page: Path) -> list[Block]:
    """The page's pasted blocks with their markers; ValueError for a marker that no pasted block
    follows, or one that does not parse."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    attached: set[int] = set()
    fenced: set[int] = set()  # lines inside a fence: a marker there is shown, not meant
    index = 0
    while index < len(lines):
        fence = FENCE.match(lines[index])
        if fence is None:
            index += 1
            continue
        ticks, end = fence["ticks"], index + 1  # closed by a bare fence at least as long
        while end < len(lines) and not re.fullmatch(f"{ticks}`*\\s*", lines[end]):
            end += 1
        lang, body = fence["lang"], lines[index + 1 : end]
        fenced.update(range(index + 1, end))
        pasted = lang in SHELL | PYTHON or (
            lang in ("", "text") and bool(body) and body[0].startswith("$ ")
        )
        if pasted:
            block = Block(page, index + 1, lang, body)
            above = index - 1
            while above >= 0 and MARKER.match(lines[above]):
                block.markers.insert(0, parse_marker(MARKER.match(lines[above])["body"], above + 1))  # type: ignore[index]
                attached.add(above)
                above -= 1
            found.append(block)
        index = end + 1
    for number, text in enumerate(lines):
        if MARKER.match(text) and number not in attached and number not in fenced:
            raise ValueError(
                f"{_name(page)}:{number + 1}: a docs-test marker must sit just above a "
                "pasted block (bash, python, or a `$ ` transcript)"
            )
    return found


def tracked_top_level() -> list[str]:
    """The repository's tracked top-level names: what a fresh clone holds."""
    out = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60
    ).stdout
    return sorted({name.split("/", 1)[0] for name in out.decode().split("\0") if name})


def make_clone(folder: Path) -> Path:
    """A folder holding the repository's tracked top-level entries, each a link: a clone's view."""
    folder.mkdir()
    for name in tracked_top_level():
        (folder / name).symlink_to(ROOT / name)
    return folder


class DocsFailure(AssertionError):
    """A pasted command or statement that failed, named by its page and line."""


@dataclass
class Session:
    """A page being run: its folder, its Python namespace, and whether slow commands run."""

    folder: Path
    slow: bool
    namespace: dict[str, Any] = field(default_factory=lambda: {"__name__": "__docs__"})
    ran: int = 0

    def runs(self, block: Block, command: str) -> bool:
        """Whether this session runs the command (a Python block: "")."""
        kind, _ = block.kind_of(command)
        return kind == "run" or (kind == "slow" and self.slow)

    def run_block(self, block: Block) -> None:
        """The block's commands that run in this session, `given` first when any does, `then`
        after when all did."""
        commands = [("", [])] if block.python else block.commands()
        chosen = [(command, shown) for command, shown in commands if self.runs(block, command)]
        if not chosen:
            return
        for command in block.hooks("given"):
            self._command(block, command, [])
        for command, shown in chosen:
            if block.python:
                self._python(block)
            else:
                self._command(block, command, shown)
        if len(chosen) == len(commands):
            for command in block.hooks("then"):
                self._command(block, command, [])

    def _command(self, block: Block, command: str, shown: list[str]) -> None:
        if command.startswith(ACTIVATE):
            command = command[len(ACTIVATE) :]
        argv = _plain(command)
        if argv is None:
            self._shell(block, command, shown)
            return
        out, err = io.StringIO(), io.StringIO()
        here = Path.cwd()
        os.chdir(self.folder)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                rc = run_cli(argv)
        finally:
            os.chdir(here)
        self._check(block, command, rc, out.getvalue(), err.getvalue(), shown)

    def _shell(self, block: Block, command: str, shown: list[str]) -> None:
        env = {
            **os.environ,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        }
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=self.folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=COMMAND_SECONDS,
        )
        self._check(block, command, done.returncode, done.stdout, done.stderr, shown)

    def _check(
        self, block: Block, command: str, rc: int, out: str, err: str, shown: list[str]
    ) -> None:
        self.ran += 1
        if rc != 0:
            tail = "\n".join((out + err).splitlines()[-15:])
            raise DocsFailure(f"{block.where}: `{command}` exited {rc}:\n{tail}")
        problem = shown_problem(shown, (out + err).splitlines())
        if problem:
            raise DocsFailure(
                f"{block.where}: `{command}` does not print what the page shows: {problem}"
            )

    def _python(self, block: Block) -> None:
        source = "\n".join(block.body) + "\n"
        shown = _shown_values(source)
        tree = ast.parse(source, filename=block.where)
        here = Path.cwd()
        os.chdir(self.folder)
        try:
            for statement in tree.body:
                end = statement.end_lineno or statement.lineno
                expected = shown.pop(end, None)
                where = f"{block.where} (line {block.line + statement.lineno})"
                if expected is not None and not isinstance(statement, ast.Expr):
                    raise DocsFailure(f"{where}: `# ->` must follow an expression")
                try:
                    with contextlib.redirect_stdout(io.StringIO()):
                        if isinstance(statement, ast.Expr):
                            code = compile(ast.Expression(statement.value), where, "eval")
                            value = eval(code, self.namespace)
                        else:
                            module = ast.Module(body=[statement], type_ignores=[])
                            exec(compile(module, where, "exec"), self.namespace)
                            value = None
                except Exception as exc:
                    raise DocsFailure(f"{where}: {type(exc).__name__}: {exc}") from exc
                self.ran += 1
                if expected is not None and " ".join(repr(value).split()) != expected:
                    raise DocsFailure(f"{where}: shows {expected}, the value is {value!r}")
        finally:
            os.chdir(here)
        if shown:
            raise DocsFailure(
                f"{block.where}: `# ->` on line(s) {sorted(shown)} follows no statement"
            )


def _plain(command: str) -> list[str] | None:
    """argv of a plain `poisson-tasks ...` command with no shell syntax; else None."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        words = list(lexer)
    except ValueError:
        return None
    if not words or words[0] != "poisson-tasks":
        return None
    if any(set(word) <= set("();<>|&") for word in words) or any(ch in command for ch in "$`*?~"):
        return None
    return words[1:]


def _shown_values(source: str) -> dict[int, str]:
    """{line: SHOWN} for every `# -> SHOWN` comment, continuation lines joined."""
    shown: dict[int, str] = {}
    last: int | None = None
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.COMMENT:
            if token.type not in (tokenize.NL, tokenize.NEWLINE):
                last = None
            continue
        text = token.string
        if text.startswith("# -> "):
            last = token.start[0]
            shown[last] = text[5:].strip()
        elif (
            last is not None
            and text.startswith("#    ")
            and not token.line[: token.start[1]].strip()
        ):
            shown[last] += " " + text[1:].strip()  # a comment alone on its line continues it
        else:
            last = None
    return {line: " ".join(value.split()) for line, value in shown.items()}


def shown_problem(shown: list[str], printed: list[str]) -> str | None:
    """Why `printed` is not what `shown` shows (None when it is): each run of shown lines between
    `...` lines must appear adjacent, in order; without a leading or trailing `...` the first run
    starts the output and the last ends it."""
    if not shown:
        return None
    printed = [line.rstrip() for line in printed]
    runs: list[list[str]] = [[]]
    for line in shown:
        if line.strip() == "...":
            runs.append([])
        else:
            runs[-1].append(line.rstrip())
    at = 0
    for number, run in enumerate(runs):
        if not run:
            continue
        first, last = number == 0, number == len(runs) - 1
        found = None
        for start in range(at, len(printed) - len(run) + 1):
            if printed[start : start + len(run)] == run:
                found = start
                break
            if first:
                break
        if found is None:
            return f"no {run[0]!r} where the page shows it"
        at = found + len(run)
        if last and at != len(printed):
            return f"more is printed after {run[-1]!r} than the page shows (end it with ...)"
    return None
