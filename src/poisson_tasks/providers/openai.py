"""OpenAI's API: its own base URL by default, a key in the environment, the weights not the user's."""

from poisson_tasks.providers.provider import ProviderDef

PROVIDER = ProviderDef(
    name="openai",
    kind="api",
    default_base_url="https://api.openai.com/v1",
    key_required=True,
    seed_use="OpenAI takes it as best effort only",
)
