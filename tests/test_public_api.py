"""The package's public API: the names docs/python.md uses, re-exported lazily from poisson_tasks."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import poisson_tasks
from poisson_tasks import calibration

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
    "validate_preregistration",
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
    """`import poisson_tasks` and `poisson-tasks --help` import only the package, cli, exits,
    errors, the stop handlers and serve-local's defaults (no third-party module beyond typer)."""
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
    # stopping: the signal handlers (standard library and errors only), needed before anything heavy;
    # local.defaults: serve-local's defaults and template names for its --help (standard library);
    # exits: what wraps every verb (its one-line errors and exit statuses; typer and errors only)
    assert out == [
        "poisson_tasks",
        "poisson_tasks.cli",
        "poisson_tasks.errors",
        "poisson_tasks.exits",
        "poisson_tasks.local",
        "poisson_tasks.local.defaults",
        "poisson_tasks.stopping",
    ]


def test_the_specs_paths_import_and_reading_cards_does_not_load_the_runner() -> None:
    """reading-a-card.md names `calibration.run_arm`; it is imported on first use, so a process that
    only reads or renders cards never loads the runner and its endpoint client."""
    script = (
        "import sys\n"
        "import poisson_tasks.calibration as calibration\n"
        "assert 'poisson_tasks.runner' not in sys.modules and 'openai' not in sys.modules\n"
        "from poisson_tasks.calibration import run_arm, run_study, StudyResult\n"
        "from poisson_tasks import study\n"
        "assert run_arm is study.run_arm and run_study is study.run_study\n"
        "assert StudyResult is study.StudyResult and 'run_arm' in calibration.__all__\n"
        "print(run_arm.__module__)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["poisson_tasks.calibration.runcard"]
    try:
        calibration.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("no AttributeError")


def test_the_readme_layout_names_every_module_of_the_package() -> None:
    """README's Layout block lists every top-level module and package under src/poisson_tasks."""
    root = Path(poisson_tasks.__file__).parent
    readme = (root.parents[1] / "README.md").read_text()
    block = readme.split("## Layout", 1)[1].split("```")[1]
    names = {p.name for p in root.iterdir() if p.suffix == ".py" and not p.name.startswith("_")}
    names |= {f"{p.name}/" for p in root.iterdir() if (p / "__init__.py").is_file()}
    missing = sorted(n for n in names if n not in block)
    assert not missing, f"README's layout does not name {missing}"
