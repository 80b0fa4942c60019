"""The cross-field checks of a parsed pre-registration: each takes the sections it relates and
returns one problem line per fault, naming the field and the fix."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from poisson_tasks.arms import CONTROL_ARMS, ArmSpec, Split, Strictness, arm_id, parse_arm_id
from poisson_tasks.credentials import (
    credential_shaped,
    shown,
)
from poisson_tasks.errors import ArmError, PolicyError, ToolFileError
from poisson_tasks.owntools import ToolSet, load_tool_file
from poisson_tasks.policycatalogue import parse_model
from poisson_tasks.prereg.baseurl import check_base_url, url_form_problems
from poisson_tasks.prereg.document import credential_keys
from poisson_tasks.prereg.schema import (
    BUILD_HASHES,
    IGNORED_THRESHOLDS,
    Budget,
    Build,
    Decoding,
    Design,
    Execution,
    Serving,
    Thresholds,
    build_hashes,
)
from poisson_tasks.prereg.seeds import derive_seeds, seed_list_hash
from poisson_tasks.providers import PROVIDERS as REGISTRY

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

_KEYLIKE = re.compile(r"^(sk-|sk_|Bearer )|^(?=.*[a-z])(?=.*[0-9])[A-Za-z0-9]{24,}$")

_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def check_serving(serving: Serving) -> list[str]:
    problems: list[str] = []
    if not serving.model.strip():
        problems.append("model.model: required, the model id the endpoint serves")
    provider = REGISTRY[serving.provider]
    if provider.base_url_required and not serving.base_url:
        problems.append(
            f"model.base_url: required for provider {serving.provider}, "
            "e.g. http://127.0.0.1:8000/v1"
        )
    if provider.revision_required and not serving.revision:
        problems.append(
            f"model.revision: required for a self-served model ({serving.provider}): the weights' "
            "exact revision (a Hugging Face commit, or the Ollama model digest)"
        )
    if provider.key_required and not serving.api_key_env:
        problems.append(
            f"model.api_key_env: required for provider {serving.provider}, "
            f"e.g. {provider.key_example}"
        )
    if serving.provider == "reference":
        try:
            parse_model(serving.model)
        except PolicyError as exc:
            problems.append(f"model.model: {exc}")
    if serving.base_url is not None:
        problems.extend(check_base_url(serving.base_url))
    if serving.base_url is not None and not serving.base_url.startswith(("http://", "https://")):
        problems.append(
            f"model.base_url: must start with http:// or https://, got {shown(serving.base_url)}"
        )
    elif serving.base_url is not None:
        problems.extend(url_form_problems(serving.base_url))
    if serving.api_key_env is not None:
        if _KEYLIKE.search(serving.api_key_env) or credential_shaped(serving.api_key_env):
            problems.append(
                "model.api_key_env: looks like a key, not a variable name; put the key in an "
                "environment variable and name the variable here (e.g. OPENAI_API_KEY)"
            )
        elif not _ENV_NAME.match(serving.api_key_env):
            problems.append(
                f"model.api_key_env: {shown(serving.api_key_env)} is not an environment "
                "variable name (letters, digits and _, not starting with a digit)"
            )
    if serving.rates is not None:
        for field in ("input", "cached_input", "output"):
            if getattr(serving.rates, field) < 0:
                problems.append(f"model.rates.{field}: a rate cannot be negative")
    return problems


def check_decoding(decoding: Decoding) -> list[str]:
    problems: list[str] = []
    for where in credential_keys(decoding.extra_body, "decoding.extra_body"):
        problems.append(
            f"{where}: carries a credential, which would be written into the run folder and "
            "the card; remove it and name the key's environment variable in model.api_key_env"
        )
    if not 0.0 <= decoding.temperature <= 2.0:
        problems.append(f"decoding.temperature: must be in [0, 2], got {decoding.temperature}")
    if not 0.0 < decoding.top_p <= 1.0:
        problems.append(f"decoding.top_p: must be in (0, 1], got {decoding.top_p}")
    if decoding.max_completion_tokens < 1:
        problems.append(
            "decoding.max_completion_tokens: must be 1 or more, "
            f"got {decoding.max_completion_tokens}"
        )
    reserved = {
        "model",
        "messages",
        "tools",
        "temperature",
        "top_p",
        "reasoning_effort",
        "max_completion_tokens",
        "user",
        "stream",
    }
    for key in sorted(set(decoding.extra_body) & reserved):
        problems.append(f"decoding.extra_body.{key}: the runner sets it from the declared fields")
    if "seed" in decoding.extra_body:
        problems.append(
            "decoding.extra_body.seed: one seed would be sent on every attempt of every task; "
            "write decoding.seed: derived for a seed per attempt, or leave it out"
        )
    return problems


def planned_spec(spec: ArmSpec, split: Split, strictness: Strictness) -> ArmSpec:
    """An arm of design.arms as the plan holds it: under the design's split and strictness."""
    return ArmSpec(
        knob=spec.knob, level=spec.level, control=spec.control, split=split, strictness=strictness
    )


