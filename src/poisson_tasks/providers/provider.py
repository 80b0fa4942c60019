"""What one model provider is: how it is reached, what a pre-registration must name for it, and
who serves its weights. One `ProviderDef` per provider, in a module of its own beside this one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

ServingKind = Literal["api", "self-served", "reference"]
UNKNOWN_SEED_USE = "whether this server samples from it is not known"


@dataclass(frozen=True)
class ProviderDef:
    """One provider's facts, read by the pre-registration's checks, the runner and the card.

    Two facts that sound alike are kept apart: `kind == "self-served"` says the user serves the
    weights (the card's `served: self-served`), `revision_required` says a pre-registration must
    name those weights' revision because the provider's own listing can confirm it (a Hugging Face
    commit, an Ollama digest). llama.cpp is self-served without a required revision: the runner
    hashes the served file itself.
    """

    name: str
    kind: ServingKind
    default_base_url: str | None = None
    base_url_required: bool = False
    revision_required: bool = False
    key_required: bool = False
    key_example: str = "OPENAI_API_KEY"
    seed_use: str = UNKNOWN_SEED_USE
    takes_seed: bool = False

    @property
    def self_served(self) -> bool:
        """The user serves the weights (vLLM, Ollama, llama.cpp, any OpenAI-compatible server)."""
        return self.kind == "self-served"
