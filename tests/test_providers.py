"""The provider registry: each provider's facts written once, and what the checks, the runner and
the card read from it agree with docs/commands.md and docs/local-model.md."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from poisson_tasks.errors import PreregistrationError
from poisson_tasks.prereg import PROVIDERS, validate_preregistration
from poisson_tasks.providers import PROVIDERS as REGISTRY
from poisson_tasks.runner import provenance as runner_provenance
from poisson_tasks.seeding import SEED_TAKERS

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _doc(provider: str, **model: Any) -> dict[str, Any]:
    return {
        "format": "poisson-tasks/preregistration@1",
        "name": "providers",
        "model": {"provider": provider, "model": "m", **model},
        "decoding": {
            "temperature": 0.0,
            "top_p": 1.0,
            "reasoning_effort": None,
            "max_completion_tokens": 64,
        },
        "design": {
            "arms": ["depth:d1"],
            "tasks": 2,
            "attempts": 1,
            "seed_string": "range",
            "slack": 2,
            "horizon": 4,
        },
        "budget": {"tokens": 1000, "wall_clock_s": 60},
    }


def test_the_self_served_providers_and_those_that_must_name_a_revision_are_two_facts() -> None:
    self_served = {name for name, p in REGISTRY.items() if p.self_served}
    assert self_served == {"vllm", "ollama", "llamacpp", "openai-compatible"}
    assert {name for name, p in REGISTRY.items() if p.revision_required} == {"vllm", "ollama"}
    # docs/commands.md's example pre-registration says which providers need a revision
    assert "required for vllm and ollama" in (DOCS / "commands.md").read_text()
    # docs/local-model.md: llama.cpp's revision is optional, checked by the run
    assert (
        "optional: the GGUF's sha256, checked by the run" in (DOCS / "local-model.md").read_text()
    )


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_validate_asks_each_provider_for_what_its_registry_entry_requires(name: str) -> None:
    provider = REGISTRY[name]
    model = "noisy" if name == "reference" else "m"
    bare = _doc(name)
    bare["model"]["model"] = model
    try:
        validate_preregistration(bare)
        problems: list[str] = []
    except PreregistrationError as exc:
        problems = list(exc.problems)
    assert any(p.startswith("model.revision: required") for p in problems) == (
        provider.revision_required
    )
    assert any(p.startswith("model.base_url: required") for p in problems) == (
        provider.base_url_required
    )
    assert any(p.startswith("model.api_key_env: required") for p in problems) == (
        provider.key_required
    )


def test_every_registered_provider_has_a_preflight_and_the_names_agree() -> None:
    assert tuple(REGISTRY) == PROVIDERS
    assert set(runner_provenance._PREFLIGHTS) == set(REGISTRY)
    assert {name for name, p in REGISTRY.items() if p.takes_seed} == SEED_TAKERS
