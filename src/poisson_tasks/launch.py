"""The console entry point: the stop handlers first, then the command line.

The command line imports typer, rich, pydantic and numpy, which takes a noticeable moment; the
handlers are installed when this module is imported, before any of it, so Ctrl-C or SIGTERM while
the program is still loading ends in one line (exit 130 or 143) instead of a traceback. Importing
this module is starting the program: only the console script and `python -m poisson_tasks` do it.
"""

from __future__ import annotations

import gc

from poisson_tasks import stopping

stopping.install()
# Loading the command line allocates much and frees almost nothing, so the cyclic collector's
# passes over it are wasted work (about a twentieth of `generate --json`): it is off until the
# verb starts, which freezes what loaded and turns it back on (exits.exits).
gc.disable()
from poisson_tasks.cli import main as cli_main  # noqa: E402  (the slow part, after the handlers)


def main() -> None:
    cli_main()


if __name__ == "__main__":
    main()
