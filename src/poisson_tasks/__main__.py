"""`python -m poisson_tasks`: the same entry point as the `poisson-tasks` command."""

from poisson_tasks import stopping

stopping.install()  # before the launcher and the command line are imported

from poisson_tasks.launch import main  # noqa: E402

main()
