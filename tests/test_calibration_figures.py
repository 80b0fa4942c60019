"""Every figure of a card against a hand computation on a synthetic run folder."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.stats import t as student_t  # type: ignore[import-untyped]
from synthetic_runs import FAKE_ENGINE_HASH, FAKE_HASH, header, line, write_run

from poisson_tasks.calibration import (
    build_artifact,
    card_from_run,
    records_from_run,
    render_document,
)
from poisson_tasks.calibration.artifact import Artifact
from poisson_tasks.calibration.cardjson import card_json, read_card_json
from poisson_tasks.calibration.manifest import published_dir, read_manifest
from poisson_tasks.prereg import Thresholds
from poisson_tasks.runfolder import EpisodeLine, Timing, Usage
from poisson_tasks.verifier import Outcome
from poisson_tasks.view.cardhtml import card_sections


def card(
    folder: Path,
    arms: Sequence[str],
    seeds: Sequence[int],
    attempts: int,
    lines: Sequence[EpisodeLine],
    **head: Any,
) -> Artifact:
    """A card from a synthetic folder, not stale and with no published cards beside it."""
    write_run(folder, header(arms, seeds, attempts, **head), lines)
    return card_from_run(
        folder,
        installed_generator_hash=FAKE_HASH,
        installed_engine_hash=FAKE_ENGINE_HASH,
        published=[],
    )


def by_hand_interval(rates: Sequence[float], attempts: int) -> tuple[float, float]:
    """Agresti-Coull on the effective sample size, the design effect's excess widened by (t/z)^2
    on the task rates' Satterthwaite degrees of freedom, written out by hand."""
    tasks = len(rates)
    total = tasks * attempts
    p = sum(rates) / tasks
    devs = [r - p for r in rates]
    var = sum(d * d for d in devs) / (tasks - 1) / tasks
    design_effect = total / min(max(p * (1 - p) / var, tasks), total)
    kurtosis = tasks * sum(d**4 for d in devs) / sum(d * d for d in devs) ** 2
    df = min(max(math.floor(2 * tasks / (kurtosis - (tasks - 3) / (tasks - 1))), 1), tasks - 1)
    z = 1.959963984540054
    inflation = (float(student_t.ppf(0.975, df)) / z) ** 2
    n = total / (1 + (design_effect - 1) * inflation) + z * z
    centre = (p * (n - z * z) + z * z / 2) / n
    half = z * math.sqrt(centre * (1 - centre) / n)
    return round(max(centre - half, 0.0), 6), round(min(centre + half, 1.0), 6)


def grid(arm: str, outcomes: Sequence[Sequence[Outcome]], **kw: Any) -> list[EpisodeLine]:
    """outcomes[seed][attempt] for seeds 0.. and attempts 0.."""
    return [line(arm, s, a, o, **kw) for s, row in enumerate(outcomes) for a, o in enumerate(row)]


# --------------------------------------------------------------------------- rates


def test_rates_intervals_overshoot_and_pass_at_k_by_hand(tmp_path: Path) -> None:
    P, V, W, C = "passed", "overshoot", "wrong_state", "collateral_mutation"
    outcomes: list[list[Outcome]] = [[P, P, P], [P, V, W], [W, V, C], [W, W, W]]
    lines = grid("depth:d3", outcomes)
    a = card(tmp_path, ["depth:d3"], range(4), 3, lines)
    c = a.cell("depth:d3")
    strict_rates = [1.0, 1 / 3, 0.0, 0.0]
    leaky_rates = [1.0, 2 / 3, 2 / 3, 0.0]
    assert c.strict is not None and c.leaky is not None
    assert c.strict.pass_at_1 == round(sum(strict_rates) / 4, 6)  # 0.333333
    assert c.leaky.pass_at_1 == round(sum(leaky_rates) / 4, 6)  # 0.583333
    assert (c.strict.low, c.strict.high) == by_hand_interval(strict_rates, 3)
    assert (c.leaky.low, c.leaky.high) == by_hand_interval(leaky_rates, 3)
    assert c.overshoot == round(2 / 12, 6)
    # pass@2 per task with n=3: c=3 -> 1, c=1 -> 1 - C(2,2)/C(3,2) = 2/3, c=0 -> 0
    assert [(p.attempts, p.value) for p in c.pass_at_k] == [
        (1, round(4 / 3 / 4, 6)),
        (2, round((1 + 2 / 3) / 4, 6)),
        (3, round(2 / 4, 6)),
    ]
    assert c.outcomes == {"collateral_mutation": 1, "overshoot": 2, "passed": 4, "wrong_state": 5}
    assert (c.planned, c.episodes, c.scored, c.missing, c.incomplete) == (12, 12, 12, 0, False)


