"""The model providers, registered once: a pre-registration's `model.provider`, the runner's
preflight and the card's account of the serving all read `PROVIDERS` (docs/architecture.md, "How
to add a provider")."""

from __future__ import annotations

from typing import Literal, get_args

from poisson_tasks.providers import llamacpp, ollama, openai, openaicompatible, reference, vllm
from poisson_tasks.providers.provider import UNKNOWN_SEED_USE, ProviderDef, ServingKind

__all__ = [
    "PROVIDERS",
    "UNKNOWN_SEED_USE",
    "Provider",
    "ProviderDef",
    "ServingKind",
    "provider_def",
]

# The names a pre-registration may write, in the order its messages list them; a literal so that
# pydantic and mypy check it, held to the registry below when the package is imported.
Provider = Literal["openai", "vllm", "ollama", "llamacpp", "openai-compatible", "reference"]

PROVIDERS: dict[str, ProviderDef] = {
    module.PROVIDER.name: module.PROVIDER
    for module in (openai, vllm, ollama, llamacpp, openaicompatible, reference)
}
if tuple(PROVIDERS) != get_args(Provider):
    raise RuntimeError(f"providers: the Provider literal {get_args(Provider)} is not the registry")


def provider_def(name: str | None) -> ProviderDef | None:
    """The registered provider of that name (a run folder may name one this build does not know)."""
    return PROVIDERS.get(name or "")
