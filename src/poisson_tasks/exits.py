"""How the command line ends: a library error, a usage error, a stop or a bug becomes one line on
stderr and an exit status (docs/commands.md's exit table), never a traceback.

cli.py holds the verbs; this module holds what wraps every one of them: `exits` (library errors
to exit codes), the one-line printers every report and error passes through, the stop line, and
`run_command` (a whole command line to its status). Like cli.py it loads only typer and the
standard library at start; the credential masking and the resume hint load when first used.
"""

from __future__ import annotations

import functools
import gc
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, ParamSpec, TypeVar

import typer
from typer.exceptions import TyperException

from poisson_tasks import stopping
from poisson_tasks.errors import PoissonError, PreregistrationError, escape_controls

if TYPE_CHECKING:
    from typer._click import Command  # typer's own click, which its get_command returns

# Each import of a layer below waits inside the function that needs it (ruff PLC0415 is off for
# this file as for cli.py): `poisson-tasks --help` loads this module, and starts in milliseconds.

_P = ParamSpec("_P")
_R = TypeVar("_R")

PROG = "poisson-tasks"
INTERNAL_ERROR = 70  # EX_SOFTWARE, as errors.GeneratorFault
# The folder a verb is writing, for the one line a stop prints (a resume hint only where it exists).
writing: list[Path] = []
_reported: list[int] = []  # exit statuses whose line a verb already printed
# Set by cli.main when the console command loaded with the cyclic collector off (launch.py): the
# verb turns it back on before its own work, so a long run collects as it always did. What was
# allocated while it was off is frozen first (gc.freeze): the collector's first pass would
# otherwise scan all of it at once, which costs more than the passes it saved.
collector_held: list[bool] = []


def say(prefix: str, text: str) -> None:
    """One line on stderr, `prefix: text`: the value of any environment secret in it redacted and
    a credential-shaped run hidden (credentials.without_environment_secrets and masked, whoever
    built the message), and its control characters escaped (errors.escape_controls), so a value
    quoted from the input never starts a second line."""
    from poisson_tasks.credentials import masked, without_environment_secrets

    shown = masked(without_environment_secrets(text))
    typer.echo(f"{prefix}: {escape_controls(shown)}", err=True)


def report_line(text: str, err: bool = False) -> None:
    """One report line (a summary, a path written), as an error line is printed (say): a
    folder's name, a shard's, or a server's words in it never show an environment secret nor
    drive the terminal."""
    from poisson_tasks.credentials import without_environment_secrets

    typer.echo(escape_controls(without_environment_secrets(text)), err=err)


def fail(exc: PoissonError) -> typer.Exit:
    """Print a library error's one line and give the exit that ends the verb with its code."""
    say("error", str(exc))
    _reported.append(exc.exit_code)
    return typer.Exit(exc.exit_code)


def exits(verb: Callable[_P, _R]) -> Callable[_P, _R]:
    """The one place library errors become exit codes: a PreregistrationError prints one line per
    problem, any other PoissonError one line; both exit with the error's `exit_code` (errors.py)."""

    @functools.wraps(verb)
    def run(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        if collector_held:  # what loaded stays (frozen, never scanned); new work is collected
            collector_held.clear()
            gc.freeze()
            gc.enable()
        try:
            return verb(*args, **kwargs)
        except PreregistrationError as exc:
            for problem in exc.problems:
                say("error", problem)
            raise typer.Exit(exc.exit_code) from None
        except PoissonError as exc:
            raise fail(exc) from None

    return run


def stop_line(signum: int) -> str:
    """The one line a stop outside a run's own handling prints (a hint only where it works).

    stopping's handler calls this wherever the stop lands, even inside an import; so with nothing
    listed this imports nothing. A folder is only listed once its verb has imported the runner,
    prereg and credentials whole, so these imports (the header's name among them) are loaded
    already; at the top of this module the run folder's schema would load pydantic for --help."""
    name = stopping.signal_name(signum)
    nothing = f"error: stopped by {name}; nothing was written"
    if not writing:
        return nothing
    from poisson_tasks.credentials import masked
    from poisson_tasks.runfolder import HEADER
    from poisson_tasks.runner.folder import resume_hint

    written = [folder for folder in writing if (folder / HEADER).is_file()]
    if not written:
        return nothing

    hint = escape_controls(masked(f"stopped by {name}; continue with {resume_hint(written[0])}"))
    return f"error: {hint}"


def run_command(tree: Command, args: list[str]) -> int:
    """Run one command line on typer's click `tree`; returns the exit status. A usage error (an
    unknown verb or flag, a value of the wrong type) is one line and "try --help", exit 2; Ctrl-C
    or SIGTERM is one line, exit 130 or 143; nothing ever ends in a traceback for a stop or a bad
    input."""
    writing.clear()
    _reported.clear()
    try:
        rv = tree.main(args=args, prog_name=PROG, standalone_mode=False)
    except typer.Abort:
        rv = 130
    except TyperException as exc:
        return _usage_error(exc)
    except KeyboardInterrupt:  # Ctrl-C where Python's default handler raises (run_cli in-process)
        rv = 130
    except PoissonError as exc:
        say("error", str(exc))
        return exc.exit_code
    except Exception as exc:  # a bug: still one line (POISSON_DEBUG=1 shows the traceback)
        if os.environ.get("POISSON_DEBUG"):
            raise
        first = str(exc).split("\n", 1)[0][:300]
        say(
            "error",
            f"internal error ({type(exc).__name__}: {first}): a bug in poisson-tasks, not your "
            "input; please report it with the command (POISSON_DEBUG=1 prints the traceback)",
        )
        return INTERNAL_ERROR
    if rv == 130 and not _reported:  # typer turns KeyboardInterrupt into exit 130, silently
        typer.echo(stop_line(signal.SIGINT), err=True)
        return 128 + signal.SIGINT
    return rv if isinstance(rv, int) else 0


def _usage_error(exc: TyperException) -> int:
    """click's usage error as one line naming the command's --help; none when the help was shown."""
    message = " ".join(exc.format_message().split())
    code = int(getattr(exc, "exit_code", 2))
    if not message:  # no arguments at all: the help was printed
        return code
    ctx = getattr(exc, "ctx", None)
    where = ctx.command_path if ctx is not None else PROG
    say("error", f"{message} (try `{where} --help`)")
    return code
