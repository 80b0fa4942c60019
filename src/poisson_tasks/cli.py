"""The poisson-tasks command line: each verb parses, calls one library function, prints."""

from __future__ import annotations

import copy
import functools
import gc
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
import typer.models

from poisson_tasks import stopping
from poisson_tasks.errors import PoissonError, escape_controls
from poisson_tasks.exits import (
    collector_held,
    exits,
    report_line,
    run_command,
    say,
    stop_line,
    writing,
)
from poisson_tasks.local import defaults as local_defaults

if TYPE_CHECKING:
    from typer._click import Command  # typer's own click, which its get_command returns

    from poisson_tasks.calibration.cardtarget import CardMade

# Each verb imports what it needs inside its own body (ruff PLC0415 is off for this file): the
# top layer defers every heavy import so `poisson-tasks --help` starts in milliseconds. How a
# verb's errors, a usage error and a stop end (one line, an exit status) is exits.py's.

app = typer.Typer(
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain (click-style) help: rich's help renderer costs about 0.1 s of imports on every --help.
    rich_markup_mode=None,
    no_args_is_help=True,
    help="Generated tool-use tasks, a pure verifier, a pin ledger, pre-registered studies and cards.",
)


def _version(shown: bool) -> None:
    if shown:
        from poisson_tasks.hashes import version_lines

        typer.echo("\n".join(version_lines()))
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_version,
            is_eager=True,
            help="Print the version and this build's hashes (engine, generator, vocabulary, "
            "environment), as a card records them.",
        ),
    ] = False,
) -> None:
    """poisson-tasks: measure what one level of a difficulty knob is worth to one model."""


@app.command()
@exits
def generate(
    arm: Annotated[
        str | None, typer.Argument(help="Arm id, e.g. depth:d3 or distractor:r8@k16.")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Which task of the arm (0 or more).")] = 0,
    show: Annotated[bool, typer.Option("--show", help="Print the whole task readably.")] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the bundle as canonical JSON.")
    ] = False,
    plan: Annotated[
        Path | None,
        typer.Option("--plan", help="A pre-registration YAML: pin-check its arms at its seeds."),
    ] = None,
    arms: Annotated[
        str | None,
        typer.Option("--arms", help="Arm ids to pin-check, comma-separated: faults:f0,faults:f4."),
    ] = None,
    seeds: Annotated[
        str | None,
        typer.Option("--seeds", help="Seeds for --arms, e.g. 0-59 (the default) or 0-9,20."),
    ] = None,
    workers: Annotated[
        int,
        typer.Option("--workers", help="With --arms/--plan: processes to spread contrasts over."),
    ] = 1,
) -> None:
    """Generate the task of ARM at --seed and print it; or run the pin ledger over --arms / --plan.

    With --arms or --plan every arm is generated at every seed, each knob's arms make one contrast
    per seed, and every pin-ledger row is printed with its verdict. Exit 2 when a row refuses.
    """
    from poisson_tasks.pins import pinned_bundle

    if plan is not None or arms is not None:  # the ledger sits below prereg: given its loader
        from poisson_tasks.errors import PinRefusal
        from poisson_tasks.pins.ledger import pin_ledger
        from poisson_tasks.prereg import load_preregistration

        load = None if plan is None else functools.partial(load_preregistration, plan)
        ledger = pin_ledger(arm, load, arms, seeds, workers)
        typer.echo("\n".join(ledger.blocks))
        if ledger.refusal is not None:
            raise PinRefusal(ledger.refusal)
        return
    if arm is None:
        raise PoissonError("give an ARM (e.g. depth:d3), or --arms a,b,c or --plan FILE")
    bundle = pinned_bundle(arm, seed)
    if as_json:
        sys.stdout.write(bundle.canonical().decode() + "\n")
    elif show:
        from poisson_tasks.show import render_bundle  # only --show needs it (and the verifier)

        typer.echo(render_bundle(bundle))
    else:
        typer.echo(f"{bundle.task_id}  {bundle.arm_id}  seed {bundle.seed}")


@app.command()
@exits
def knobs(
    knob: Annotated[str | None, typer.Argument(help="One knob to show, e.g. faults.")] = None,
) -> None:
    """List the knobs: levels, control format, shipped, and the probe's figures with provenance."""
    from poisson_tasks.knobtable import render_knobs

    typer.echo(render_knobs(knob))


@app.command()
@exits
def view(
    target: Annotated[
        Path | None, typer.Argument(help="A run folder (run.json + episodes.jsonl).")
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="The HTML file to write, e.g. report.html.")
    ] = None,
    published: Annotated[
        str | None,
        typer.Option("--published", help="A published card's name, e.g. reference-noisy."),
    ] = None,
) -> None:
    """Write a card as one self-contained HTML page; every cell opens its episodes."""
    from poisson_tasks.view import write_view

    report = write_view(out, target, published)
    report_line(f"{report.path}: {report.size:,} bytes, {report.episodes:,} episodes")
    for note in report.notes():
        say("note", note)