def test_pass_at_k_is_attempts_in_python_and_k_in_card_json(tmp_path: Path) -> None:
    """PassAtK.attempts is written and read as "k", so card.json keeps its bytes."""
    lines = grid("depth:d3", [["passed", "wrong_state"], ["passed", "passed"]])
    a = card(tmp_path, ["depth:d3"], range(2), 2, lines)
    data = json.loads(card_json(a))
    cell = next(c for c in data["cells"] if c["arm_id"] == "depth:d3")
    assert [sorted(p) for p in cell["pass_at_k"]] == [["k", "value"], ["k", "value"]]
    assert [p["k"] for p in cell["pass_at_k"]] == [1, 2]
    again = read_card_json(card_json(a))
    assert [p.attempts for p in again.cell("depth:d3").pass_at_k] == [1, 2]
    assert card_json(again) == card_json(a)


def test_pass_hat_k_beside_pass_at_k_by_hand_on_card_md_and_card_json(tmp_path: Path) -> None:
    """pass^k (Yao et al. 2024): all k attempts pass, C(c,k)/C(n,k) per task, averaged over tasks.

    Five attempts at two seeds: seed 0 passes 4 of 5, seed 1 passes 2 of 5."""
    P, W = "passed", "wrong_state"
    lines = grid("depth:d3", [[P, P, P, P, W], [P, W, P, W, W]])
    a = card(tmp_path, ["depth:d3"], range(2), 5, lines)
    c = a.cell("depth:d3")
    by_hand = [
        (k, round((math.comb(4, k) / math.comb(5, k) + math.comb(2, k) / math.comb(5, k)) / 2, 6))
        for k in range(1, 6)
    ]
    assert [(p.attempts, p.value) for p in c.pass_hat_k] == by_hand
    assert by_hand[1] == (2, 0.35) and by_hand[4] == (5, 0.0)  # (6/10 + 1/10) / 2; nobody 5 of 5
    assert c.strict is not None and c.pass_hat_k[0].value == c.strict.pass_at_1  # pass^1 = pass@1
    # pass@2 of the same cell: 1 - C(1,2)/C(5,2) = 1 and 1 - C(3,2)/C(5,2) = 0.7
    assert [p.value for p in c.pass_at_k][1] == 0.85
    doc = render_document(a)
    header = next(ln for ln in doc.splitlines() if ln.startswith("| level |"))
    row = next(ln for ln in doc.splitlines() if ln.startswith("| `d3` |"))
    columns = [x.strip() for x in header.strip("|").split("|")]
    values = dict(zip(columns, (x.strip() for x in row.strip("|").split("|")), strict=True))
    assert (values["strict pass@2"], values["strict pass^2"]) == ("0.850", "0.350")
    assert (values["strict pass@5"], values["strict pass^5"]) == ("1.000", "0.000")
    cell = next(x for x in json.loads(card_json(a))["cells"] if x["arm_id"] == "depth:d3")
    assert [(p["k"], p["value"]) for p in cell["pass_hat_k"]] == by_hand
    assert card_json(read_card_json(card_json(a))) == card_json(a)


