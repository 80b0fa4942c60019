"""Any other OpenAI-compatible server the user runs: a base URL is needed, its revision is recorded
as declared, and what it does with a seed is not known."""

from poisson_tasks.providers.provider import ProviderDef

PROVIDER = ProviderDef(name="openai-compatible", kind="self-served", base_url_required=True)