def arm_specs(design: Design) -> tuple[list[ArmSpec], list[str]]:
    """Parse the arms, applying the design's split and strictness; one problem per bad arm."""
    problems: list[str] = []
    specs: list[ArmSpec] = []
    seen: dict[str, int] = {}
    if not design.arms:
        problems.append("design.arms: empty; list at least one arm id, e.g. depth:d3")
    for index, text in enumerate(design.arms):
        try:
            spec = parse_arm_id(text)
        except ArmError as exc:
            problems.append(f"design.arms[{index}]: {exc}")
            continue
        if "/" in text:
            if spec.split != design.split:
                problems.append(
                    f"design.arms[{index}]: {text} is split {spec.split} but design.split is "
                    f"{design.split}; drop the suffix, the split is declared once"
                )
                continue
            if spec.strictness != design.strictness:
                problems.append(
                    f"design.arms[{index}]: {text} is {spec.strictness} but design.strictness is "
                    f"{design.strictness}; drop the suffix, strictness is declared once"
                )
                continue
        spec = planned_spec(spec, design.split, design.strictness)
        aid = arm_id(spec)
        if aid in seen:
            problems.append(
                f"design.arms[{index}]: {text} repeats design.arms[{seen[aid]}]; list it once"
            )
            continue
        seen[aid] = index
        specs.append(spec)
    return specs, problems


def _key(spec: ArmSpec) -> tuple[str, int, int | None]:
    """An arm's identity apart from its split and strictness."""
    return (spec.knob, spec.level, spec.control)


def check_controls(specs: Sequence[ArmSpec]) -> list[str]:
    """A knob swept over two or more levels needs every control arm of that knob."""
    problems: list[str] = []
    knobs: dict[str, set[int]] = {}
    present: set[tuple[str, int, int | None]] = set()
    for spec in specs:
        present.add(_key(spec))
        if spec.control is None:
            knobs.setdefault(spec.knob, set()).add(spec.level)
    for knob, lvls in knobs.items():
        if len(lvls) < 2:
            continue
        need = CONTROL_ARMS[knob]  # type: ignore[index]
        missing = [c for c in need if _key(parse_arm_id(c)) not in present]
        if missing:
            problems.append(
                f"design.arms: a sweep of {knob} needs its control arm(s) {', '.join(need)}; "
                f"missing {', '.join(missing)} (a knob swept without its control cannot be read)"
            )
    return problems


def horizon_of(specs: Sequence[ArmSpec], slack: int) -> tuple[int, str]:
    deepest = max(specs, key=lambda spec: (spec.max_turns(slack), arm_id(spec)))
    return deepest.max_turns(slack), arm_id(deepest)


def check_design(
    design: Design, specs: Sequence[ArmSpec], arms_ok: bool
) -> tuple[list[int] | None, list[str]]:
    problems: list[str] = []
    if design.tasks < 1:
        problems.append(f"design.tasks: must be 1 or more, got {design.tasks}")
    if design.attempts < 1:
        problems.append(f"design.attempts: must be 1 or more, got {design.attempts}")
    if design.turn_limit < 1:
        problems.append(f"design.turn_limit: must be 1 or more, got {design.turn_limit}")
    if design.replay is not None and design.replay.sample < 1:
        problems.append(
            f"design.replay.sample: must be 1 or more, got {design.replay.sample} (the slots "
            "replayed after the run); remove design.replay for no replay"
        )
    if design.replay is not None and design.tasks >= 1 and design.attempts >= 1:
        planned = len(design.arms) * design.tasks * design.attempts
        if design.replay.sample > planned:
            problems.append(
                f"design.replay.sample: {design.replay.sample} is more than the {planned} slots "
                "the design plans; replay at most that many"
            )
    seeds: list[int] | None = None
    if not design.seed_string.strip():
        problems.append(
            'design.seed_string: empty; the seeds are derived from it (or write "range")'
        )
    elif design.tasks >= 1:
        seeds = derive_seeds(design.seed_string, design.tasks)
        if design.seeds is not None and design.seeds != seeds:
            first = next(
                (i for i, (a, b) in enumerate(zip(design.seeds, seeds, strict=False)) if a != b),
                min(len(design.seeds), len(seeds)),
            )
            problems.append(
                f"design.seeds: not derivable from seed_string {shown(design.seed_string)} with tasks "
                f"{design.tasks} (first difference at index {first}); remove the list or fix it"
            )
        derived_hash = seed_list_hash(seeds)
        if design.seed_list_hash is not None and design.seed_list_hash != derived_hash:
            problems.append(
                f"design.seed_list_hash: {design.seed_list_hash} is not the hash of the derived "
                f"seed list ({derived_hash}); remove it or fix seed_string/tasks"
            )
    if design.slack < 0:
        problems.append(f"design.slack: must be 0 or more, got {design.slack}")
    elif specs and arms_ok:  # a horizon over a partial arm list would mislead
        horizon, deepest = horizon_of(specs, design.slack)
        if design.horizon != horizon:
            problems.append(
                f"design.horizon: states {design.horizon} but the arms give {horizon} "
                f"({deepest}'s max_turns with slack {design.slack}); write horizon: {horizon}"
            )
        if design.turn_limit >= 1 and design.turn_limit < horizon:
            problems.append(
                f"design.turn_limit: {design.turn_limit} is below the horizon {horizon}: it would "
                f"cut {deepest} short of its turn budget; raise turn_limit or lower slack"
            )
    return seeds, problems


