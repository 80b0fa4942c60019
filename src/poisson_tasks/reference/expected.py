"""The noisy and graded policies' outcome rates, known analytically from their parameters and the
arm's shape.

The noisy policy makes the oracle's m calls (m = the arm's min_calls: d at depth d, 2 + F at
faults level F, 6 at spread, 4 at shape, 2 elsewhere). At each of those steps it stops with
s = p_early_stop; otherwise it calls a harmless wrong tool with p_wrong_tool (the step is then taken
again) or makes the right call. So each model call at a step is a stop with s, a wrong call with
w = (1-s)p_wrong_tool and the right call with r = (1-s)(1-p_wrong_tool). Once at the goal it
overshoots with o = p_overshoot when the block offers the stage above the goal (o = 0 otherwise),
then replies.

Reaching the goal after exactly k wrong calls has probability A_k = C(m-1+k, k) r^m w^k and uses
m+k model calls. With at most T model calls per episode (an episode whose T-th call still calls a
tool ends on turn_limit):

    passed      = (1-o) * sum_{k=0}^{T-m-1} A_k
    overshoot   =   o   * sum_{k=0}^{T-m-2} A_k
    wrong_state = s * sum_{j=1}^{T} sum_{i=0}^{min(m-1, j-1)} C(j-1, i) r^i w^(j-1-i)
    turn_limit  = 1 - passed - overshoot - wrong_state

With no cap (T = None) these are passed = (1-o) q^m, overshoot = o q^m, wrong_state = 1 - q^m,
where q = r / (1 - w) = (1-s)(1-p_wrong_tool) / (1 - (1-s) p_wrong_tool). Strict pass@1 is `passed`;
leaky pass@1 is passed + overshoot. A collateral mutation cannot happen: the noisy policy's wrong
calls never touch a record.

The graded policy is the oracle except that, once its own first call is answered, it gives up with
g = policycatalogue.graded_rate(spec, arm), one draw per episode. An arm whose oracle makes one call
(m = 1: depth:d1 and its control d1+h8) has reached its goal by then, so it always passes; any other
arm passes with 1 - g and otherwise ends wrong_state. It never overshoots, so its strict and leaky
rates are the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import comb

from poisson_tasks.arms import KNOB_DEFS, ArmSpec, parse_arm_id
from poisson_tasks.policycatalogue import PolicySpec, graded_rate, parse_model


@dataclass(frozen=True, slots=True)
class NoisyRates:
    """The expected share of each outcome for one arm under one noisy parameter set."""

    passed: float
    overshoot: float
    wrong_state: float
    turn_limit: float

    @property
    def leaky(self) -> float:
        return self.passed + self.overshoot

    def pass_rate(self, strictness: str = "strict") -> float:
        """What verify's `passed` means under the arm's strictness."""
        return self.passed if strictness == "strict" else self.leaky


def overshoot_possible(spec: ArmSpec) -> bool:
    """Whether the arm's block offers the stage above a goal: depth below d8, and shape wider than
    one record (its four stage tools reach past the goals of w2 and w4). Every other knob's block
    stops at the goal (KnobDef.overshoots)."""
    return KNOB_DEFS[spec.knob].overshoots(spec.level)


def noisy_rates(
    calls: int,
    can_overshoot: bool,
    p_wrong_tool: float,
    p_early_stop: float,
    p_overshoot: float,
    max_turns: int | None = None,
) -> NoisyRates:
    """The formula of this module's docstring for a task of `calls` oracle calls."""
    stop_rate = p_early_stop  # s, w, r, o, q, A_k and T of the module docstring, in words
    wrong_rate = (1 - stop_rate) * p_wrong_tool
    right_rate = (1 - stop_rate) * (1 - p_wrong_tool)
    overshoot_rate = p_overshoot if can_overshoot else 0.0
    if max_turns is None:
        step_rate = right_rate / (1 - wrong_rate) if wrong_rate < 1 else 0.0
        reach = step_rate**calls
        stopped = 1 - reach if wrong_rate < 1 else 0.0
        return NoisyRates(
            (1 - overshoot_rate) * reach, overshoot_rate * reach, stopped, 1 - reach - stopped
        )

    def reach_after(wrong_calls: int) -> float:
        return (
            comb(calls - 1 + wrong_calls, wrong_calls) * right_rate**calls * wrong_rate**wrong_calls
        )

    turn_cap = max_turns
    passed = (1 - overshoot_rate) * sum(
        reach_after(wrong_calls) for wrong_calls in range(max(0, turn_cap - calls))
    )
    over = overshoot_rate * sum(
        reach_after(wrong_calls) for wrong_calls in range(max(0, turn_cap - calls - 1))
    )
    stopped = stop_rate * sum(
        comb(j - 1, i) * right_rate**i * wrong_rate ** (j - 1 - i)
        for j in range(1, turn_cap + 1)
        for i in range(min(calls, j))
    )
    return NoisyRates(passed, over, stopped, max(0.0, 1 - passed - over - stopped))


def noisy_expected(
    arm: ArmSpec | str,
    p_wrong_tool: float = 0.1,
    p_early_stop: float = 0.1,
    p_overshoot: float = 0.1,
    max_turns: int | None = None,
) -> NoisyRates:
    """The noisy policy's expected outcome rates on any task of `arm` (see the module docstring)."""
    spec = parse_arm_id(arm) if isinstance(arm, str) else arm
    return noisy_rates(
        spec.min_calls, overshoot_possible(spec), p_wrong_tool, p_early_stop, p_overshoot, max_turns
    )


def graded_expected(arm: ArmSpec | str, model: PolicySpec | str) -> float:
    """The graded policy's expected pass@1 on any task of `arm` (strict and leaky alike), for a
    graded model string or PolicySpec (see the module docstring)."""
    spec = parse_arm_id(arm) if isinstance(arm, str) else arm
    policy = parse_model(model) if isinstance(model, str) else model
    if policy.name != "graded":
        raise ValueError(f"graded_expected needs a graded model, not {policy.model!r}")
    return 1.0 if spec.min_calls == 1 else 1.0 - graded_rate(policy, spec)
