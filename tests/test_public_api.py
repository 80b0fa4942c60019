"""The package's public API: the names docs/python.md uses, re-exported lazily from poisson_tasks."""

from __future__ import annotations

import importlib
import subprocess
import sys

import poisson_tasks

PUBLIC = [
    "ArmSpec",
    "CardRefusal",
    "PoissonError",
    "TaskBundle",
    "__version__",
    "all_arms",
    "build_artifact",
    "card_from_run",
    "card_json",
    "check_pins",
    "check_plan",
    "default_preregistration",
    "generate",
    "levels",
    "load_preregistration",
    "measure_pins",
    "parse_arm_id",
    "pinned_bundle",
    "provenance_from_run",
    "read_card_json",
    "records_from_run",
    "render_document",
    "run_arm",
    "run_preregistration",
    "run_study",
    "verify",
    "write_card",
]


def test_the_exported_names_are_fixed() -> None:
    assert sorted(poisson_tasks.__all__) == sorted(PUBLIC)


def test_every_name_resolves_to_its_defining_module_object() -> None:
    for name in PUBLIC:
        value = getattr(poisson_tasks, name)
        if name == "__version__":
            continue
        module = importlib.import_module(poisson_tasks._EXPORTS[name])
        assert value is getattr(module, name), name


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        poisson_tasks.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("no AttributeError")


def test_import_and_help_load_no_layer_below_the_cli() -> None:
    """`import poisson_tasks` and `poisson-tasks --help` import only the package, cli, errors, the
    stop handlers and serve-local's defaults (no third-party module beyond typer)."""
    script = (
        "import sys\n"
        "import poisson_tasks\n"
        "from typer.testing import CliRunner\n"
        "from poisson_tasks.cli import app\n"
        "assert CliRunner().invoke(app, ['--help']).exit_code == 0\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('poisson_tasks'))))\n"
        "assert not {'pydantic', 'jinja2', 'xllamacpp', 'numpy'} & set(sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout.split()
    # stopping: the signal handlers (signal and errors only), needed before anything heavy;
    # local.defaults: serve-local's defaults and template names for its --help (standard library)
    assert out == [
        "poisson_tasks",
        "poisson_tasks.cli",
        "poisson_tasks.errors",
        "poisson_tasks.local",
        "poisson_tasks.local.defaults",
        "poisson_tasks.stopping",
    ]
