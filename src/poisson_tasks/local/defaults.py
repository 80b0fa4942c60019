"""serve-local's defaults and the names of the templates it ships, one definition each.

Standard library only, so the CLI can show them in `--help` without loading pydantic, Jinja2 or
llama.cpp.
"""

from __future__ import annotations

from pathlib import Path

PORT = 0  # 0: the operating system picks a free port, which the printed URL names
THREADS = 1
N_CTX = 8192
AUTO = "auto"  # --template auto: chosen from the GGUF's metadata (local.choice)
TEMPLATE = AUTO
EMBEDDED = "embedded"  # --template embedded: the chat template inside the GGUF
TEMPLATE_SUFFIX = ".jinja"


def shipped_templates() -> list[str]:
    """The names of the chat templates this package ships (data/templates/NAME.jinja). Read from
    the installed files, as hashes.py reads the sources: importlib.resources would cost every
    command line (it lists them in --help) a few milliseconds of imports."""
    folder = Path(__file__).resolve().parent.parent / "data" / "templates"
    return sorted(
        p.name.removesuffix(TEMPLATE_SUFFIX)
        for p in folder.iterdir()
        if p.name.endswith(TEMPLATE_SUFFIX)
    )
