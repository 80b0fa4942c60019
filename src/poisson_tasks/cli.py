"""The poisson-tasks command line: each verb parses, calls one library function, prints."""

from __future__ import annotations

import copy
import functools
import gc
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, ParamSpec, TypeVar

import typer
import typer.models
from typer.exceptions import TyperException

from poisson_tasks import stopping
from poisson_tasks.errors import PoissonError, PreregistrationError, escape_controls
from poisson_tasks.local import defaults as local_defaults

if TYPE_CHECKING:
    from typer._click import Command  # typer's own click, which its get_command returns

    from poisson_tasks.calibration.output import CardFiles

# Each verb imports what it needs inside its own body (ruff PLC0415 is off for this file): the
# top layer defers every heavy import so `poisson-tasks --help` starts in milliseconds.

_P = ParamSpec("_P")
_R = TypeVar("_R")

PROG = "poisson-tasks"
INTERNAL_ERROR = 70  # EX_SOFTWARE, as errors.GeneratorFault
# The folder a verb is writing, for the one line a stop prints (a resume hint only where it exists).
_writing: list[Path] = []

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


_reported: list[int] = []  # exit statuses whose line a verb already printed


def _say(prefix: str, text: str) -> None:
    """One line on stderr, `prefix: text`: the value of any environment secret in it redacted and
    a credential-shaped run hidden (credentials.without_environment_secrets and masked, whoever
    built the message), and its control characters escaped (errors.escape_controls), so a value
    quoted from the input never starts a second line."""
    from poisson_tasks.credentials import masked, without_environment_secrets

    shown = masked(without_environment_secrets(text))
    typer.echo(f"{prefix}: {escape_controls(shown)}", err=True)


def _line(text: str, err: bool = False) -> None:
    """One report line (a summary, a path written), as an error line is printed (_say): a
    folder's name, a shard's, or a server's words in it never show an environment secret nor
    drive the terminal."""
    from poisson_tasks.credentials import without_environment_secrets

    typer.echo(escape_controls(without_environment_secrets(text)), err=err)


def _fail(exc: PoissonError) -> typer.Exit:
    _say("error", str(exc))
    _reported.append(exc.exit_code)
    return typer.Exit(exc.exit_code)


# Set by main when the console command loaded with the cyclic collector off (launch.py): the
# verb turns it back on before its own work, so a long run collects as it always did. What was
# allocated while it was off is frozen first (gc.freeze): the collector's first pass would
# otherwise scan all of it at once, which costs more than the passes it saved.
_collector_held: list[bool] = []