def check_budget(budget: Budget, serving: Serving | None) -> list[str]:
    problems: list[str] = []
    if budget.tokens <= 0:
        problems.append(
            f"budget.tokens: {budget.tokens} stops the run before it starts; give a positive cap"
        )
    if budget.wall_clock_s <= 0:
        problems.append(
            f"budget.wall_clock_s: {budget.wall_clock_s:g} stops the run before it starts; "
            "give a positive number of seconds"
        )
    if budget.dollars is not None:
        if budget.dollars <= 0:
            problems.append(
                f"budget.dollars: {budget.dollars:g} stops the run before it starts; give a "
                "positive cap or leave it out"
            )
        elif serving is not None and serving.rates is None:
            problems.append(
                "budget.dollars: needs model.rates to compute spend; declare the rates or "
                "leave the dollar cap out"
            )
    return problems


def check_execution(execution: Execution) -> list[str]:
    problems: list[str] = []
    if execution.concurrency < 1:
        problems.append(f"execution.concurrency: must be 1 or more, got {execution.concurrency}")
    if execution.max_retries < 0:
        problems.append(f"execution.max_retries: must be 0 or more, got {execution.max_retries}")
    for field in ("backoff_s", "backoff_max_s"):
        if getattr(execution, field) < 0:
            problems.append(f"execution.{field}: must be 0 or more")
    for field in ("request_timeout_s", "episode_timeout_s"):
        if getattr(execution, field) <= 0:
            problems.append(f"execution.{field}: must be positive")
    if execution.retry_after_max_s is not None and execution.retry_after_max_s < 0:
        problems.append("execution.retry_after_max_s: must be 0 or more (seconds)")
    return problems


def check_thresholds(thresholds: Thresholds) -> list[str]:
    problems: list[str] = []
    if not 0.0 <= thresholds.saturation_low < thresholds.saturation_high <= 1.0:
        problems.append("thresholds: need 0 <= saturation_low < saturation_high <= 1")
    for field in ("resolution", "no_call_max", "instrument_max", "confidence"):
        if not 0.0 < getattr(thresholds, field) < 1.0:
            problems.append(
                f"thresholds.{field}: must be in (0, 1), got {getattr(thresholds, field)}"
            )
    return problems


def ignored_notes(doc: Mapping[str, Any]) -> tuple[str, ...]:
    """One note naming the ignored thresholds a document still has (none when it has none)."""
    raw = doc.get("thresholds")
    found = [k for k in IGNORED_THRESHOLDS if isinstance(raw, Mapping) and k in raw]
    if not found:
        return ()
    return (
        ", ".join(f"thresholds.{k}" for k in found)
        + ": ignored (the intervals are closed-form and nothing resamples); left out of the "
        "plan and its hash, so the lines can be deleted",
    )


def check_build(build: Build | None) -> list[str]:
    """A pinned hash must be well formed and this install's: another build is another
    instrument."""
    if build is None:
        return []
    problems = []
    ours = build_hashes()
    for name in BUILD_HASHES:
        pinned = getattr(build, name)
        if pinned is None:
            continue
        if not _HEX64.match(pinned):
            problems.append(f"build.{name}: {shown(pinned)} is not a 64-digit lowercase hex hash")
        elif pinned != ours[name]:
            problems.append(
                f"build.{name}: the pre-registration pins {pinned[:12]}, this install's is "
                f"{ours[name][:12]}: another build is a different instrument; run it with the "
                "build it pins, or pin this build's hashes (`poisson-tasks validate` prints them)"
            )
    if build.generator_hash is None and build.engine_hash is None:
        problems.append(
            "build: pins nothing; give generator_hash and/or engine_hash, or leave the section out"
        )
    return problems


def own_tools_of(design: Design, source: str | None) -> tuple[ToolSet | None, list[str]]:
    """The tool file a design names, validated; one problem per line, each naming the field."""
    if design.own_tools is not None and design.harness != "native":
        return None, [
            f"design.own_tools: the {design.harness} harness builds its own tool blocks and does "
            "not take your tools; use harness native (the default) for a card on your own tools"
        ]
    if design.own_tools is None:
        if design.own_tools_sha256 is not None:
            return None, ["design.own_tools_sha256: given without design.own_tools; remove it"]
        return None, []
    base = Path(source).parent if source else Path.cwd()
    path = Path(design.own_tools)
    try:
        tools = load_tool_file(
            path if path.is_absolute() else base / path, shown_as=design.own_tools
        )
    except ToolFileError as exc:
        return None, [f"design.own_tools: {x}" for x in exc.problems]
    if design.own_tools_sha256 is not None and design.own_tools_sha256 != tools.sha256:
        return None, [
            f"design.own_tools_sha256: {design.own_tools_sha256} is not the SHA-256 of "
            f"{design.own_tools} ({tools.sha256}); the file changed: fix the hash or restore it"
        ]
    return tools, []