def test_every_task_weighs_the_same_and_instrument_failures_leave_the_denominator(
    tmp_path: Path,
) -> None:
    lines = [
        line("depth:d1", 0, 0, "passed"),
        line("depth:d1", 0, 1, "passed"),
        line("depth:d1", 0, 2, "wrong_state"),
        line("depth:d1", 0, 3, "wrong_state"),
        line("depth:d1", 1, 0, "api_error", tool_calls=0),  # never retried: seed 1 has 1 scored
        line("depth:d1", 1, 1, "api_error", tool_calls=0),
        line("depth:d1", 1, 2, "verifier_error"),
        line("depth:d1", 1, 3, "passed"),
    ]
    a = card(tmp_path, ["depth:d1"], [0, 1], 4, lines, thresholds=Thresholds(instrument_max=0.5))
    c = a.cell("depth:d1")
    assert c.strict is not None
    assert c.strict.pass_at_1 == round((2 / 4 + 1 / 1) / 2, 6)  # 0.75, not 3/5 pooled
    assert (c.scored, c.episodes, c.instrument.count) == (5, 8, 3)
    assert c.instrument.rate == round(3 / 8, 6)
    assert c.instrument.by_outcome == {"api_error": 2, "verifier_error": 1}
    assert c.no_tool_call == 0.0  # the two no-call api_errors are not scored episodes
    assert c.missing == 0  # every slot has a line, scored or not
    # pass@2 leaves out seed 1, which has one scored attempt: seed 0 alone, 1 - C(2,2)/C(4,2)
    assert [(p.attempts, p.value) for p in c.pass_at_k] == [
        (1, 0.75),
        (2, round(1 - 1 / 6, 6)),
        (3, 1.0),
        (4, 1.0),
    ]


def test_shares_medians_and_min_calls_by_hand(tmp_path: Path) -> None:
    calls = [5, 5, 5, 4, 1, 3, 5, 6, 5, 0, 5, 5]  # min calls 5 at d5
    lines = [
        line(
            "depth:d5",
            i // 3,
            i % 3,
            "passed" if k >= 5 else "wrong_state",
            tool_calls=k,
            model_calls=k + 1,
            usage=Usage(uncached_input_tokens=100 * i, cached_input_tokens=10, completion_tokens=5),
        )
        for i, k in enumerate(calls)
    ]
    a = card(tmp_path, ["depth:d5"], range(4), 3, lines, thresholds=Thresholds(no_call_max=0.1))
    c = a.cell("depth:d5")
    assert c.min_calls == 5
    assert c.no_tool_call == round(1 / 12, 6)
    assert c.stopped_short == round(3 / 12, 6)  # 4, 1, 3: made a call but fewer than 5
    assert c.median_model_calls == float(np.median([k + 1 for k in calls]))
    assert c.median_tokens == float(np.median([100 * i + 15 for i in range(12)]))
    assert c.median_episode_s is None
    md = render_document(a)
    assert "| `d5` |" in md and "not recorded" in md


def test_saturation_bounds_are_inclusive(tmp_path: Path) -> None:
    # 20 tasks x 1 attempt: 1 pass -> 0.05 (saturated), 2 -> 0.10 (not), 19 -> 0.95 (saturated)
    def arm_lines(arm: str, passes: int) -> list[EpisodeLine]:
        return [line(arm, s, 0, "passed" if s < passes else "wrong_state") for s in range(20)]

    arms = ["depth:d1", "depth:d2", "depth:d3"]
    lines = arm_lines("depth:d1", 19) + arm_lines("depth:d2", 2) + arm_lines("depth:d3", 1)
    a = card(tmp_path, arms, range(20), 1, lines)
    assert [a.cell(x).saturated_strict for x in arms] == [True, False, True]


# --------------------------------------------------------------------------- comparisons


def _rates_lines(
    arm: str, passes_per_seed: Sequence[int], attempts: int, fail: Outcome = "wrong_state"
) -> list[EpisodeLine]:
    return [
        line(arm, s, a, "passed" if a < p else fail)
        for s, p in enumerate(passes_per_seed)
        for a in range(attempts)
    ]


