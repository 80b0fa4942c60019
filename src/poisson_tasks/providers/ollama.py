"""Ollama: served by the user at a base URL it names; its model digest confirms the revision."""

from poisson_tasks.providers.provider import ProviderDef

PROVIDER = ProviderDef(
    name="ollama",
    kind="self-served",
    base_url_required=True,
    revision_required=True,
    seed_use="Ollama samples from it",
    takes_seed=True,
)
