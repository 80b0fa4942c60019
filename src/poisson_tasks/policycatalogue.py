"""The reference policies a client can name as a `model`, their parameters, and model strings.

A model string is a policy name, optionally followed by parameters in URL query form:
`noisy?p_wrong_tool=0.1&p_early_stop=0.05`. A parameter not in the string takes the server's default
(a start option) or else the policy's built-in default.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from poisson_tasks.arms import KNOBS, ArmSpec, levels
from poisson_tasks.errors import PolicyError


@dataclass(frozen=True, slots=True)
class Param:
    """One policy parameter: its built-in default, its bounds, and whether it is a whole number."""

    default: float
    low: float
    high: float
    integer: bool = False
    help: str = ""


_PROB = (0.0, 1.0)
_REASONING = Param(0, 0, 100_000, integer=True, help="reasoning tokens reported per response")


def _p(default: float, help_text: str) -> Param:
    return Param(default, *_PROB, help=help_text)


UNSET = -1.0  # a graded per-knob rate left at this takes the policy's p_low / p_high


def _graded_params() -> dict[str, Param]:
    """graded: a failure rate at each knob's lowest and highest level, linear in between."""
    out = {
        "p_low": _p(0.0, "per episode: chance to stop after one call at a knob's lowest level"),
        "p_high": _p(0.0, "per episode: the same chance at a knob's highest level"),
        "length_follows": Param(
            0, 0, 1, integer=True, help="1: a control arm fails as the level it stands in for"
        ),
        "p_top_500": _p(
            0.0, "per request attempt on a knob's highest-level arm: answer HTTP 500 (a void arm)"
        ),
    }
    for knob in KNOBS:
        for end in ("low", "high"):
            out[f"{knob}_{end}"] = Param(
                UNSET, UNSET, 1.0, help=f"p_{end} for {knob} arms only (-1: p_{end})"
            )
    return out


# Every policy, its one-line description, and its parameters (reasoning_tokens is on every policy).
POLICIES: dict[str, tuple[str, dict[str, Param]]] = {
    "oracle": (
        "solves the task it reads: reads the goal, codes and stated values; retries unavailable",
        {"parallel": Param(0, 0, 1, integer=True, help="1: independent calls in one message")},
    ),
    "noisy": (
        "the oracle with seeded mistakes at declared rates; pass rate known analytically",
        {
            "p_wrong_tool": _p(0.1, "per step: call a harmless wrong tool instead"),
            "p_early_stop": _p(0.1, "per step: reply without finishing"),
            "p_overshoot": _p(0.1, "at the goal: climb one stage past it when the block allows"),
        },
    ),
    "seed-ignoring": (
        "the noisy policy, but every draw comes from the server's own entropy, never from the "
        "request's seed, user tag or conversation: a server that ignores the seed; runs differ",
        {
            "p_wrong_tool": _p(0.1, "per step: call a harmless wrong tool instead"),
            "p_early_stop": _p(0.1, "per step: reply without finishing"),
            "p_overshoot": _p(0.1, "at the goal: climb one stage past it when the block allows"),
        },
    ),
    "overshoot": ("climbs each goal record to the top stage the tool block offers", {}),
    "graded": (
        "the oracle, but gives up after its own first call at a rate set per knob level, read "
        "from the arm id in the request's user tag (a fixture: the knob probe, the default study)",
        _graded_params(),
    ),
    "no-call": ("answers in plain text asking for the entry code; never calls a tool", {}),
    "text-call": ("writes the oracle's next call as plain text (a parser that missed it)", {}),
    "garbage": (
        "the oracle, but its tool-call arguments are malformed JSON",
        {"p_garbage": _p(1.0, "per call message: break the arguments JSON")},
    ),
    "flaky": (
        "the oracle behind HTTP 500, 429 and slow answers at declared rates",
        {
            "p_500": _p(0.1, "per request attempt: answer HTTP 500"),
            "p_429": _p(0.1, "per request attempt: answer HTTP 429"),
            "p_slow": _p(0.1, "per request attempt: answer after slow_s seconds"),
            "slow_s": Param(2.0, 0.0, 600.0, help="delay of a slow answer, seconds"),
            "retry_after": Param(0.01, 0, 3600, help="a 429's Retry-After, seconds (and -ms)"),
        },
    ),
}
POLICY_NAMES: tuple[str, ...] = tuple(POLICIES)


def param_table(policy: str) -> dict[str, Param]:
    """The parameters a policy takes, reasoning_tokens included."""
    return {**POLICIES[policy][1], "reasoning_tokens": _REASONING}


def _fmt(value: float, integer: bool) -> str:
    return str(int(value)) if integer else format(value, "g")