def test_adjacent_levels_paired_difference_churn_and_verdicts(tmp_path: Path) -> None:
    n = 20
    d1 = [5] * n  # 1.0: saturated
    d2 = [4] * 10 + [3] * 10  # 0.7
    d3 = [1] * 10 + [2] * 10  # 0.3: distinguishable from d2 (every seed drops)
    d5 = [1] * 10 + [2] * 9 + [1]  # 0.295: too small against d3
    d8 = [2] * n  # 0.4
    arms = ["depth:d1", "depth:d2", "depth:d3", "depth:d5", "depth:d8"]
    lines = []
    for arm, p in zip(arms, (d1, d2, d3, d5, d8), strict=True):
        lines += _rates_lines(arm, p, 5)
    a = card(tmp_path, arms, range(n), 5, lines)
    table = a.knobs[0]
    assert table.knob == "depth" and table.read_on == "leaky"
    strict = {(c.lower, c.upper): c for c in table.comparisons if c.rate == "strict"}
    leaky = [c for c in table.comparisons if c.rate == "leaky"]
    assert len(strict) == 4 and len(leaky) == 4  # depth: leaky and strict
    first = strict[("depth:d1", "depth:d2")]
    assert first.verdict == "left_out" and first.reason == "d1 saturated on strict"
    second = strict[("depth:d2", "depth:d3")]
    assert second.diff == round(0.7 - 0.3, 6)
    assert second.churn == 1.0 and second.pairs_used == n
    assert second.verdict == "distinguishable" and second.low is not None and second.low > 0
    third = strict[("depth:d3", "depth:d5")]
    assert third.diff == round((0.3 * 20 - (0.2 * 10 + 0.4 * 9 + 0.2)) / 20, 6)
    assert third.churn == round(1 / 20, 6)  # only the last seed moved
    assert third.verdict == "too_small"
    fourth = strict[("depth:d5", "depth:d8")]
    assert fourth.diff is not None and fourth.diff < 0  # the rate rises at d8
    # d1 is saturated, so d1 -> d2 is left out and the comparisons cannot decide the ordering
    assert table.ordering_strict.verdict == "cannot_tell"
    assert table.ordering_strict.saturated == ["d1"]
    assert table.ordering_leaky is not None and table.ordering_leaky.verdict == "cannot_tell"
    md = render_document(a)
    assert "distinguishable (the rate falls at `d3`)" in md
    assert "left out: d1 saturated on strict" in md
    assert "too small for this design to call" in md


def test_difference_below_the_resolution_is_too_small_even_when_the_interval_excludes_zero(
    tmp_path: Path,
) -> None:
    n = 10
    lines = _rates_lines("distractor:r0@k16", [24] * n, 40) + _rates_lines(
        "distractor:r2@k16", [20] * n, 40
    )
    a = card(tmp_path, ["distractor:r0@k16", "distractor:r2@k16"], range(n), 40, lines)
    (comp,) = a.knobs[0].comparisons
    assert comp.rate == "strict"  # distractor: strict only
    assert comp.diff == 0.1 and comp.low is not None and comp.high is not None
    assert 0.0 < comp.low < 0.1 < comp.high  # excludes zero, but 0.1 is below the resolution
    assert comp.verdict == "too_small"
    assert a.knobs[0].ordering_strict.verdict == "yes"


def test_a_comparison_on_leaky_leaves_out_levels_saturated_on_leaky_only(tmp_path: Path) -> None:
    n = 20
    # d1: every attempt reaches the goal, half overshoot: leaky 1.0 (saturated), strict 0.5
    d1 = [
        line("depth:d1", s, a, "passed" if a % 2 else "overshoot")
        for s in range(n)
        for a in range(2)
    ]
    d2 = _rates_lines("depth:d2", [1] * n, 2)
    a = card(tmp_path, ["depth:d1", "depth:d2"], range(n), 2, d1 + d2)
    comps = {c.rate: c for c in a.knobs[0].comparisons}
    assert comps["leaky"].verdict == "left_out" and comps["leaky"].reason == "d1 saturated on leaky"
    assert comps["strict"].verdict == "too_small" and comps["strict"].diff == 0.0


