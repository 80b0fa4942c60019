"""`python -m poisson_tasks`: the same entry point as the `poisson-tasks` command."""

import sys

try:
    from poisson_tasks import stopping

    stopping.install()  # before the launcher and the command line are imported
except KeyboardInterrupt:  # Ctrl-C before the handlers exist: still one line, nothing written
    sys.stderr.write("error: stopped by SIGINT while starting; nothing was written\n")
    sys.exit(130)

from poisson_tasks.launch import main

main()
