"""What refuses a run before its folder is touched: its arms, its pins, a missing extra, the API key
(unset, or written where the folder would keep it), the endpoint's base URL, and a resumed
session served otherwise than the first. The endpoint's own preflight (reachable, key accepted,
model served) is runner/provenance.py's serving_details.
"""

from __future__ import annotations

import os
from pathlib import Path

from poisson_tasks.credentials import SECRET_PIECE, fields_where, holds_secret
from poisson_tasks.errors import EndpointError, PinRefusal, PreregistrationError, RunFolderError
from poisson_tasks.generator import generate
from poisson_tasks.owntools import with_own_tools
from poisson_tasks.pins.owntools import own_tools_ledger
from poisson_tasks.pins.plan import check_plan
from poisson_tasks.prereg import Plan
from poisson_tasks.reference import ReferenceServer, start_reference_server
from poisson_tasks.runfolder import OwnToolsRecord, RunHeader, ServingRecord
from poisson_tasks.runner.verifiers_null import vf_eval_command
from poisson_tasks.servingpin import compare_serving, serving_facts, session_facts
from poisson_tasks.tokens import count_tokens


def read_api_key(plan: Plan, folder: Path) -> str | None:
    env = plan.preregistration.model.api_key_env
    if env is None:
        return None
    value = os.environ.get(env)
    if not value:
        raise EndpointError(
            f"model.api_key_env names {env}, which is not set: export {env}=<your key>"
        )
    # decided by value: the key, or any 8-character piece of it, anywhere in the document
    # (it would be written into run.json and the card) refuses the run before anything is sent
    fields = fields_where(
        {**plan.preregistration.model_dump(mode="json"), _FOLDER_FIELD: str(folder.absolute())},
        lambda text: text == value or (len(value) >= SECRET_PIECE and holds_secret(text, value)),
    )
    if fields:
        raise PreregistrationError(
            [
                f"{field}: holds the API key that model.api_key_env names ({env}), or a piece of "
                + (
                    "it; give another --out: a folder's name is printed, and written in every "
                    "card and page made from it"
                    if field == _FOLDER_FIELD
                    else "it; remove it: the key is sent in the Authorization header and never "
                    "written"
                )
                for field in fields
            ]
        )
    return value


_FOLDER_FIELD = "the run folder's path"


def check_arms(plan: Plan) -> None:
    """Every arm generates (a knob without a generator in this build stops the run up front)."""
    for arm in plan.arms:
        bundle = generate(arm, plan.seeds[0])
        if plan.own_tools is not None:
            with_own_tools(bundle, plan.own_tools)


def check_plan_pins(plan: Plan) -> None:
    """Hold the pin ledger over every contrast of the plan at every seed, before any request.

    A violated row refuses the whole run with PinRefusal (exit 2) in one line naming the row, the
    arms and their values, and the seeds it was refused at; there is no switch to skip it.
    """
    report = check_plan(plan.arms, plan.seeds)
    if not report.refused:
        return
    seed, first = next(
        (r.seed, v) for c in report.contrasts for r in c.reports for v in r.violations
    )
    raise PinRefusal(
        f"run refused before any request: {report.message()}; at seed {seed}: {first.line()}; "
        "the levels of a contrast must differ only in their knob: fix the generator or the plan"
    )


OWN_TOOLS_SEEDS = 3  # the seeds the pin ledger is held on with the user's tools, from the first


def own_tools_record(plan: Plan) -> OwnToolsRecord | None:
    """What the pin ledger finds on the plan's own tools (None without them), on its first seeds."""
    tools = plan.own_tools
    if tools is None:
        return None
    seeds = list(plan.seeds[:OWN_TOOLS_SEEDS])
    ledger = own_tools_ledger(plan.arms, seeds, tools)
    return OwnToolsRecord(
        file=tools.source,
        sha256=tools.sha256,
        names=list(tools.names),
        checked_seeds=seeds,
        contrasts=ledger.contrasts,
        changed=[c.model_dump() for c in ledger.changed],
        not_held=[c.model_dump() for c in ledger.not_held],
    )


def check_runnable(plan: Plan) -> None:
    """What refuses a plan before its folder is touched: its arms, its pins, a missing extra."""
    check_arms(plan)
    check_plan_pins(plan)
    if plan.preregistration.design.harness == "verifiers-null":
        vf_eval_command()  # the extra is missing: stop before the folder is touched


def resolve_base_url(plan: Plan, key: str | None) -> tuple[str, ReferenceServer | None]:
    """The endpoint's base URL: the declared one, else an in-process reference server's (returned
    with it, for the session to close)."""
    model = plan.preregistration.model
    base_url = model.resolved_base_url
    if model.provider == "reference" and base_url is None:
        count_tokens("warm")  # the server thread counts tokens: load the tables before the clock
        server = start_reference_server("127.0.0.1", 0, api_key=key)
        return server.base_url, server
    if base_url is None:  # validate_preregistration requires one for every provider but these
        raise EndpointError(
            "model.base_url: not given; for a llama.cpp server pass the URL serve-local "
            "printed with `run --base-url URL` (or write it in the file)"
        )
    return base_url, None


def check_serving_unchanged(
    path: Path, header: RunHeader, serving: ServingRecord, plan: Plan
) -> None:
    """Refuse a resumed session whose serving differs from the first session's on pin N10
    (servingpin.compare_serving), in one line naming each field; writes nothing."""
    decoding = plan.preregistration.model_dump(mode="json")["decoding"]
    change = compare_serving(session_facts(header)[0], serving_facts(serving, decoding))
    if not change.held:
        raise RunFolderError(
            f"{path} was served otherwise in session 0 ({change.describe()}): serve the model as "
            "session 0 was served, or pass --accept-serving-change to go on (the card then lists "
            "every session's serving and says its figures pool several servings)"
        )
