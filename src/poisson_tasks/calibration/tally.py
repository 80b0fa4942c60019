"""Running tallies: what a card's figures need from its episodes, gathered one episode at a time.

A card is computed from these, not from a list of records, so reading a run folder keeps no
episode in memory: per cell, counts, per-seed successes, and the handful of per-episode numbers
that medians and percentiles need (eight bytes each); per run, the token and dollar totals and
what the responses showed about the serving. Every sum is taken in file order, as a list's sum
would be, so the figures are the same to the last bit whichever way the episodes arrive.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterable, Sequence

from poisson_tasks.calibration.records import EpisodeRow

UNNAMED_DIALECT = "not named"  # a text call whose harness recorded no dialect

__all__ = ["UNNAMED_DIALECT", "CellTally", "RunTally", "TotalsTally"]


def _clause(clause: int | None) -> str:
    """A malformed_call episode's clause as card.json keys it ("1".."4"; "unknown" if none)."""
    return "unknown" if clause is None else str(clause)


class TotalsTally:
    """Token totals and reported dollars over every episode line (scored and instrument alike)."""

    __slots__ = ("cached", "completion", "costs", "episodes", "prompt", "reasoning")

    def __init__(self) -> None:
        self.episodes = 0
        self.prompt: int | None = None
        self.cached: int | None = None
        self.completion: int | None = None
        self.reasoning: int | None = None
        self.costs = array("d")  # provider-reported USD, in file order (summed at the end)

    def add(self, row: EpisodeRow) -> None:
        self.episodes += 1
        value = row.uncached_input_tokens
        if value is not None:
            self.prompt = value if self.prompt is None else self.prompt + value
        value = row.cached_input_tokens
        if value is not None:
            self.cached = value if self.cached is None else self.cached + value
        value = row.completion_tokens
        if value is not None:
            self.completion = value if self.completion is None else self.completion + value
        value = row.reasoning_tokens
        if value is not None:
            self.reasoning = value if self.reasoning is None else self.reasoning + value
        if row.provider_cost_usd is not None:
            self.costs.append(row.provider_cost_usd)


class CellTally:
    """One arm's episodes: counts, per-seed successes in the plan's seed order, and the scored
    episodes' calls, tokens and seconds (those present) for its medians and percentiles."""

    def __init__(self, seed_index: dict[int, int], seeds: int, attempts: int) -> None:
        self._seed_index = seed_index
        self._attempts = attempts
        self.totals = TotalsTally()
        self.failed: Counter[str] = Counter()  # instrument failures by outcome
        self.outcomes: Counter[str] = Counter()  # scored episodes by outcome
        self.resumed = 0
        self.scored = 0
        self.overshoot = 0
        self.no_tool_call = 0
        self.no_call_text = 0  # no-call episodes whose model wrote a call as text
        self.no_call_dialects: Counter[str] = Counter()  # those text calls, by dialect
        self.malformed_clauses: Counter[str] = Counter()  # malformed_call episodes, by clause
        self.stopped_short = 0
        self.strict = array("q", bytes(8 * seeds))
        self.leaky = array("q", bytes(8 * seeds))
        self.attempts = array("q", bytes(8 * seeds))
        self._seen = bytearray(seeds * attempts)  # (seed, attempt) slots with any line
        self._seen_elsewhere: set[tuple[int, int]] = set()  # attempts outside the plan's range
        self.seen = 0
        self.model_calls = array("d")
        self.tool_calls = array("d")
        self.tokens = array("d")
        self.episode_s = array("d")
        self.model_s = array("d")
        self.harness_s = array("d")
        self.setup_s = array("d")

    def add(self, row: EpisodeRow, tokens: int | None) -> None:
        """Count one episode of this arm (`tokens`: row.tokens, computed once by the caller)."""
        self.totals.add(row)
        slot = self._seed_index[row.seed]
        attempt = row.attempt
        if 0 <= attempt < self._attempts:
            where = slot * self._attempts + attempt
            if not self._seen[where]:
                self._seen[where] = 1
                self.seen += 1
        elif (row.seed, attempt) not in self._seen_elsewhere:
            self._seen_elsewhere.add((row.seed, attempt))
            self.seen += 1
        if row.resumed:
            self.resumed += 1
        if row.instrument:
            self.failed[row.outcome] += 1
            return
        self.scored += 1
        self.outcomes[row.outcome] += 1
        self.attempts[slot] += 1
        if row.strict_pass:
            self.strict[slot] += 1
        if row.leaky_pass:
            self.leaky[slot] += 1
        if row.overshoot:
            self.overshoot += 1
        if row.outcome == "malformed_call":
            self.malformed_clauses[_clause(row.malformed_clause)] += 1
        tool_calls = row.tool_calls
        if tool_calls == 0:
            self.no_tool_call += 1
            if row.text_calls:
                self.no_call_text += 1
                named = row.text_call_dialects
                self.no_call_dialects.update(named or [UNNAMED_DIALECT] * row.text_calls)
        elif 0 < tool_calls < row.min_calls:
            self.stopped_short += 1
        self.model_calls.append(row.model_calls)
        self.tool_calls.append(tool_calls)
        if tokens is not None:
            self.tokens.append(tokens)
        if row.episode_s is not None:
            self.episode_s.append(row.episode_s)
        if row.model_s is not None:
            self.model_s.append(row.model_s)
        if row.harness_s is not None:
            self.harness_s.append(row.harness_s)
        if row.setup_s is not None:
            self.setup_s.append(row.setup_s)


