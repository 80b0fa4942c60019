"""What a run records about where it ran: the serving the endpoint reports and package versions.

Reading the serving details is also the preflight: an endpoint that cannot be reached, refuses the
key or does not serve the model stops the run before its folder is touched. What is recorded is
measured where the server exposes it, never copied from the declaration:

- vllm: GET /version and /v1/models must both answer (a 404 means "this is not a vLLM server");
  the served model's `root` and `max_model_len` are recorded, and /server_info (vLLM's dev-mode
  route, with the engine's arguments) when it answers.
- ollama: the base URL must end in /v1 (Ollama's OpenAI-compatible API); GET /api/version, POST
  /api/show (quantisation, family, context length) and GET /api/tags (the model's digest).
- llamacpp: GET /props must answer; the served file's sha256 is computed when it is local.
- openai-compatible: llama.cpp's GET /props (n_ctx) when it answers.
- One preflight per registered provider (`_PREFLIGHTS`, keyed by providers.PROVIDERS' names).
- A declared revision the server contradicts (Ollama's digest, a Hugging Face snapshot hash in
  vLLM's `root`) refuses the run; one the server cannot confirm is recorded as "declared, not
  verified". GPU facts come from a sidecar JSON file named by POISSON_SERVING_SIDECAR (written by
  the serving container, e.g. from nvidia-smi), when set.
"""

from __future__ import annotations

import json
import os
import platform
import re
from collections.abc import Callable, Coroutine
from importlib import metadata
from pathlib import Path
from typing import Any

import httpx2

from poisson_tasks import __version__, boundedjson
from poisson_tasks.credentials import redact, scrub
from poisson_tasks.errors import EndpointError
from poisson_tasks.local.facts import llamacpp_facts
from poisson_tasks.prereg import Serving
from poisson_tasks.providers import PROVIDERS
from poisson_tasks.runfolder import ServingRecord
from poisson_tasks.runner.received import ACCEPT_IDENTITY, BodyRefused, limit_body
from poisson_tasks.servingpin import (
    RAW_ANSWER_BYTES,
    bounded_answer,
    context_window,
    readable_version,
    revisions_agree,
)

_PACKAGES = (
    "openai",
    "httpx2",
    "httpx",
    "pydantic",
    "numpy",
    "scipy",
    "rich",
    "orjson",
    "bpe-openai",
    "typer",
    "pyyaml",
    "uvicorn",
    "starlette",
    "verifiers",
)
_PREFLIGHT_TIMEOUT_S = 20.0


def package_versions() -> dict[str, str]:
    """Python and the packages a run's figures pass through."""
    out = {"python": platform.python_version(), "poisson-tasks": __version__}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


SIDECAR_ENV = "POISSON_SERVING_SIDECAR"
_SNAPSHOT = re.compile(r"/snapshots/([0-9a-f]{7,40})(?:/|$)")
NOT_VERIFIED = "declared, not verified"


def _root(base_url: str) -> str:
    """The server root under an OpenAI-style /v1 base URL."""
    return base_url[: -len("/v1")] if base_url.endswith("/v1") else base_url


async def _get(
    client: httpx2.AsyncClient,
    url: str,
    key: str | None,
    *,
    method: str = "GET",
    body: Any = None,
    required: str | None = None,
) -> Any:
    """The JSON (or text) a route answers; None on a 404 or 405 unless `required` says why the
    route must answer (then one line naming it). An answer the runner does not read (longer than
    received.MAX_BODY_BYTES, encoded, or JSON nested deeper than boundedjson.MAX_DEPTH) is
    recorded as what made it unreadable, and refuses the run where the route is required."""
    try:
        resp = await client.request(method, url, json=body)
    except BodyRefused as exc:
        if _absent(url, key, exc.status, required):
            return None
        return _unreadable(url, key, exc.reason, required)
    except httpx2.HTTPError as exc:
        reason = redact(str(exc) or type(exc).__name__, key)
        raise EndpointError(
            f"cannot reach {redact(url, key)} ({reason}): start the server or fix model.base_url"
        ) from None
    if _absent(url, key, resp.status_code, required):
        return None
    # where a serving fact enters: the key is redacted from every string of the answer
    try:
        return scrub(boundedjson.loads(resp.content), key)
    except boundedjson.TooDeep as exc:
        return _unreadable(url, key, str(exc), required)
    except ValueError:
        return redact(resp.text[:RAW_ANSWER_BYTES], key)


