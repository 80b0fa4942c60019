"""`validate_preregistration`: a document (or a Preregistration) to a Plan, or one
PreregistrationError holding every problem found, in a fixed order."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from poisson_tasks.arms import ArmSpec, arm_id
from poisson_tasks.bundle import digest
from poisson_tasks.errors import PreregistrationError
from poisson_tasks.owntools import ToolSet
from poisson_tasks.prereg.checks import (
    arm_specs,
    check_budget,
    check_build,
    check_controls,
    check_decoding,
    check_design,
    check_execution,
    check_serving,
    check_thresholds,
    horizon_of,
    ignored_notes,
    own_tools_of,
)
from poisson_tasks.prereg.document import credential_problems, size_problems, value_problems
from poisson_tasks.prereg.schema import PROBE_FORMAT, Design, Plan, Preregistration, Serving
from poisson_tasks.prereg.sections import parse_sections
from poisson_tasks.prereg.seeds import seed_list_hash
from poisson_tasks.resolution import (
    resolution_of,
)


def validate_preregistration(
    doc: Mapping[str, Any] | Preregistration, *, source: str | None = None
) -> Plan:
    """Validate a pre-registration; raise PreregistrationError with one message per problem."""
    if isinstance(doc, Preregistration):
        doc = doc.model_dump(mode="json")  # the form it is stored, hashed and sent in
    if not isinstance(doc, Mapping):
        raise PreregistrationError(
            [f"(document): must be a mapping of sections, got {type(doc).__name__}"]
        )
    if doc.get("format") == PROBE_FORMAT:  # the other kind of file: say so, not what it lacks
        file = shlex.quote(source) if source else "FILE"
        raise PreregistrationError(
            [
                f"{source or '(document)'}: a probe registration (format: {PROBE_FORMAT}), not a "
                f"pre-registration: run it with poisson-tasks probe {file} --out DIR"
            ]
        )
    problems = value_problems(doc, "")
    if problems:  # nothing below can be trusted with NaN, 2^64 or a nesting bomb in it
        raise PreregistrationError(problems[:20])
    shaped = credential_problems(doc)
    parsed, problems = parse_sections(doc)
    problems = shaped + problems
    too_big = size_problems(parsed)
    if too_big:  # sizes first: the checks below derive seeds and horizons from them
        raise PreregistrationError(problems + too_big)
    serving: Serving | None = parsed.get("model")
    if serving is not None:
        problems += check_serving(serving)
    if "decoding" in parsed:
        problems += check_decoding(parsed["decoding"])
    specs: list[ArmSpec] = []
    seeds: list[int] | None = None
    own_tools: ToolSet | None = None
    if "design" in parsed:
        design: Design = parsed["design"]
        specs, arm_problems = arm_specs(design)
        problems += arm_problems
        problems += check_controls(specs)
        seeds, design_problems = check_design(design, specs, not arm_problems)
        problems += design_problems
        own_tools, tool_problems = own_tools_of(design, source)
        problems += tool_problems
    if "budget" in parsed:
        problems += check_budget(parsed["budget"], serving)
    if "execution" in parsed:
        problems += check_execution(parsed["execution"])
    if "thresholds" in parsed:
        problems += check_thresholds(parsed["thresholds"])
    problems += check_build(parsed.get("build"))
    if problems:
        raise PreregistrationError(problems)
    assert seeds is not None
    if own_tools is not None:  # the file's hash is part of the measurement
        parsed["design"] = parsed["design"].model_copy(
            update={"own_tools_sha256": own_tools.sha256}
        )
    prereg = Preregistration.model_validate(
        {**{k: doc[k] for k in ("format", "name", "description") if k in doc}, **parsed}
    )
    design = prereg.design
    horizon, _ = horizon_of(specs, design.slack)
    arms = tuple(arm_id(s) for s in specs)
    return Plan(
        preregistration=prereg,
        preregistration_hash=digest(prereg.model_dump(mode="json")),
        measurement_hash=digest(prereg.measurement()),
        arms=arms,
        seeds=tuple(seeds),
        seed_list_hash=seed_list_hash(seeds),
        attempts=design.attempts,
        episodes=len(arms) * len(seeds) * design.attempts,
        horizon=horizon,
        resolution=resolution_of(design.tasks, design.attempts, prereg.thresholds.resolution),
        source=source,
        own_tools=own_tools,
        notes=ignored_notes(doc),
    )
