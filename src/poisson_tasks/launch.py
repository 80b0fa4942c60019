"""The console entry point: the stop handlers first, then the command line.

The command line imports typer, rich, pydantic and numpy, which takes a noticeable moment; the
handlers are installed before any of it, so Ctrl-C or SIGTERM while the program is still loading
ends in one line (exit 130 or 143) instead of a traceback.
"""

from __future__ import annotations

import signal
import sys

from poisson_tasks import stopping


def main() -> None:
    stopping.install()
    try:
        # imported after the handlers on purpose: this import is the slow part of start-up
        from poisson_tasks.cli import main as cli_main  # noqa: PLC0415
    except KeyboardInterrupt:
        signum = stopping.received() or signal.SIGINT
        sys.stderr.write(
            f"error: stopped by {stopping.signal_name(signum)} while starting; nothing was "
            "written\n"
        )
        sys.exit(128 + signum)
    cli_main()


if __name__ == "__main__":
    main()