def test_control_arms_have_their_own_table_and_no_comparison(tmp_path: Path) -> None:
    arms = ["depth:d1", "depth:d2", "depth:d1+h8", "depth:d2+h5"]
    lines = [line(a, s, 0, "passed" if s % 2 else "wrong_state") for a in arms for s in range(4)]
    a = card(tmp_path, arms, range(4), 1, lines)
    assert a.controls == ["depth:d1+h8", "depth:d2+h5"]
    assert a.knobs[0].levels == ["depth:d1", "depth:d2"]
    assert all("+" not in c.lower + c.upper for c in a.knobs[0].comparisons)
    assert "## Control arms" in render_document(a)


# --------------------------------------------------------------------------- costs


def test_cost_tables_by_hand(tmp_path: Path) -> None:
    rates = {
        "input": 0.05,
        "cached_input": 0.005,
        "output": 0.4,
        "as_of": "2026-09-20",
        "source": None,
    }
    usage = [
        Usage(
            uncached_input_tokens=1000,
            cached_input_tokens=500,
            completion_tokens=200,
            reasoning_tokens=150,
            provider_cost_usd=0.0002,
        ),
        Usage(
            uncached_input_tokens=3000,
            cached_input_tokens=0,
            completion_tokens=100,
            reasoning_tokens=50,
        ),
        Usage(
            uncached_input_tokens=2000,
            cached_input_tokens=100,
            completion_tokens=300,
            reasoning_tokens=0,
        ),
        Usage(
            uncached_input_tokens=400, completion_tokens=40
        ),  # an instrument failure: costs money too
    ]
    timing = [
        Timing(episode_s=2.0, model_s=1.5, harness_s=0.4, setup_s=0.2),
        Timing(episode_s=4.0, model_s=3.0, harness_s=0.8, setup_s=0.3),
        Timing(),
        Timing(),
    ]
    outcomes: list[Outcome] = ["passed", "wrong_state", "passed", "api_error"]
    lines = [
        line("depth:d1", i, 0, o, usage=u, timing=t)
        for i, (o, u, t) in enumerate(zip(outcomes, usage, timing, strict=True))
    ]
    a = card(
        tmp_path,
        ["depth:d1"],
        range(4),
        1,
        lines,
        rates=rates,
        thresholds=Thresholds(instrument_max=0.5),
    )
    c = a.cell("depth:d1")
    k = c.costs
    assert k is not None
    scored_tokens = [1700, 3100, 2400]
    assert k.mean_tokens == round(sum(scored_tokens) / 3, 6)
    assert k.median_tokens == 2400
    assert k.p90_tokens == round(float(np.percentile(scored_tokens, 90)), 6)
    assert c.strict is not None and c.strict.pass_at_1 == round(2 / 3, 6)
    assert k.tokens_per_strict_pass == round(k.mean_tokens / round(2 / 3, 6), 6)
    assert (k.mean_model_calls, k.median_model_calls, k.mean_tool_calls) == (2.0, 2.0, 1.0)
    assert (k.timed_episodes, k.episode_s_median, k.model_s_median) == (2, 3.0, 2.25)
    assert k.episode_s_p90 == round(2.0 + 0.9 * 2.0, 6)
    assert (k.harness_s_median, k.setup_s_median) == (0.6, 0.25)
    t = c.totals
    assert (t.episodes, t.uncached_input_tokens, t.cached_input_tokens, t.completion_tokens) == (
        4,
        6400,
        600,
        640,
    )
    assert t.reasoning_tokens == 200 and t.reasoning_share == round(200 / 640, 6)
    assert t.computed_usd == round((6400 * 0.05 + 600 * 0.005 + 640 * 0.4) / 1e6, 6)
    assert (t.provider_usd, t.provider_usd_episodes) == (0.0002, 1)
    assert a.run_totals == t
    md = render_document(a)
    assert "read on 2026-09-20" in md and "Concurrency: 4 episodes in flight at once" in md
    # card.json names the figure for what it is; a card.json written before says prompt_tokens
    data = card_json(a)
    assert b'"prompt_tokens"' not in data and b'"uncached_input_tokens": 6400' in data
    old = data.replace(b'"uncached_input_tokens"', b'"prompt_tokens"')
    assert card_json(read_card_json(old)) == data