class RunTally:
    """Every cell of a run's plan, the run's totals, and (for a model card) what the responses
    showed about the serving: fingerprints, estimated tokens and context overflows."""

    def __init__(self, arms: Iterable[str], seeds: Sequence[int], attempts: int) -> None:
        seed_index = {seed: index for index, seed in enumerate(seeds)}
        self.cells = {arm: CellTally(seed_index, len(seeds), attempts) for arm in arms}
        self.costs = array("d")  # provider-reported USD over the whole run, in file order
        self.scored = 0
        self.responses = 0
        self.fingerprints: Counter[str] = Counter()
        self.without_fingerprint = 0
        self.estimated_tokens = 0
        self.all_tokens = 0
        self.overflows: Counter[str] = Counter()
        # pin N13: per arm, per seed, the first line's (server, pinned) first-request tokens
        self.first_requests: dict[str, dict[int, tuple[int, int]]] = {arm: {} for arm in self.cells}
        self.first_pinned = 0  # lines that carry the pinned count (0: the run predates it)
        self.rate_limited = 0  # failed responses that were 429, over every episode
        self.rate_limited_episodes = 0  # episodes that met at least one

    def add(self, row: EpisodeRow) -> None:
        """Count one episode; its arm must be one of the plan's (KeyError otherwise)."""
        tokens = row.tokens
        self.cells[row.arm_id].add(row, tokens)
        if row.provider_cost_usd is not None:
            self.costs.append(row.provider_cost_usd)
        if not row.instrument:
            self.scored += 1
        fingerprints = row.system_fingerprints
        self.responses += len(fingerprints)
        for fingerprint in fingerprints:
            if fingerprint:
                self.fingerprints[fingerprint] += 1
            else:
                self.without_fingerprint += 1
        if row.estimated_tokens:
            self.estimated_tokens += row.estimated_tokens
        self.all_tokens += tokens or 0
        if row.context_overflow:
            self.overflows[row.arm_id] += 1
        if row.rate_limited:
            self.rate_limited += row.rate_limited
            self.rate_limited_episodes += 1
        pinned = row.first_request_pinned_tokens
        if pinned is not None:
            self.first_pinned += 1
            server = row.first_request_tokens
            if server is not None:
                self.first_requests[row.arm_id].setdefault(row.seed, (server, pinned))

    @property
    def totals(self) -> TotalsTally:
        """The run's totals: the cells' token sums (integers, so in any order) and every
        reported cost in file order, as one pass over all the lines would sum them."""
        run = TotalsTally()
        for cell in self.cells.values():
            part = cell.totals
            run.episodes += part.episodes
            for name in ("prompt", "cached", "completion", "reasoning"):
                value = getattr(part, name)
                if value is not None:
                    total = getattr(run, name)
                    setattr(run, name, value if total is None else total + value)
        run.costs = self.costs
        return run
