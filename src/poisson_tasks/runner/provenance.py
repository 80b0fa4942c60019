"""What a run records about where it ran: the serving the endpoint reports and package versions.

Reading the serving details is also the preflight: an endpoint that cannot be reached, refuses the
key or does not serve the model stops the run before its folder is touched.
"""

from __future__ import annotations

import platform
from importlib import metadata
from typing import Any

import httpx2

from poisson_tasks import __version__
from poisson_tasks.errors import EndpointError
from poisson_tasks.prereg import Serving
from poisson_tasks.runner.endpoint import redact

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


def _root(base_url: str) -> str:
    """The server root under an OpenAI-style /v1 base URL."""
    return base_url[: -len("/v1")] if base_url.endswith("/v1") else base_url


async def _get(client: httpx2.AsyncClient, url: str, key: str | None) -> Any:
    try:
        resp = await client.get(url)
    except httpx2.HTTPError as exc:
        reason = redact(str(exc) or type(exc).__name__, key)
        raise EndpointError(
            f"cannot reach {url} ({reason}): start the server or fix model.base_url"
        ) from None
    if resp.status_code in (401, 403):
        raise EndpointError(
            f"{url} refused the API key ({resp.status_code}): check the variable "
            "model.api_key_env names and its value"
        )
    if resp.status_code == 404:
        return None
    if resp.status_code >= 400:
        raise EndpointError(f"{url} answered HTTP {resp.status_code}: check the server")
    try:
        return resp.json()
    except ValueError:
        return resp.text[:2000]


async def serving_details(serving: Serving, base_url: str, api_key: str | None) -> dict[str, Any]:
    """What the endpoint says about itself; raises EndpointError when it cannot serve this run.

    vLLM: GET /version and /v1/models; Ollama: GET /api/version and /v1/models; the reference
    endpoint: GET /health and /v1/models; OpenAI: GET /v1/models/<model>.
    """
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    root = _root(base_url)
    details: dict[str, Any] = {}
    async with httpx2.AsyncClient(timeout=_PREFLIGHT_TIMEOUT_S, headers=headers) as client:
        if serving.provider == "vllm":
            details["version"] = await _get(client, f"{root}/version", api_key)
        elif serving.provider == "ollama":
            details["version"] = await _get(client, f"{root}/api/version", api_key)
        elif serving.provider == "reference":
            details["health"] = await _get(client, f"{root}/health", api_key)
        if serving.provider == "openai":
            entry = await _get(client, f"{base_url}/models/{serving.model}", api_key)
            if entry is None:
                raise EndpointError(
                    f"{base_url} does not serve model {serving.model!r}: fix model.model"
                )
            details["model"] = entry
        else:
            listing = await _get(client, f"{base_url}/models", api_key)
            details["models"] = listing
            ids = _model_ids(listing)
            if serving.provider != "reference" and ids and serving.model not in ids:
                raise EndpointError(
                    f"{base_url} does not serve model {serving.model!r} (it serves "
                    f"{', '.join(sorted(ids)[:8])}): fix model.model"
                )
    return {
        "provider": serving.provider,
        "base_url": base_url,
        "model": serving.model,
        "revision": serving.revision,
        "details": details,
    }


def _model_ids(listing: Any) -> set[str]:
    data = listing.get("data") if isinstance(listing, dict) else None
    if not isinstance(data, list):
        return set()
    return {d["id"] for d in data if isinstance(d, dict) and isinstance(d.get("id"), str)}
