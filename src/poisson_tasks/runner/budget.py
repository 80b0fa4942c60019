"""The run's limits: tokens and dollars over the whole folder, wall-clock per session.

A token or dollar cap stops new episodes from starting; episodes already in flight finish and are
kept (they are being paid for), so a run can pass a cap by what its in-flight episodes spend. The
wall-clock cap is hard: at the deadline in-flight episodes are cut off and recorded as abandoned.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from poisson_tasks.prereg import Budget, Rates
from poisson_tasks.runfolder import StopReason, Usage

_MILLION = 1_000_000


def dollars_of(prompt: int, cached: int, completion: int, rates: Rates) -> float:
    """Tokens times the declared rates (uncached input, cached input, completion)."""
    return (
        prompt * rates.input + cached * rates.cached_input + completion * rates.output
    ) / _MILLION


@dataclass(slots=True)
class Spend:
    """Tokens and dollars spent so far over the whole folder."""

    prompt: int = 0
    cached: int = 0
    completion: int = 0
    provider_cost: float = 0.0

    @property
    def tokens(self) -> int:
        return self.prompt + self.cached + self.completion

    def add(self, usage: Usage) -> None:
        self.prompt += usage.uncached_input_tokens or 0
        self.cached += usage.cached_input_tokens or 0
        self.completion += usage.completion_tokens or 0
        self.provider_cost += usage.provider_cost_usd or 0.0

    def dollars(self, rates: Rates | None) -> float | None:
        """Spend at the declared rates; the provider's own figure where no rates were declared."""
        if rates is not None:
            return dollars_of(self.prompt, self.cached, self.completion, rates)
        return self.provider_cost if self.provider_cost > 0 else None


class Limits:
    """Decides when the run stops."""

    def __init__(self, budget: Budget, rates: Rates | None, spend: Spend) -> None:
        self.budget = budget
        self.rates = rates
        self.spend = spend
        self.started = time.monotonic()
        self.deadline = self.started + budget.wall_clock_s

    def seconds_left(self) -> float:
        return self.deadline - time.monotonic()

    def exhausted(self) -> StopReason | None:
        """The first limit reached, or None."""
        if self.spend.tokens >= self.budget.tokens:
            return "token_budget"
        if self.budget.dollars is not None:
            spent = self.spend.dollars(self.rates)
            if spent is not None and spent >= self.budget.dollars:
                return "dollar_budget"
        if self.seconds_left() <= 0:
            return "wall_clock"
        return None