def _absent(url: str, key: str | None, status: int, required: str | None) -> bool:
    """Whether a route's status says it is not there (404, 405) and may be; a refused key, a
    required route that is not there and any other error status refuse the run in one line."""
    if status in (401, 403):
        raise EndpointError(
            f"{redact(url, key)} refused the API key ({status}): check the variable "
            "model.api_key_env names and its value"
        )
    if status in (404, 405):
        if required is not None:
            raise EndpointError(f"{redact(url, key)} answered HTTP {status}: {required}")
        return True
    if status >= 400:
        raise EndpointError(f"{redact(url, key)} answered HTTP {status}: check the server")
    return False


def _unreadable(url: str, key: str | None, reason: str, required: str | None) -> str:
    """An answer the runner did not read, as recorded: what made it unreadable. Where the route
    is required, the run is refused in one line instead."""
    if required is not None:
        raise EndpointError(f"{redact(url, key)} answered {reason}: {required}")
    return f"unreadable: {reason}"


def _entry(listing: Any, model: str) -> dict[str, Any] | None:
    data = listing.get("data") if isinstance(listing, dict) else None
    if not isinstance(data, list):
        return None
    for entry in data:
        if isinstance(entry, dict) and entry.get("id") == model:
            return entry
    return None


def _read_sidecar() -> dict[str, Any]:
    """GPU and server facts the serving container wrote (POISSON_SERVING_SIDECAR), or {}."""
    path = os.environ.get(SIDECAR_ENV)
    if not path:
        return {}
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EndpointError(
            f"{SIDECAR_ENV}={path} cannot be read as JSON ({type(exc).__name__}): fix or unset it"
        ) from None
    if not isinstance(data, dict):
        raise EndpointError(f"{SIDECAR_ENV}={path} must hold a JSON object")
    return data


def _gpu(sidecar: dict[str, Any]) -> str | None:
    gpu = sidecar.get("gpu")
    if isinstance(gpu, str):
        return gpu
    if isinstance(gpu, dict):
        name, driver = gpu.get("name"), gpu.get("driver")
        return (
            ", ".join(
                x for x in (str(name) if name else "", f"driver {driver}" if driver else "") if x
            )
            or None
        )
    return None


def _check_revision(declared: str | None, measured: str | None, where: str) -> str | None:
    """The revision as recorded: the measured one when it confirms the declared one, the declared
    one marked "declared, not verified" when nothing was measured; a contradiction refuses."""
    if declared is None:
        return measured
    if measured is None:
        return f"{declared} ({NOT_VERIFIED})"
    if not revisions_agree(declared, measured):
        raise EndpointError(
            f"model.revision is {declared!r} but {where} reports {measured!r}: the server serves "
            "other weights; fix model.revision or serve the declared revision"
        )
    return f"{measured} (verified: {where})"


async def _vllm(
    client: httpx2.AsyncClient, serving: Serving, base_url: str, key: str | None
) -> dict[str, Any]:
    root = _root(base_url)
    fix = "this is not a vLLM server (vLLM answers /version and /v1/models); fix model.provider"
    version = await _get(client, f"{root}/version", key, required=fix)
    listing = await _get(client, f"{base_url}/models", key, required=fix)
    entry = _entry(listing, serving.model)
    if entry is None:
        raise EndpointError(
            f"{base_url} does not serve model {serving.model!r} (it serves "
            f"{_listed(listing)}): fix model.model"
        )
    info = await _get(client, f"{root}/server_info", key)
    root_path = entry.get("root")
    snap = _SNAPSHOT.search(root_path) if isinstance(root_path, str) else None
    out: dict[str, Any] = {
        "stack": "vllm",
        "stack_version": readable_version(version.get("version"))
        if isinstance(version, dict)
        else None,
        "served_root": root_path if isinstance(root_path, str) else None,
        "context_window": context_window(entry.get("max_model_len")),
        "weights_revision": _check_revision(
            serving.revision, snap.group(1) if snap else None, "vLLM's model root"
        ),
        "details": {"version": version, "models": listing, "server_info": info},
    }
    if isinstance(info, dict):
        args = info.get("vllm_config") or info.get("args")
        if args is not None:
            out["flags"] = [str(args)[:2000]]
    return out


