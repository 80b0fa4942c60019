"""The poisson-tasks command line: each verb parses, calls one library function, prints."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from poisson_tasks.errors import PoissonError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Generated tool-use tasks, a pure verifier, a pin ledger, pre-registered studies and cards.",
)


@app.callback()
def _root() -> None:
    """poisson-tasks: measure what one level of a difficulty knob is worth to one model."""


def _fail(exc: PoissonError) -> typer.Exit:
    typer.echo(f"error: {exc}", err=True)
    return typer.Exit(exc.exit_code)


@app.command()
def generate(
    arm: Annotated[str, typer.Argument(help="Arm id, e.g. depth:d3 or distractor:r8@k16.")],
    seed: Annotated[int, typer.Option("--seed", help="Which task of the arm (0 or more).")] = 0,
    show: Annotated[bool, typer.Option("--show", help="Print the whole task readably.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the bundle as canonical JSON.")] = False,
) -> None:
    """Generate the task of ARM at --seed and print it."""
    from poisson_tasks.generator import generate as gen
    from poisson_tasks.show import render_bundle

    try:
        bundle = gen(arm, seed)
    except PoissonError as exc:
        raise _fail(exc) from None
    if as_json:
        sys.stdout.write(bundle.canonical().decode() + "\n")
    elif show:
        typer.echo(render_bundle(bundle))
    else:
        typer.echo(f"{bundle.task_id}  {bundle.arm_id}  seed {bundle.seed}")


def main() -> None:
    app()