@dataclass(frozen=True, slots=True)
class PolicySpec:
    """A policy name with every parameter resolved; `model` is its canonical model string."""

    name: str
    params: tuple[tuple[str, float], ...]

    def get(self, key: str, default: float = 0.0) -> float:
        return dict(self.params).get(key, default)

    @property
    def model(self) -> str:
        table = param_table(self.name)
        query = "&".join(f"{k}={_fmt(v, table[k].integer)}" for k, v in self.params)
        return f"{self.name}?{query}" if query else self.name


def _value(policy: str, key: str, raw: object) -> float:
    table = param_table(policy)
    if key not in table:
        raise PolicyError(
            f"policy {policy!r} has no parameter {key!r}; "
            f"its parameters: {', '.join(sorted(table))}"
        )
    spec = table[key]
    try:
        value = float(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise PolicyError(f"{policy} parameter {key}={raw!r} is not a number") from None
    if value != value or not spec.low <= value <= spec.high:
        raise PolicyError(
            f"{policy} parameter {key}={raw} is outside {_fmt(spec.low, spec.integer)}"
            f"..{_fmt(spec.high, spec.integer)}"
        )
    if spec.integer and value != int(value):
        raise PolicyError(f"{policy} parameter {key}={raw} must be a whole number")
    return value


def check_defaults(defaults: Mapping[str, Mapping[str, object]]) -> dict[str, dict[str, float]]:
    """Validate server-start defaults {policy: {param: value}}; PolicyError names the fix."""
    out: dict[str, dict[str, float]] = {}
    for policy, params in defaults.items():
        if policy not in POLICIES:
            raise PolicyError(f"no policy {policy!r}; policies: {', '.join(POLICY_NAMES)}")
        out[policy] = {k: _value(policy, k, v) for k, v in params.items()}
        _check_flaky(resolve(policy, out[policy]))
    return out


def resolve(policy: str, given: Mapping[str, float]) -> PolicySpec:
    """A PolicySpec from a policy name and the parameter values given; the rest take defaults."""
    table = param_table(policy)
    params = tuple(sorted((k, given.get(k, p.default)) for k, p in table.items()))
    return PolicySpec(name=policy, params=params)


def _check_flaky(spec: PolicySpec) -> None:
    if spec.name == "flaky" and spec.get("p_500") + spec.get("p_429") + spec.get("p_slow") > 1:
        raise PolicyError("flaky parameters p_500 + p_429 + p_slow must add up to 1 or less")


def parse_model(
    model: str, defaults: Mapping[str, Mapping[str, float]] | None = None
) -> PolicySpec:
    """Parse `name[?k=v&k=v]` into a PolicySpec; raises PolicyError naming what is wrong."""
    name, _, query = model.strip().partition("?")
    if name not in POLICIES:
        raise PolicyError(
            f"model {model!r} names no reference policy; policies: {', '.join(POLICY_NAMES)}"
        )
    given = dict((defaults or {}).get(name, {}))
    for pair in filter(None, query.split("&")):
        key, eq, raw = pair.partition("=")
        if not eq:
            raise PolicyError(f"model {model!r}: parameter {pair!r} is not of the form key=value")
        given[key] = _value(name, key, raw)
    spec = resolve(name, given)
    _check_flaky(spec)
    return spec


def parse_param_options(options: list[str]) -> dict[str, dict[str, float]]:
    """Server-start defaults from `policy.param=value` options, e.g. noisy.p_wrong_tool=0.2."""
    out: dict[str, dict[str, object]] = {}
    for opt in options:
        target, eq, raw = opt.partition("=")
        policy, dot, key = target.partition(".")
        if not eq or not dot:
            raise PolicyError(f"--param {opt!r} is not of the form policy.parameter=value")
        out.setdefault(policy, {})[key] = raw
    return check_defaults(out)


def graded_rate(spec: PolicySpec, arm: ArmSpec) -> float:
    """graded's chance of giving up on an episode of `arm`: the knob's low rate at its lowest
    candidate level, its high rate at its highest, linear in the level between (clamped). A control
    arm is placed at its own level, or at the level it stands in for when length_follows is 1."""
    cand = levels(arm.knob)
    level = arm.control if arm.control is not None and spec.get("length_follows") else arm.level
    position = min(1.0, max(0.0, (level - cand[0]) / (cand[-1] - cand[0])))
    low, high = spec.get(f"{arm.knob}_low"), spec.get(f"{arm.knob}_high")
    low = spec.get("p_low") if low == UNSET else low
    high = spec.get("p_high") if high == UNSET else high
    return low + (high - low) * position