async def _ollama(
    client: httpx2.AsyncClient, serving: Serving, base_url: str, key: str | None
) -> dict[str, Any]:
    if not base_url.endswith("/v1"):
        raise EndpointError(
            f"model.base_url {redact(base_url, key)} is not Ollama's OpenAI-compatible API, which "
            "is under /v1: write e.g. http://127.0.0.1:11434/v1"
        )
    root = _root(base_url)
    fix = "this is not an Ollama server (Ollama answers /api/version); fix model.provider"
    version = await _get(client, f"{root}/api/version", key, required=fix)
    show = await _get(client, f"{root}/api/show", key, method="POST", body={"model": serving.model})
    if show is None:
        raise EndpointError(
            f"Ollama at {root} has no model {serving.model!r} (/api/show): `ollama pull` it or "
            "fix model.model"
        )
    tags = await _get(client, f"{root}/api/tags", key)
    digest = None
    for listed in tags.get("models", []) if isinstance(tags, dict) else []:
        if isinstance(listed, dict) and serving.model in (listed.get("name"), listed.get("model")):
            digest = listed.get("digest") if isinstance(listed.get("digest"), str) else None
    details = show.get("details") if isinstance(show, dict) else None
    info = show.get("model_info") if isinstance(show, dict) else None
    window = None
    if isinstance(info, dict):
        window = next(
            (v for k, v in info.items() if k.endswith(".context_length") and isinstance(v, int)),
            None,
        )
    params = show.get("parameters") if isinstance(show, dict) else None
    return {
        "stack": "ollama",
        "stack_version": readable_version(version.get("version"))
        if isinstance(version, dict)
        else None,
        "context_window": context_window(window),
        "quantization": readable_version(details.get("quantization_level"))
        if isinstance(details, dict)
        else None,
        "flags": [str(params)[:2000]] if params else [],
        "weights_revision": _check_revision(serving.revision, digest, "Ollama's model digest"),
        "details": {"version": version, "show": {"details": details}, "digest": digest},
    }


async def _llamacpp(
    client: httpx2.AsyncClient, serving: Serving, base_url: str, key: str | None
) -> dict[str, Any]:
    """llama.cpp: GET /props must answer; the served file's sha256 is computed when it is local."""
    root = _root(base_url)
    props = await _get(client, f"{root}/props", key)
    if not isinstance(props, dict):
        raise EndpointError(
            f"{root}/props did not answer with JSON: this is not a llama.cpp server (serve-local "
            "and llama-server answer GET /props); fix model.provider or model.base_url"
        )
    listing = await _get(client, f"{base_url}/models", key)
    if _entry(listing, serving.model) is None:
        raise EndpointError(
            f"{base_url} does not serve model {serving.model!r} (it serves "
            f"{_listed(listing)}): fix model.model, or "
            "serve-local --alias"
        )
    facts = llamacpp_facts(props, listing, base_url)
    measured = f"sha256:{facts.model_sha256}" if facts.model_sha256 else None
    where = f"the served file {facts.model_file} (its sha256, computed by the runner)"
    revision = _check_revision(serving.revision, measured, where)
    return {
        "stack": "llama.cpp",
        "stack_version": readable_version(facts.build),
        "context_window": context_window(facts.n_ctx),
        "quantization": facts.quantization,
        "weights_revision": revision,
        "llamacpp": facts.model_dump(mode="json"),
        "details": {"props": props, "models": listing},
    }


async def _openai(
    client: httpx2.AsyncClient, serving: Serving, base_url: str, key: str | None
) -> dict[str, Any]:
    """OpenAI: GET /models/MODEL must answer."""
    entry = await _get(client, f"{base_url}/models/{serving.model}", key)
    if entry is None:
        raise EndpointError(f"{base_url} does not serve model {serving.model!r}: fix model.model")
    return {"details": {"model": entry}}


async def _reference(
    client: httpx2.AsyncClient, serving: Serving, base_url: str, key: str | None
) -> dict[str, Any]:
    """The reference endpoint: its /health and /models, recorded (it serves every policy)."""
    health = await _get(client, f"{_root(base_url)}/health", key)
    return {"details": {"health": health, "models": await _get(client, f"{base_url}/models", key)}}


