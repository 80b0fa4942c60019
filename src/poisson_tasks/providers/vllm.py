"""vLLM: served by the user at a base URL it names; its model root confirms the declared revision."""

from poisson_tasks.providers.provider import ProviderDef

PROVIDER = ProviderDef(
    name="vllm",
    kind="self-served",
    base_url_required=True,
    revision_required=True,
    seed_use="vLLM samples from it",
    takes_seed=True,
)
