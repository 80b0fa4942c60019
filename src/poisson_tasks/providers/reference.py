"""This package's reference policies (`poisson-tasks reference-endpoint`): no weights at all."""

from poisson_tasks.providers.provider import ProviderDef

PROVIDER = ProviderDef(
    name="reference",
    kind="reference",
    seed_use="the reference policies draw from it and from the user tag the runner sends "
    "with every request, so an attempt's draws repeat with or without it",
)
