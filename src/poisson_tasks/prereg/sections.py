"""The document split into its sections, each validated on its own by its schema model, so one
broken section does not hide another's problems; pydantic's errors as one line each."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import (
    BaseModel,
    ValidationError,
)

from poisson_tasks.credentials import (
    could_be_credential,
    shown,
)
from poisson_tasks.prereg.schema import (
    FORMAT,
    Budget,
    Build,
    Decoding,
    Design,
    Execution,
    Serving,
    Thresholds,
)

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")  # a study's name: a safe folder name


def _where(loc: tuple[int | str, ...], section: str = "") -> str:
    parts = [section] if section else []
    for part in loc:
        if isinstance(part, str) and could_be_credential(part):
            part = "(a key not shown)"
        if isinstance(part, int):
            parts[-1:] = [f"{parts[-1]}[{part}]"] if parts else [f"[{part}]"]
        else:
            parts.append(part)
    return ".".join(parts) or "(document)"


def _pydantic_problems(exc: ValidationError, section: str) -> list[str]:
    out: list[str] = []
    for err in exc.errors():
        where = _where(tuple(err["loc"]), section)
        if err["type"] == "extra_forbidden":
            key = str(err["loc"][-1])
            if "key" in key.lower() and key != "api_key_env":
                out.append(
                    f"{where}: unknown key; an API key never goes in the file, name its "
                    "environment variable in model.api_key_env instead"
                )
            else:
                out.append(f"{where}: unknown key; remove it or check its spelling")
        elif err["type"] == "missing":
            out.append(f"{where}: required field is missing")
        else:
            out.append(f"{where}: {err['msg']} (got {shown(err.get('input'))})")
    return out


_SECTIONS: dict[str, type[BaseModel]] = {
    "model": Serving,
    "decoding": Decoding,
    "design": Design,
    "budget": Budget,
    "execution": Execution,
    "thresholds": Thresholds,
    "build": Build,
}
_OPTIONAL_SECTIONS = ("execution", "thresholds", "build")


def parse_sections(doc: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Validate each section on its own, so one broken section does not hide another's problems."""
    problems: list[str] = []
    parsed: dict[str, Any] = {}
    known = {"format", "name", "description", *_SECTIONS}
    for key in doc:
        if key not in known:
            hint = (
                "an API key never goes in the file, name its variable in model.api_key_env"
                if "key" in str(key).lower()
                else f"known keys: {', '.join(sorted(known))}"
            )
            named = (
                f"(document): unknown key {shown(key)}"
                if not isinstance(key, str) or could_be_credential(key)
                else f"{key}: unknown key"
            )
            problems.append(f"{named}; {hint}")
    if doc.get("format") != FORMAT:
        problems.append(f"format: must be {FORMAT!r}, got {shown(doc.get('format'))}")
    name = doc.get("name")
    if not isinstance(name, str) or not name.strip():
        problems.append("name: required, a non-empty string naming the study")
    elif not _NAME.match(name) or ".." in name:
        problems.append(
            "name: not a safe name: it names the run folder runs/<name>-<time>, "
            "so use 1-100 letters, digits, '.', '_' and '-', starting with a letter or digit "
            "(no '/', '..', spaces or control characters), e.g. qwen3-8b-depth"
        )
    if "description" in doc and not isinstance(doc["description"], str):
        problems.append("description: must be a string")
    for section, model in _SECTIONS.items():
        raw = doc.get(section)
        if raw is None:
            if section in _OPTIONAL_SECTIONS:
                parsed[section] = None if section == "build" else model()
                continue
            problems.append(f"{section}: required section is missing")
            continue
        if not isinstance(raw, Mapping):
            problems.append(f"{section}: must be a mapping of fields, got {type(raw).__name__}")
            continue
        try:
            parsed[section] = model.model_validate(dict(raw))
        except ValidationError as exc:
            problems.extend(_pydantic_problems(exc, section))
    return parsed, problems