def test_no_declared_rate_means_no_dollar_figure_and_no_pass_means_na(tmp_path: Path) -> None:
    lines = [line("depth:d1", s, 0, "wrong_state") for s in range(3)]
    a = card(tmp_path, ["depth:d1"], range(3), 1, lines, concurrency=None)
    c = a.cell("depth:d1")
    assert c.totals.computed_usd is None and c.totals.provider_usd is None
    assert c.costs is not None and c.costs.tokens_per_strict_pass is None
    md = render_document(a)
    assert "No rate was declared for this model" in md
    assert (
        "| `depth:d1` | 3 | 3,000 | 600 | 300 | not recorded | n/a | no rate | not reported |" in md
    )
    assert "1,300 | 1,300 | 1,300 | n/a |" in md  # tokens per strict pass: nothing passed
    assert "Concurrency: not recorded" in md
    assert "No episode of this run kept time" in md


def test_records_outside_the_provenance_plan_are_refused(tmp_path: Path) -> None:
    write_run(tmp_path / "a", header(["depth:d1"], [0], 1), [line("depth:d1", 0, 0)])
    write_run(tmp_path / "b", header(["depth:d2"], [0], 1), [line("depth:d2", 0, 0)])
    from poisson_tasks.calibration import provenance_from_run
    from poisson_tasks.errors import RunFolderError

    with pytest.raises(RunFolderError, match="outside the provenance's plan"):
        build_artifact(
            records_from_run(tmp_path / "a"),
            provenance_from_run(tmp_path / "b"),
            installed_generator_hash=FAKE_HASH,
            installed_engine_hash=FAKE_ENGINE_HASH,
            published=[],
        )


ORDER_ARMS = ["distractor:r0@k16", "distractor:r2@k16", "distractor:r4@k16"]


@pytest.mark.parametrize(
    ("passes", "verdict", "saturated", "text"),
    [
        # falls distinguishably, then no task moves (too small to call): no estimate rises, yes
        (
            (4, 2, 2),
            "yes",
            [],
            "Strict pass@1 non-increasing across the levels: yes (point estimates: never rise; "
            "distinguishable: no rise, fall at r0@k16→r2@k16).",
        ),
        # rises distinguishably from r0 to r2: decided no
        (
            (2, 4, 4),
            "no",
            [],
            "no (point estimates: rise at r0@k16→r2@k16; distinguishable: rise at r0@k16→r2@k16, "
            "no fall)",
        ),
        # r2 saturated: both pairs are left out, no rise is called: the data do not decide it
        (
            (4, 5, 4),
            "cannot_tell",
            ["r2@k16"],
            "cannot tell (point estimates: rise at r0@k16→r2@k16; distinguishable: no rise, no "
            "fall; left out: r0@k16→r2@k16, r2@k16→r4@k16; saturated on strict: r2@k16)",
        ),
        # a saturated level is named even when another pair decides the ordering
        ((5, 2, 4), "no", ["r0@k16"], "saturated on strict: r0@k16)"),
    ],
)
def test_ordering_is_read_from_the_paired_comparisons(
    tmp_path: Path, passes: tuple[int, int, int], verdict: str, saturated: list[str], text: str
) -> None:
    n = 20
    lines = []
    for arm, p in zip(ORDER_ARMS, passes, strict=True):
        lines += _rates_lines(arm, [p] * n, 5)
    a = card(tmp_path, ORDER_ARMS, range(n), 5, lines)
    order = a.knobs[0].ordering_strict
    assert order.verdict == verdict
    assert order.saturated == saturated
    assert text in render_document(a)