@app.command("serve-reference")
@exits
def serve_reference(
    host: Annotated[
        str, typer.Option("--host", help="Address to bind (loopback by default).")
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="Port to bind; 0 picks a free one.")
    ] = 8765,
    api_key: Annotated[
        str | None,
        typer.Option(
            "--api-key", envvar="POISSON_REFERENCE_API_KEY", help="Require this bearer key."
        ),
    ] = None,
    param: Annotated[
        list[str] | None,
        typer.Option("--param", help="A policy default, e.g. noisy.p_wrong_tool=0.2 (repeatable)."),
    ] = None,
    rpm: Annotated[
        int | None,
        typer.Option(
            "--rpm", min=1, help="Limit requests per minute, with OpenAI's headers and 429s."
        ),
    ] = None,
    tpm: Annotated[
        int | None,
        typer.Option(
            "--tpm", min=1, help="Limit tokens per minute, with OpenAI's headers and 429s."
        ),
    ] = None,
) -> None:
    """Serve the reference policies (baselines, never a model) as an OpenAI-compatible endpoint."""
    from poisson_tasks.reference import serve_reference as serve

    serve(host, port, api_key=api_key, params=param or [], rpm=rpm, tpm=tpm, announce=typer.echo)


@app.command("serve-local")
@exits
def serve_local(
    model: Annotated[Path, typer.Argument(help="A GGUF model file.")],
    port: Annotated[
        int, typer.Option("--port", help="Port on 127.0.0.1; 0 picks a free one.")
    ] = local_defaults.PORT,
    threads: Annotated[
        int, typer.Option("--threads", help="CPU threads for the model.")
    ] = local_defaults.THREADS,
    ctx: Annotated[
        int, typer.Option("--ctx", help="Context size in tokens (n_ctx).")
    ] = local_defaults.N_CTX,
    template: Annotated[
        str,
        typer.Option(
            "--template",
            help=f"`{local_defaults.AUTO}` (chosen from the GGUF's metadata), a shipped chat "
            f"template ({', '.join(local_defaults.shipped_templates())}), a Jinja file, or "
            f"`{local_defaults.EMBEDDED}` (the GGUF's).",
        ),
    ] = local_defaults.TEMPLATE,
    alias: Annotated[
        str | None,
        typer.Option("--alias", help="The model id it serves (default: the file name less .gguf)."),
    ] = None,
) -> None:
    """Serve a GGUF with llama.cpp (the `local` extra) on loopback, with a tool-calling template.

    The template is chosen from the GGUF's metadata unless one is given. A template that renders
    no tool section, or writes no tool call llama.cpp can parse back, is refused (before the model
    loads, and again through the server); the loaded model is then asked for one tool call, and
    whether it came back as a native call is printed. Prints the base URL; Ctrl-C or SIGTERM stops
    it.
    """
    from poisson_tasks.local.server import serve_local as serve

    serve(
        model,
        port=port,
        threads=threads,
        ctx=ctx,
        template=template,
        alias=alias,
        announce=lambda server: typer.echo("\n".join(server.announcement())),
        warn=lambda line: say("warning", line),
    )


