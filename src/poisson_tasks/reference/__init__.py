"""The project's own reference endpoint: scripted policies behind an OpenAI-compatible HTTP server.

A reference policy reads a request the way an agent would (the prompt's words, the tools'
descriptions, the tool answers in the conversation); it never sees a generator or a bundle. Its
figures are baselines for testing and benchmarking the instrument, never a model's figures.
"""

from __future__ import annotations

from poisson_tasks.policycatalogue import POLICY_NAMES, PolicySpec, parse_model
from poisson_tasks.reference.expected import (
    NoisyRates,
    graded_expected,
    noisy_expected,
    noisy_rates,
)
from poisson_tasks.reference.flaky import flaky_fault
from poisson_tasks.reference.policies import ChatRequest, PolicyReply, respond
from poisson_tasks.reference.ratelimit import LimitChange, RateLimit
from poisson_tasks.reference.server import ReferenceServer, serve_reference, start_reference_server

__all__ = [
    "POLICY_NAMES",
    "ChatRequest",
    "LimitChange",
    "NoisyRates",
    "PolicyReply",
    "PolicySpec",
    "RateLimit",
    "ReferenceServer",
    "flaky_fault",
    "graded_expected",
    "noisy_expected",
    "noisy_rates",
    "parse_model",
    "respond",
    "serve_reference",
    "start_reference_server",
]