def exits(verb: Callable[_P, _R]) -> Callable[_P, _R]:
    """The one place library errors become exit codes: a PreregistrationError prints one line per
    problem, any other PoissonError one line; both exit with the error's `exit_code` (errors.py)."""

    @functools.wraps(verb)
    def run(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        if _collector_held:  # what loaded stays (frozen, never scanned); new work is collected
            _collector_held.clear()
            gc.freeze()
            gc.enable()
        try:
            return verb(*args, **kwargs)
        except PreregistrationError as exc:
            for problem in exc.problems:
                _say("error", problem)
            raise typer.Exit(exc.exit_code) from None
        except PoissonError as exc:
            raise _fail(exc) from None

    return run


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

    if plan is not None or arms is not None:
        _pin_check(arm, plan, arms, seeds, workers)
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


def _pin_check(
    arm: str | None, plan: Path | None, arms: str | None, seeds: str | None, workers: int
) -> None:
    """generate --arms/--plan: the pin ledger over every contrast, printed; exit 2 on a refusal."""
    from poisson_tasks.errors import PinRefusal
    from poisson_tasks.pins import check_plan, pin_targets
    from poisson_tasks.pins.owntools import own_tools_ledger
    from poisson_tasks.prereg import load_preregistration

    def plan_targets() -> tuple[list[str], list[int]]:
        assert plan is not None
        loaded = load_preregistration(plan)
        return list(loaded.arms), list(loaded.seeds)

    arm_list, seed_list = pin_targets(
        arm=arm, plan=None if plan is None else plan_targets, arms=arms, seeds=seeds
    )
    report = check_plan(arm_list, seed_list, workers=workers)
    tools = load_preregistration(plan).own_tools if plan is not None else None
    typer.echo("\n".join(report.lines()))
    if tools is not None:  # the plan's own tools: what they change, and what cannot be held
        typer.echo("\n".join(own_tools_ledger(arm_list, seed_list, tools).lines()))
    if report.refused:
        raise _fail(PinRefusal(report.message()))


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

    if out is None:
        raise PoissonError("--out is required: the HTML file to write, e.g. --out report.html")
    report = write_view(out, target, published)
    _line(f"{report.path}: {report.size:,} bytes, {report.episodes:,} episodes")
    for line in ([report.refusal] if report.refusal else []) + report.task_problems[:5]:
        _say("note", line)


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
    from poisson_tasks.policycatalogue import parse_param_options
    from poisson_tasks.reference import POLICY_NAMES, RateLimit
    from poisson_tasks.reference import serve_reference as serve

    serve(
        host,
        port,
        api_key=api_key,
        policy_defaults=parse_param_options(param or []),
        rate_limit=RateLimit(rpm, tpm) if rpm is not None or tpm is not None else None,
        announce=lambda served: typer.echo(
            f"serving reference policies at {served.base_url} ({', '.join(POLICY_NAMES)})"
            + "".join(f"; {v:,} {n} a minute" for n, v in (("requests", rpm), ("tokens", tpm)) if v)
            + "; Ctrl-C stops"
        ),
    )


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
    from poisson_tasks.local.server import LocalServer
    from poisson_tasks.local.server import serve_local as serve

    def _announce(server: LocalServer) -> None:
        tpl = server.template
        what = f"{tpl.name} ({tpl.family or 'family not stated'})" if tpl else "embedded"
        typer.echo(f"template {tpl.name if tpl else 'embedded'}, {server.template_note}")
        if server.probe is not None and server.probe.native:  # otherwise a warning said it
            typer.echo(
                f"start-up tool call: {server.probe.report(tpl.name if tpl else 'embedded')}"
            )
        threads = f"{server.threads} thread{'' if server.threads == 1 else 's'}"
        typer.echo(
            f"serving {server.alias} at {server.base_url} (llama.cpp, {threads}, n_ctx "
            f"{server.n_ctx}, template {what}; tool calls parsed by llama.cpp, chat format "
            f"{server.chat_format or 'not reported'}); Ctrl-C stops"
        )

    serve(
        model,
        port=port,
        threads=threads,
        ctx=ctx,
        template=template,
        alias=alias,
        announce=_announce,
        warn=lambda line: _say("warning", line),
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
    from poisson_tasks import calibration
    from poisson_tasks.calibration.cardjson import card_json

    if published and target is not None:
        raise PoissonError(
            f"--published rebuilds the published cards and takes no target: drop {target} "
            "(or drop --published to card it)"
        )
    if published:
        _check_published()
        return
    if compare not in (None, "published"):
        raise PoissonError(f"--compare {compare!r} is unknown; the one choice is `published`")
    if plot and out is None:
        raise PoissonError("--plot writes PNG files: add --out DIR")
    incomplete, beside = False, None
    if target is None or (target.exists() and not target.is_dir()):  # a FIFO: refused as read
        made, incomplete = _run_then_card(target, run_dir, out, plot, quiet)
        beside = calibration.compare_published(made.artifact) if compare else None
    elif target.is_dir():
        if run_dir is not None:
            raise PoissonError("--run-dir goes with a pre-registration file, not a run folder")
        made, beside = _card_folder(target, out, plot, compare is not None)
    else:
        raise PoissonError(
            f"{target} does not exist: give a run folder or a pre-registration YAML file"
        )
    for path in made.written:
        _line(str(path), err=True)
    for note in made.notes:
        _say("note", note)
    artifact = made.artifact
    if beside is not None:
        typer.echo(beside, nl=False)
    else:
        doc = calibration.render_document(artifact)
        sys.stdout.write(card_json(artifact).decode() if as_json else doc)
    if incomplete:
        raise typer.Exit(3)


def _check_published() -> None:
    """card --published: every published card rebuilt from its records and checked byte for
    byte, one line each; exit 1 when any differs."""
    from poisson_tasks import calibration

    checks = calibration.check_published()
    if not checks:
        typer.echo("no published card is listed in the manifest: nothing to check")
    for check in checks:
        if check.ok:
            typer.echo(f"ok: {escape_controls(check.message)}")
        else:
            _say("error", check.message)
    if not all(check.ok for check in checks):
        raise typer.Exit(1)


def _card_folder(
    target: Path, out: Path | None, plot: bool, compare: bool
) -> tuple[CardFiles, str | None]:
    """A run folder's card, written into its card/ (and `out`), and the comparison with the
    published cards when asked for (a refusal there writes no file)."""
    from poisson_tasks import calibration
    from poisson_tasks.calibration.output import check_card_place, write_run_card

    if out is not None:  # refused before the pass over the records
        check_card_place(out, target)
    artifact = calibration.card_from_run(target)
    beside = calibration.compare_published(artifact) if compare else None
    return write_run_card(artifact, target, out, plot=plot), beside


def _run_then_card(
    prereg: Path | None, run_dir: Path | None, out: Path | None, plot: bool, quiet: bool
) -> tuple[CardFiles, bool]:
    """Run a pre-registration (or the embedded default) and card it; the summary goes to stderr.

    The one rule, shared with `run`: stdout carries what a command makes (here the card); a run's
    session summary is a report and goes to stderr.
    """
    from poisson_tasks.runner import RunSummary, summary_lines
    from poisson_tasks.study import card_study, default_preregistration

    source = prereg if prereg is not None else default_preregistration()
    if prereg is None:
        typer.echo(f"no target given: running the embedded default {source.name}", err=True)

    def report(summary: RunSummary) -> None:  # before the card, so a refused card has it too
        for line in summary_lines(summary):
            _line(line, err=True)

    result, made = card_study(
        source, run_dir, out, plot=plot, show_progress=False if quiet else None, on_run=report
    )
    return made, result.summary.exit_code == 3


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

    plan = load_preregistration(file)
    typer.echo(describe_plan(plan))
    if seeds:
        typer.echo("seeds: " + ", ".join(map(str, plan.seeds)))


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
    _writing.append(request.path)
    summary = run_request(request)
    for line in summary_lines(summary):
        _line(line, err=True)  # stderr, as `card PREREG` prints it (one rule)
    for alarm in alarm_lines(summary):
        _say("error", alarm)
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

    _writing.append(run_dir / "replay")
    result = replay_study(
        run_dir,
        sample,
        seed,
        show_progress=False if quiet else None,
        accept_serving_change=accept_serving_change,
        base_url=base_url,
    )
    for line in result.lines():
        _line(line)
    for alarm in alarm_lines(result.summary):  # as `run` prints them: one `error:` line each
        _say("error", alarm)
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

    if not folders:
        raise PoissonError(
            "give the shard folders to merge: poisson-tasks merge DIR_0 ... DIR_n-1 --out DIR"
        )
    if out is None:
        raise PoissonError("give --out DIR: the new run folder the merge is written into")
    summary = merge_shards(list(folders), out)
    for line in summary.lines_printed():
        _line(line)


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
    from poisson_tasks.probe.design import load_probe
    from poisson_tasks.probe.render import render_probe, result_json
    from poisson_tasks.probe.run import rerun_void, run_probe
    from poisson_tasks.probe.table import analyse

    complete = True
    if from_dir is not None:
        if prereg is not None or out is not None or rerun is not None:
            raise PoissonError("--from reads a probe folder: give no PREREG, --out or --rerun")
        result = analyse(from_dir)
    else:
        if prereg is None or out is None:
            raise PoissonError("give PREREG and --out DIR to run a probe, or --from DIR")
        show = False if quiet else None
        if rerun is not None:
            label, sep, arm = rerun.partition(":")
            if not sep or not arm:
                raise PoissonError(f"--rerun {rerun!r} is not LABEL:ARM, e.g. nano:faults:f4")
            run_probe(load_probe(prereg), out, show_progress=show, run=False)
            done = rerun_void(out, label, arm, cause or "", show_progress=show)
        else:
            if cause is not None:
                raise PoissonError("--cause goes with --rerun LABEL:ARM")
            done = run_probe(prereg, out, show_progress=show)
        result, complete = done.result, done.complete
    sys.stdout.write(result_json(result).decode() if as_json else render_probe(result))
    if not complete:
        raise typer.Exit(3)


def _stop_line(signum: int) -> str:
    """The one line a stop outside a run's own handling prints (a hint only where it works).

    stopping's handler calls this wherever the stop lands, even inside an import; so with nothing
    written this imports nothing. A folder is only listed once its verb has imported the runner,
    prereg and credentials whole, so the hint's imports are loaded already."""
    name = stopping.signal_name(signum)
    written = [folder for folder in _writing if (folder / "run.json").is_file()]
    if not written:
        return f"error: stopped by {name}; nothing was written"
    from poisson_tasks.credentials import masked
    from poisson_tasks.runner.folder import resume_hint

    hint = escape_controls(masked(f"stopped by {name}; continue with {resume_hint(written[0])}"))
    return f"error: {hint}"


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
    """Run the command line on argv; returns the exit status. A usage error (an unknown verb or
    flag, a value of the wrong type) is one line and "try --help", exit 2; Ctrl-C or SIGTERM is
    one line, exit 130 or 143; nothing ever ends in a traceback for a stop or a bad input."""
    _writing.clear()
    _reported.clear()
    args = sys.argv[1:] if argv is None else argv
    try:
        rv = _tree(args).main(args=args, prog_name=PROG, standalone_mode=False)
    except typer.Abort:
        rv = 130
    except TyperException as exc:
        message = " ".join(exc.format_message().split())
        code = int(getattr(exc, "exit_code", 2))
        if not message:  # no arguments at all: the help was printed
            return code
        ctx = getattr(exc, "ctx", None)
        where = ctx.command_path if ctx is not None else PROG
        _say("error", f"{message} (try `{where} --help`)")
        return code
    except KeyboardInterrupt:  # Ctrl-C where Python's default handler raises (run_cli in-process)
        rv = 130
    except PoissonError as exc:
        _say("error", str(exc))
        return exc.exit_code
    except Exception as exc:  # a bug: still one line (POISSON_DEBUG=1 shows the traceback)
        if os.environ.get("POISSON_DEBUG"):
            raise
        first = str(exc).split("\n", 1)[0][:300]
        _say(
            "error",
            f"internal error ({type(exc).__name__}: {first}): a bug in poisson-tasks, not your "
            "input; please report it with the command (POISSON_DEBUG=1 prints the traceback)",
        )
        return INTERNAL_ERROR
    if rv == 130 and not _reported:  # typer turns KeyboardInterrupt into exit 130, silently
        typer.echo(_stop_line(signal.SIGINT), err=True)
        return 128 + signal.SIGINT
    return rv if isinstance(rv, int) else 0


def main() -> None:
    stopping.install(_stop_line)
    if not gc.isenabled():  # launch.py held it off while loading
        _collector_held.append(True)
    sys.exit(run_cli())


if __name__ == "__main__":
    main()
