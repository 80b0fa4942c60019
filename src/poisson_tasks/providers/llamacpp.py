"""llama.cpp's server (serve-local, llama-server): self-served; the runner hashes the served file,
so a revision is checked when given and measured when not."""

from poisson_tasks.providers.provider import ProviderDef

PROVIDER = ProviderDef(
    name="llamacpp",
    kind="self-served",
    seed_use="llama.cpp's server samples from it",
    takes_seed=True,
)