@app.command()
@exits
def card(
    target: Annotated[
        Path | None,
        typer.Argument(
            help="A finished run folder, or a pre-registration YAML file to run first; "
            "with neither, the embedded default (the smoke study against the reference endpoint)."
        ),
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Write card.json and card.md into this folder.")
    ] = None,
    run_dir: Annotated[
        Path | None,
        typer.Option("--run-dir", help="With a pre-registration: the new run folder to fill."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print card.json, not card.md.")] = False,
    plot: Annotated[
        bool, typer.Option("--plot", help="Also write one PNG per knob into --out (plot extra).")
    ] = False,
    compare: Annotated[
        str | None,
        typer.Option("--compare", help="`published`: print the run beside the published cards."),
    ] = None,
    published: Annotated[
        bool,
        typer.Option("--published", help="Rebuild every published card; check it byte for byte."),
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress display.")] = False,
) -> None:
    """Build a card: from a run folder, or run a pre-registration first (exit 1 when refused).

    Either way the card's files are written into the run folder's card/ (and --out DIR when
    given); a destination that would overwrite something else is refused before anything runs.
    """
    from poisson_tasks.calibration.cardtarget import card_run_folder, is_run_target

    if published and target is not None:
        raise PoissonError(
            f"--published rebuilds the published cards and takes no target: drop {target} "
            "(or drop --published to card it)"
        )
    if published:
        _check_published()
    elif is_run_target(target, run_dir=run_dir, out=out, plot=plot, compare=compare):
        assert target is not None
        _print_card(card_run_folder(target, out, plot=plot, compare=compare is not None), as_json)
    else:
        from poisson_tasks.study import card_preregistration  # the runner: for a run alone

        made = card_preregistration(
            target,
            run_dir,
            out,
            plot=plot,
            compare=compare is not None,
            show_progress=False if quiet else None,
            report=lambda line: report_line(line, err=True),
        )
        _print_card(made, as_json)


def _print_card(made: CardMade, as_json: bool) -> None:
    """The paths written and any note on stderr, then the card (or the comparison) on stdout."""
    for path in made.files.written:
        report_line(str(path), err=True)
    for note in made.files.notes:
        say("note", note)
    sys.stdout.write(made.document(as_json))
    if made.incomplete:
        raise typer.Exit(3)


def _check_published() -> None:
    """card --published: every published card rebuilt from its records and checked byte for
    byte, one line each; exit 1 when any differs."""
    from poisson_tasks.calibration.published import check_published

    checks = check_published()
    if not checks:
        typer.echo("no published card is listed in the manifest: nothing to check")
    for check in checks:
        if check.ok:
            typer.echo(f"ok: {escape_controls(check.message)}")
        else:
            say("error", check.message)
    if not all(check.ok for check in checks):
        raise typer.Exit(1)


@app.command()
@exits
def glossary(
    term: Annotated[
        str | None,
        typer.Argument(help="A term a card prints (e.g. churn); with none, every term."),
    ] = None,
) -> None:
    """What a card's terms mean: one term, or the whole glossary (docs/glossary.md)."""
    from poisson_tasks.glossary import describe

    typer.echo(describe(term))


@app.command()
@exits
def validate(
    file: Annotated[Path, typer.Argument(help="A pre-registration YAML file.")],
    seeds: Annotated[bool, typer.Option("--seeds", help="Also print the seed list.")] = False,
) -> None:
    """Validate a pre-registration: print its plan and resolution, or every problem (exit 2)."""
    from poisson_tasks.prereg import describe_plan, load_preregistration

    typer.echo(describe_plan(load_preregistration(file), seeds=seeds))


@app.command()
@exits
def run(
    file: Annotated[
        Path | None,
        typer.Argument(help="A pre-registration YAML file (optional with --resume)."),
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="New run folder (default runs/<name>-<UTC time>).")
    ] = None,
    resume: Annotated[
        Path | None, typer.Option("--resume", help="Continue this run folder (same study).")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress display.")] = False,
    base_url: Annotated[
        str | None,
        typer.Option(
            "--base-url", help="Set model.base_url (e.g. the URL serve-local printed) for this run."
        ),
    ] = None,
    shard: Annotated[
        str | None,
        typer.Option(
            "--shard",
            help="i/n: run shard i (from 0) of n into a shard folder; `merge` puts them together.",
        ),
    ] = None,
    accept_serving_change: Annotated[
        bool,
        typer.Option(
            "--accept-serving-change",
            help="With --resume: go on although the server is not served as in session 0 "
            "(pin N10); the card then lists every session's serving.",
        ),
    ] = False,
) -> None:
    """Run a pre-registered study into a run folder (or one shard of it, with --shard i/n).

    Exit 0 when the run completed, 3 when a limit stopped it early (continue it with --resume), 1
    when an alarm rings (instrument failures over thresholds.instrument_max, or format clause 1;
    the run is recorded), 2 on bad input or an endpoint that refuses the run.
    """
    from poisson_tasks.runner import run_request, session_request, summary_lines
    from poisson_tasks.runner.alarms import alarm_lines

    request = session_request(
        file,
        out=out,
        resume=resume,
        base_url=base_url,
        shard=shard,
        accept_serving_change=accept_serving_change,
        show_progress=False if quiet else None,
    )
    writing.append(request.path)
    summary = run_request(request)
    for line in summary_lines(summary):
        report_line(line, err=True)  # stderr, as `card PREREG` prints it (one rule)
    for alarm in alarm_lines(summary):
        say("error", alarm)
    raise typer.Exit(summary.exit_code)


@app.command()
@exits
def replay(
    run_dir: Annotated[
        Path, typer.Argument(help="A run folder (a whole run, a shard, or a merge).")
    ],
    sample: Annotated[
        int,
        typer.Option("--sample", help="How many of the run's scored slots to run again."),
    ],
    seed: Annotated[
        int, typer.Option("--seed", help="The seed the sample is drawn with (across arms).")
    ] = 0,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress display.")] = False,
    accept_serving_change: Annotated[
        bool,
        typer.Option(
            "--accept-serving-change",
            help="Continue a replay folder whose serving changed since its first session.",
        ),
    ] = False,
    base_url: Annotated[
        str | None,
        typer.Option(
            "--base-url",
            help="The same server at another address (e.g. serve-local's new port); default: "
            "the run's model.base_url.",
        ),
    ] = None,
) -> None:
    """Run a seeded sample of a run's scored slots again into RUN_DIR/replay/; print agreement.

    Same endpoint, decoding and per-attempt seeds as the run; the card then has a Reproducibility
    section. Run again with the same --sample and --seed to continue an interrupted replay.
    Exit codes as `run`'s.
    """
    from poisson_tasks.runner.alarms import alarm_lines
    from poisson_tasks.study import replay_study

    writing.append(run_dir / "replay")
    result = replay_study(
        run_dir,
        sample,
        seed,
        show_progress=False if quiet else None,
        accept_serving_change=accept_serving_change,
        base_url=base_url,
    )
    for line in result.lines():
        report_line(line)
    for alarm in alarm_lines(result.summary):  # as `run` prints them: one `error:` line each
        say("error", alarm)
    raise typer.Exit(result.summary.exit_code)


@app.command()
@exits
def merge(
    folders: Annotated[
        list[Path] | None,
        typer.Argument(help="The shard folders of one study (run --shard i/n), in any order."),
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="The new run folder the merge is written into.")
    ] = None,
) -> None:
    """Merge the n shard folders of one study into one run folder, which `card` reads.

    Refused in one line, nothing written (exit 2), unless the folders are one plan, one instrument
    and one serving (pin N10) and hold every slot of the plan exactly once.
    """
    from poisson_tasks.runner.merge import merge_shards

    summary = merge_shards(folders, out)
    for line in summary.lines_printed():
        report_line(line)


@app.command()
@exits
def probe(
    prereg: Annotated[
        Path | None,
        typer.Argument(help="A probe registration YAML (format poisson-tasks/probe@1)."),
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="The probe folder to fill (or resume).")
    ] = None,
    from_dir: Annotated[
        Path | None,
        typer.Option("--from", help="Read a probe folder's records and print its analysis."),
    ] = None,
    rerun: Annotated[
        str | None,
        typer.Option("--rerun", help="LABEL:ARM, a void arm to run once more (with --cause)."),
    ] = None,
    cause: Annotated[
        str | None,
        typer.Option("--cause", help="With --rerun: the runner-side cause (it is disclosed)."),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print probe.json, not probe.md.")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress display.")] = False,
) -> None:
    """The knob probe: run PREREG into --out (resuming it), or read --from DIR; exit 3 when a
    folder is left incomplete (run the same command again to resume it)."""
    from poisson_tasks.probe.render import render_probe, result_json
    from poisson_tasks.probe.run import probe_command

    done = probe_command(
        prereg, out, from_dir, rerun, cause, show_progress=False if quiet else None
    )
    result = done.result
    sys.stdout.write(result_json(result).decode() if as_json else render_probe(result))
    if not done.complete:
        raise typer.Exit(3)


