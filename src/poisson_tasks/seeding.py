"""Whether a run sends each attempt a sampling seed, and what the server does with one.

`decoding.seed: derived` sends each attempt its own `seed` (runner.endpoint.derived_seed); without
it no seed is sent and a server that samples draws afresh on every request. Which servers take a
seed is a field of each provider (providers/), read here by `validate` (which says when a server that takes one would get
none) and by the card's Reproducibility section (which says what the run and its replay sent).
"""

from __future__ import annotations

from poisson_tasks.providers import PROVIDERS, UNKNOWN_SEED_USE

__all__ = ["SEED_TAKERS", "SEED_USE", "replay_seed_phrase", "validate_seed_line"]

# What each provider's server does with a request's `seed` (docs/commands.md, Seeds), and the
# providers whose servers sample from a seed they are sent and nothing else of the request's
# (without one, every sampled reply is a fresh draw): both from the provider registry.
SEED_USE: dict[str, str] = {name: p.seed_use for name, p in PROVIDERS.items()}
SEED_TAKERS: frozenset[str] = frozenset(name for name, p in PROVIDERS.items() if p.takes_seed)


def _use(provider: str | None) -> str:
    return SEED_USE.get(provider or "", UNKNOWN_SEED_USE)


def validate_seed_line(provider: str, derived: bool) -> str:
    """validate's `seed` line: what is sent, and the fix when a server that takes a seed gets
    none."""
    if derived:
        return f"each attempt's own (decoding.seed: derived); {_use(provider)}"
    if provider in SEED_TAKERS:
        return (
            f"none sent, although {_use(provider)}: each sampled reply is a fresh draw, so a "
            "replay cannot repeat one; write decoding.seed: derived to send each attempt its own"
        )
    return f"none sent (decoding.seed is not declared); {_use(provider)}"


def replay_seed_phrase(provider: str | None, derived: bool) -> str:
    """What the run and its replay sent as seeds, for the Reproducibility section's first line."""
    if derived:
        return f"the per-attempt seeds the run sent (decoding.seed: derived; {_use(provider)})"
    if provider == "reference":  # the user tag fixes an attempt's draws
        return f"no seed, as the run sent none ({_use(provider)})"
    return (
        "no seed, as the run sent none (its decoding declares no seed: derived), so each sampled "
        f"reply was a fresh draw ({_use(provider)})"
    )