def test_a_rising_estimate_too_small_to_call_is_never_read_as_non_increasing(
    tmp_path: Path,
) -> None:
    """r2's estimate rises above r0's by one attempt in a hundred: too small for the design to
    call, so the ordering cannot tell, and the card names the rise and what was called."""
    n = 20
    lines = (
        _rates_lines("distractor:r0@k16", [3] * n, 5)
        + _rates_lines("distractor:r2@k16", [3] * (n - 1) + [4], 5)
        + _rates_lines("distractor:r4@k16", [3] * (n - 1) + [4], 5)
    )
    a = card(tmp_path, ORDER_ARMS, range(n), 5, lines)
    table = a.knobs[0]
    assert [c.verdict for c in table.comparisons] == ["too_small", "too_small"]
    order = table.ordering_strict
    assert order.verdict == "cannot_tell"
    assert order.estimate_rises == ["r0@k16→r2@k16"]
    assert order.rising == [] and order.falling == [] and order.left_out == []
    assert (
        "Strict pass@1 non-increasing across the levels: cannot tell (point estimates: rise at "
        "r0@k16→r2@k16; distinguishable: no rise, no fall)."
    ) in render_document(a)
    assert (
        "<li>strict pass@1 non-increasing across the levels: <strong>cannot tell</strong> "
        "<span class=dim>(point estimates: rise at r0@k16→r2@k16; distinguishable: no rise, "
        "no fall)</span></li>"
    ) in card_sections(a)


def test_no_published_ordering_reads_yes_over_a_rising_estimate() -> None:
    """Every published card's ordering agrees with its own rows: yes only where no level's point
    estimate rises above the one before it, and every estimate rise is named (card.json as
    written, read as plain JSON)."""
    checked = 0
    yes_over_a_rise: list[tuple[str, str, str]] = []
    unnamed: list[tuple[str, str, str]] = []
    for name in read_manifest():
        data = json.loads((published_dir() / name / "card.json").read_bytes())
        cells = {c["arm_id"]: c for c in data["cells"]}
        for table in data["knobs"]:
            levels = table["levels"]
            for order in (table["ordering_strict"], table["ordering_leaky"]):
                if order is None:
                    continue
                points = [cells[arm][order["rate"]]["pass_at_1"] for arm in levels]
                rises = [
                    f"{lo.split(':', 1)[1]}→{hi.split(':', 1)[1]}"
                    for lo, hi, a, b in zip(levels, levels[1:], points, points[1:], strict=False)
                    if b > a
                ]
                where = (name, table["knob"], order["rate"])
                if rises and order["verdict"] == "yes":
                    yes_over_a_rise.append(where)
                if order.get("estimate_rises") != rises:
                    unnamed.append(where)
                checked += 1
    assert checked == 9  # three cards: depth on strict and on leaky, distractor on strict
    assert yes_over_a_rise == []
    assert unnamed == []


def test_every_printed_confidence_level_is_the_preregistered_one(tmp_path: Path) -> None:
    """A pre-registration declaring 0.90 gets 90% in every header and text, and no 95%."""
    n = 20
    lines = []
    for arm, p in zip(ORDER_ARMS, (4, 2, 2), strict=True):
        lines += _rates_lines(arm, [p] * n, 5)
    th = Thresholds(confidence=0.90)
    a = card(tmp_path, ORDER_ARMS, range(n), 5, lines, thresholds=th)
    md = render_document(a)
    assert "| 90% interval |" in md and "paired 90% interval" in md
    assert "95%" not in md
    narrower = a.cell("distractor:r2@k16").strict
    wide = card(tmp_path / "95", ORDER_ARMS, range(n), 5, lines).cell("distractor:r2@k16").strict
    assert narrower is not None and wide is not None
    assert wide.low < narrower.low and narrower.high < wide.high