@functools.cache
def _command(verb: str | None = None) -> Command:
    """The click command tree typer builds from `app`, built once per process: typer builds it
    again on every `app(...)` call (about 40 ms, reading every verb's annotations), which a caller
    that runs the command line many times in one process (tests, a notebook) pays on each call.
    Given a verb, the tree holds that verb alone (under the same root, so its usage, errors and
    help read the same): one process runs one verb, and reading the other verbs' annotations cost
    `generate --json` about a tenth of its start-up."""
    if verb is None:
        return typer.main.get_command(app)
    alone = copy.copy(app)
    alone.registered_commands = [c for c in app.registered_commands if _verb(c) == verb]
    return typer.main.get_command(alone)


def _verb(info: typer.models.CommandInfo) -> str:
    """A registered verb's name on the command line, as typer names it."""
    return info.name or typer.main.get_command_name(info.callback.__name__)  # type: ignore[union-attr]


def _tree(argv: list[str]) -> Command:
    """The tree for this command line: its verb alone when the first word names one, else all."""
    first = argv[0] if argv else None
    known = first is not None and any(_verb(c) == first for c in app.registered_commands)
    return _command(first if known else None)


def run_cli(argv: list[str] | None = None) -> int:
    """Run the command line on argv (sys.argv's by default); returns the exit status
    (exits.run_command: one line and a status for every error and stop, never a traceback)."""
    args = sys.argv[1:] if argv is None else argv
    return run_command(_tree(args), args)


def main() -> None:
    stopping.install(stop_line)
    if not gc.isenabled():  # launch.py held it off while loading
        collector_held.append(True)
    sys.exit(run_cli())


if __name__ == "__main__":
    main()
