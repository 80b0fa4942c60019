"""Reading a pre-registration file: a regular file of at most 1 MiB, UTF-8, strict YAML within
limits.py; each failure one PreregistrationError line naming the file."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from poisson_tasks.errors import NotARegularFile, PreregistrationError, TooLarge
from poisson_tasks.files import read_limited
from poisson_tasks.prereg.limits import MAX_DEPTH, MAX_FILE_BYTES, YAML_LIMITS
from poisson_tasks.prereg.schema import Plan
from poisson_tasks.prereg.validate import validate_preregistration
from poisson_tasks.yamlfile import YamlRefused, load_json_yaml


def read_yaml(text: str, where: str) -> Any:
    """Parse YAML into plain JSON values, within YAML_LIMITS (yamlfile.load_json_yaml); any
    failure is one PreregistrationError line."""
    try:
        return load_json_yaml(text, YAML_LIMITS)
    except YamlRefused as exc:
        raise PreregistrationError([f"{where}: {exc.line()}"]) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        what = " ".join(str(exc.problem or exc.context or "unreadable").split())
        raise PreregistrationError([f"{where}: not valid YAML: {what[:300]}{at}"]) from None
    except yaml.YAMLError as exc:
        first = " ".join(str(exc).split())
        raise PreregistrationError([f"{where}: not valid YAML: {first[:300]}"]) from None
    except RecursionError:
        raise PreregistrationError(
            [f"{where}: nested too deeply to read (at most {MAX_DEPTH} levels are allowed)"]
        ) from None
    except ValueError as exc:  # e.g. an integer of more than 4,300 digits
        first = " ".join(str(exc).split())
        raise PreregistrationError([f"{where}: a value cannot be read: {first[:200]}"]) from None


def read_yaml_file(file_path: Path, what: str) -> bytes:
    """The bytes of a YAML file a user names: a regular file (a directory, a FIFO or a device is
    refused at once) of at most MAX_FILE_BYTES; else one PreregistrationError line."""
    try:
        return read_limited(file_path, MAX_FILE_BYTES)
    except TooLarge:
        raise PreregistrationError(
            [f"{file_path}: larger than {MAX_FILE_BYTES:,} bytes (1 MiB); {what} is one page"]
        ) from None
    except NotARegularFile as exc:
        raise PreregistrationError(
            [f"{file_path}: {exc.strerror}; give the path of {what}'s YAML file"]
        ) from None
    except OSError as exc:
        problem = f"{file_path}: cannot be read ({exc.strerror}); check the path"
        raise PreregistrationError([problem]) from None


def load_preregistration(path: str | Path, *, base_url: str | None = None) -> Plan:
    """Read a pre-registration file (UTF-8, at most 1 MiB, strict YAML) and validate it.

    `base_url` (run --base-url) sets model.base_url before validation, for a server whose port is
    only known when it starts; the run records the document with the address it used.
    """
    file_path = Path(path)
    data = read_yaml_file(file_path, "a pre-registration")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PreregistrationError(
            [
                f"{file_path}: not UTF-8 text "
                f"(byte {exc.start} is {data[exc.start : exc.start + 1]!r}); save the file as UTF-8"
            ]
        ) from None
    if "\x00" in text:
        raise PreregistrationError(
            [f"{file_path}: holds NUL bytes; a pre-registration is YAML text"]
        )
    doc = read_yaml(text, str(file_path))
    if not isinstance(doc, Mapping):
        raise PreregistrationError(
            [f"{file_path}: must be a YAML mapping of sections (format, model ...)"]
        )
    if base_url is not None:
        model = doc.get("model")
        doc = {
            **doc,
            "model": {**model, "base_url": base_url} if isinstance(model, dict) else model,
        }
    return validate_preregistration(doc, source=str(file_path))