async def _openai_compatible(
    client: httpx2.AsyncClient, serving: Serving, base_url: str, key: str | None
) -> dict[str, Any]:
    """Another OpenAI-compatible server: the model must be listed when /models lists any; llama.cpp's
    GET /props (n_ctx) when it answers; a declared revision is recorded as not verified."""
    listing = await _get(client, f"{base_url}/models", key)
    ids = _model_ids(listing)
    if ids and serving.model not in ids:
        raise EndpointError(
            f"{base_url} does not serve model {serving.model!r} (it serves "
            f"{_listed(listing)}): fix model.model"
        )
    out: dict[str, Any] = {}
    details: dict[str, Any] = {"models": listing}
    props = await _get(client, f"{_root(base_url)}/props", key)
    if isinstance(props, dict):
        gen = props.get("default_generation_settings")
        n_ctx = gen.get("n_ctx") if isinstance(gen, dict) else props.get("n_ctx")
        out["context_window"] = context_window(n_ctx)
        details["props"] = {"n_ctx": n_ctx, "build_info": props.get("build_info")}
    if serving.revision is not None:
        out["weights_revision"] = f"{serving.revision} ({NOT_VERIFIED})"
    return {**out, "details": details}


Preflight = Callable[
    [httpx2.AsyncClient, Serving, str, str | None], Coroutine[Any, Any, dict[str, Any]]
]
# Each registered provider's preflight (providers/): what its server says about itself, with the
# raw answers under "details"; it raises EndpointError when the server cannot serve the run.
_PREFLIGHTS: dict[str, Preflight] = {
    "openai": _openai,
    "vllm": _vllm,
    "ollama": _ollama,
    "llamacpp": _llamacpp,
    "openai-compatible": _openai_compatible,
    "reference": _reference,
}
if set(_PREFLIGHTS) != set(PROVIDERS):
    raise RuntimeError(f"runner.provenance: no preflight for {set(PROVIDERS) - set(_PREFLIGHTS)}")


async def serving_details(
    serving: Serving, base_url: str, api_key: str | None, *, in_process: bool = False
) -> ServingRecord:
    """What the endpoint says about itself, as recorded (the key redacted from every string;
    `in_process`: the reference server this run started); raises EndpointError when it cannot
    serve this run."""
    headers = {**ACCEPT_IDENTITY, **({"Authorization": f"Bearer {api_key}"} if api_key else {})}
    sidecar = _read_sidecar()
    async with httpx2.AsyncClient(
        timeout=_PREFLIGHT_TIMEOUT_S, headers=headers, event_hooks={"response": [limit_body]}
    ) as client:
        extra = await _PREFLIGHTS[serving.provider](client, serving, base_url, api_key)
        details = extra.pop("details")
    gpu = _gpu(sidecar)
    if gpu is not None:
        extra["gpu"] = gpu
    named = sidecar.get("model")
    if isinstance(named, str) and named != serving.model:
        raise EndpointError(
            f"{SIDECAR_ENV} names a server for {named!r}, the run asks for {serving.model!r}: "
            "fix model.model, or point the variable at this server's serving-facts file"
        )
    flags = sidecar.get("flags")  # docker/serving_facts.py: the flags the server was started with
    if (
        not extra.get("flags")
        and isinstance(flags, list)
        and all(isinstance(f, str) for f in flags)
    ):
        extra["flags"] = flags
    if sidecar:
        details["sidecar"] = sidecar
    # every raw answer kept once, each at most RAW_ANSWER_BYTES of JSON
    details = {name: bounded_answer(answer) for name, answer in details.items()}
    recorded = {
        "provider": serving.provider,
        "base_url": base_url,
        "model": serving.model,
        "revision": serving.revision,
        **{k: v for k, v in extra.items() if v is not None},
        "details": details,
        **({"in_process": True} if in_process else {}),
    }
    return ServingRecord.model_validate(scrub(recorded, api_key))


def _model_ids(listing: Any) -> set[str]:
    data = listing.get("data") if isinstance(listing, dict) else None
    if not isinstance(data, list):
        return set()
    return {d["id"] for d in data if isinstance(d, dict) and isinstance(d.get("id"), str)}


def _listed(listing: Any) -> str:
    """The first 8 model ids a listing names, each cut to 60 characters, for a message."""
    ids = sorted(_model_ids(listing))[:8]
    return ", ".join(i if len(i) <= 60 else i[:59] + "…" for i in ids) or "nothing"
