"""Checks on the raw document before any section is built: JSON values only, sizes within
limits.py, no credential-shaped value anywhere."""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import date
from typing import Any

from poisson_tasks.credentials import (
    credential_shaped,
    fields_where,
)
from poisson_tasks.prereg.baseurl import is_credential_name
from poisson_tasks.prereg.limits import (
    MAX_ARMS,
    MAX_ATTEMPTS,
    MAX_COMPLETION_TOKENS,
    MAX_CONCURRENCY,
    MAX_DEPTH,
    MAX_EPISODES,
    MAX_INT,
    MAX_ITEMS,
    MAX_RETRIES,
    MAX_SECONDS,
    MAX_SEED_STRING,
    MAX_TASKS,
    MAX_TURNS,
    MIN_RESOLUTION,
)
from poisson_tasks.prereg.schema import Budget, Decoding, Design, Execution, Thresholds
from poisson_tasks.prereg.seeds import SEED_MODULUS

# model.api_key_env and model.base_url have their own checks, which say more about what is wrong
_OWN_CREDENTIAL_CHECKS = frozenset({"model.api_key_env", "model.base_url"})


def credential_problems(doc: Mapping[str, Any]) -> list[str]:
    """A problem for every field of the document (any section, any depth, keys included) that
    holds a value shaped like a credential; the field is named, the value never."""
    return [
        f"{field}: holds a value shaped like a credential (an API key or a bearer token), which "
        "would be written into the run folder and the card; remove it and put the key in an "
        "environment variable named by model.api_key_env"
        for field in fields_where(dict(doc), credential_shaped)
        if field not in _OWN_CREDENTIAL_CHECKS
    ]


def credential_keys(value: Any, where: str) -> list[str]:
    """Every key under `value` (nested mappings included) that names a credential."""
    out: list[str] = []
    if isinstance(value, Mapping):
        for key, nested in value.items():
            here = f"{where}.{key}"
            if is_credential_name(str(key)):
                out.append(here)
            else:
                out.extend(credential_keys(nested, here))
    elif isinstance(value, list):
        for index, nested in enumerate(value):
            out.extend(credential_keys(nested, f"{where}[{index}]"))
    return out


# The fields whose schema type is a date: a Python caller may give a datetime.date there (its JSON
# form is the ISO string the schema reads back); anywhere else a date is not a JSON value.
DATE_FIELDS = frozenset({"model.rates.as_of"})


def value_problems(value: Any, where: str, depth: int = 0) -> list[str]:
    """Problems anywhere in the raw document: a value JSON cannot hold (bytes, a set, a date outside
    DATE_FIELDS: what is registered is what is stored, hashed and sent, as JSON), non-finite floats, over-wide
    integers, deep nesting, oversized lists and mappings, non-string keys (extra_body included,
    since it is sent and hashed verbatim)."""
    if depth > MAX_DEPTH:
        return [f"{where}: nested more than {MAX_DEPTH} levels deep"]
    if value is None or isinstance(value, bool | str):
        return []
    if isinstance(value, int):
        if abs(value) > MAX_INT:
            return [
                f"{where}: an integer of {value.bit_length()} bits is too wide; integers are "
                f"at most 2^53 ({MAX_INT:,}) in size"
            ]
        return []
    if isinstance(value, float):
        return [] if math.isfinite(value) else [f"{where}: {value} is not a finite number"]
    if isinstance(value, Mapping | list | tuple) and len(value) > MAX_ITEMS:
        return [f"{where or '(document)'}: {len(value):,} items; at most {MAX_ITEMS:,}"]
    if isinstance(value, Mapping):
        out: list[str] = []
        for key, item in value.items():
            if not isinstance(key, str):
                out.append(f"{where}.{key!s:.40}: keys must be strings")
                continue
            out += value_problems(item, f"{where}.{key}" if where else key, depth + 1)
        return out
    if isinstance(value, list | tuple):
        out = []
        for index, item in enumerate(value):
            out += value_problems(item, f"{where}[{index}]", depth + 1)
            if len(out) > 20:
                break
        return out
    if where in DATE_FIELDS and type(value) is date:  # e.g. yaml.safe_load's as_of, from Python
        return []
    return [
        f"{where or '(document)'}: a {type(value).__name__} is not a JSON value; a "
        "pre-registration holds plain JSON values only (strings, numbers, true, false, null, "
        "lists and mappings): write it as a string or a number"
    ]


def _too_big(where: str, value: float, limit: float, what: str = "") -> list[str]:
    if value > limit:
        return [f"{where}: {value:,} is above the limit of {limit:,}{what}"]
    return []


def size_problems(parsed: Mapping[str, Any]) -> list[str]:
    """Upper bounds on every size; the limit is in each message."""
    problems: list[str] = []
    design: Design | None = parsed.get("design")
    if design is not None:
        problems += _too_big("design.tasks", design.tasks, MAX_TASKS)
        problems += _too_big("design.attempts", design.attempts, MAX_ATTEMPTS)
        problems += _too_big("design.arms", len(design.arms), MAX_ARMS, " arms")
        for field in ("turn_limit", "slack", "horizon"):
            problems += _too_big(f"design.{field}", getattr(design, field), MAX_TURNS)
        if design.seeds is not None:
            problems += _too_big("design.seeds", len(design.seeds), MAX_TASKS, " seeds")
            bad = [x for x in design.seeds if not 0 <= x < SEED_MODULUS]
            if bad:
                problems.append(f"design.seeds: {bad[0]} is outside 0 to {SEED_MODULUS - 1}")
        if len(design.seed_string) > MAX_SEED_STRING:
            problems.append(
                f"design.seed_string: {len(design.seed_string):,} characters; at most "
                f"{MAX_SEED_STRING:,}"
            )
        if not problems and design.tasks >= 1 and design.attempts >= 1:
            episodes = len(design.arms) * design.tasks * design.attempts
            problems += _too_big(
                "design", episodes, MAX_EPISODES, " episodes (arms x tasks x attempts)"
            )
    decoding: Decoding | None = parsed.get("decoding")
    if decoding is not None:
        problems += _too_big(
            "decoding.max_completion_tokens", decoding.max_completion_tokens, MAX_COMPLETION_TOKENS
        )
    execution: Execution | None = parsed.get("execution")
    if execution is not None:
        problems += _too_big("execution.concurrency", execution.concurrency, MAX_CONCURRENCY)
        problems += _too_big("execution.max_retries", execution.max_retries, MAX_RETRIES)
        for field in ("backoff_s", "backoff_max_s", "request_timeout_s", "episode_timeout_s"):
            problems += _too_big(
                f"execution.{field}", getattr(execution, field), MAX_SECONDS, " seconds"
            )
    budget: Budget | None = parsed.get("budget")
    if budget is not None:
        problems += _too_big("budget.wall_clock_s", budget.wall_clock_s, MAX_SECONDS, " seconds")
    thresholds: Thresholds | None = parsed.get("thresholds")
    if thresholds is not None and 0.0 < thresholds.resolution < MIN_RESOLUTION:
        problems.append(
            f"thresholds.resolution: {thresholds.resolution:g} is below the finest resolution "
            f"{MIN_RESOLUTION} (it would need more than {MAX_TASKS:,} tasks)"
        )
    return problems
