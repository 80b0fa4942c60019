"""The console entry point: the stop handlers first, then the command line.

The command line imports typer, rich, pydantic and numpy, which takes a noticeable moment; the
handlers are installed when this module is imported, before any of it, so Ctrl-C or SIGTERM while
the program is still loading ends in one line (exit 130 or 143) instead of a traceback. Importing
this module is starting the program: only the console script and `python -m poisson_tasks` do it.
"""

from __future__ import annotations

import signal
import sys

from poisson_tasks import stopping


def _stopped_while_starting() -> None:
    signum = stopping.received() or signal.SIGINT
    sys.stderr.write(
        f"error: stopped by {stopping.signal_name(signum)} while starting; nothing was written\n"
    )
    sys.exit(128 + signum)


stopping.install()
try:
    from poisson_tasks.cli import main as cli_main  # the slow part of start-up, after the handlers
except KeyboardInterrupt:
    _stopped_while_starting()


def main() -> None:
    cli_main()


if __name__ == "__main__":
    main()
