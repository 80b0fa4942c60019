"""render_document: the card as markdown, from its Artifact and nothing else.

Rates and interval bounds print with three decimals (the card's printed precision: 0.001),
seconds with two, tokens and dollars as counted. Every confidence level printed comes from the
card's thresholds (the pre-registration), never from a literal. A figure that was not measured
reads `not recorded` (time, tokens) or `n/a` (a rate with nothing to rate); it is never printed
as zero.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from poisson_tasks.calibration.artifact import (
    Artifact,
    Cell,
    Comparison,
    KnobTable,
    Ordering,
    RateFigure,
    ServingObserved,
)
from poisson_tasks.calibration.beside import short_hash
from poisson_tasks.calibration.provenance import Provenance
from poisson_tasks.hashes import describe_environment_hash
from poisson_tasks.local.facts import LlamaCppFacts
from poisson_tasks.prereg import Thresholds

NOT_RECORDED = "not recorded"
NA = "n/a"
SHOWN_K = (2, 5)
FEW_EVENTS_NOTE = "few events: interval wide"

__all__ = ["level_columns", "percent", "render_document", "render_knob"]


def _rate(x: float | None) -> str:
    return NA if x is None else f"{x:.3f}"


def _interval(fig: RateFigure | None) -> str:
    if fig is None:
        return NA
    text = f"[{fig.low:.3f}, {fig.high:.3f}]"
    return f"{text} ({FEW_EVENTS_NOTE})" if fig.few_events else text


def percent(confidence: float) -> str:
    """A confidence level as the card prints it: 0.9 -> 90%, 0.975 -> 97.5%."""
    return f"{confidence * 100:g}%"


def _num(x: float | None, missing: str = NOT_RECORDED) -> str:
    """A count-like figure: an integer prints bare, anything else with one decimal."""
    if x is None:
        return missing
    return f"{x:,.0f}" if float(x).is_integer() else f"{x:,.1f}"


def _secs(x: float | None) -> str:
    return NOT_RECORDED if x is None else f"{x:.2f}"


def _usd(x: float | None, missing: str) -> str:
    return missing if x is None else f"${x:,.4f}"


def _level(arm_id: str) -> str:
    return arm_id.split(":", 1)[1]


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def level_columns(confidence: float) -> tuple[str, ...]:
    """The level table's header, with the card's own confidence level in the interval columns."""
    c = percent(confidence)
    return (
        LEVEL_COLUMNS[0],
        LEVEL_COLUMNS[1],
        f"{c} interval",
        LEVEL_COLUMNS[3],
        f"leaky {c} interval",
        *LEVEL_COLUMNS[5:],
    )


LEVEL_COLUMNS = (
    "level",
    "strict pass@1",
    "interval",
    "leaky pass@1",
    "leaky interval",
    "overshoot",
    *(f"strict pass@{k}" for k in SHOWN_K),
    "median model calls",
    "median tokens",
    "median episode seconds",
    "min calls",
    "no tool call",
    "stopped short",
    "saturated",
    "instrument",
    "incomplete",
)


def _pass_at(cell: Cell, k: int) -> str:
    for p in cell.pass_at_k:
        if p.k == k:
            return _rate(p.value)
    return NA


def _saturated(cell: Cell, depth: bool) -> str:
    if cell.saturated_strict is None:
        return NA
    strict = "yes" if cell.saturated_strict else "no"
    if not depth:
        return strict
    return f"strict {strict}, leaky {'yes' if cell.saturated_leaky else 'no'}"


def _instrument(cell: Cell) -> str:
    i = cell.instrument
    return "0" if i.count == 0 else f"{i.count} ({_rate(i.rate)})"


def _level_row(cell: Cell, depth: bool) -> list[str]:
    return [
        f"`{_level(cell.arm_id)}`",
        _rate(cell.strict.pass_at_1 if cell.strict else None),
        _interval(cell.strict),
        _rate(cell.leaky.pass_at_1 if cell.leaky else None),
        _interval(cell.leaky),
        _rate(cell.overshoot),
        *(_pass_at(cell, k) for k in SHOWN_K),
        _num(cell.median_model_calls, NA),
        _num(cell.median_tokens),
        _secs(cell.median_episode_s),
        str(cell.min_calls),
        _rate(cell.no_tool_call),
        _rate(cell.stopped_short),
        _saturated(cell, depth),
        _instrument(cell),
        "yes" if cell.incomplete else "no",
    ]


def _withheld_row(cell: Cell) -> list[str]:
    """A withheld cell's row: its counts stay, every figure reads withheld."""
    row = ["withheld"] * len(LEVEL_COLUMNS)
    row[0] = f"`{_level(cell.arm_id)}`"
    row[LEVEL_COLUMNS.index("min calls")] = str(cell.min_calls)
    row[LEVEL_COLUMNS.index("instrument")] = _instrument(cell)
    row[LEVEL_COLUMNS.index("incomplete")] = "yes" if cell.incomplete else "no"
    return row


def _row(cell: Cell, depth: bool) -> list[str]:
    return _level_row(cell, depth) if cell.published else _withheld_row(cell)


def _verdict(c: Comparison) -> str:
    if c.verdict == "left_out":
        return f"left out: {c.reason}"
    if c.verdict == "too_small":
        return "too small for this design to call"
    direction = "falls" if (c.diff or 0.0) > 0 else "rises"
    return f"distinguishable (the rate {direction} at `{_level(c.upper)}`)"


def _comparison_rows(comparisons: Sequence[Comparison]) -> list[list[str]]:
    rows = []
    for c in comparisons:
        interval = NA if c.low is None or c.high is None else f"[{c.low:.3f}, {c.high:.3f}]"
        rows.append(
            [
                f"`{_level(c.lower)}` → `{_level(c.upper)}`",
                _rate(c.diff),
                interval,
                _rate(c.churn),
                str(c.pairs_used),
                _verdict(c),
            ]
        )
    return rows


def _ordering(o: Ordering) -> str:
    if o.verdict == "yes":
        text = "yes"
    elif o.verdict == "no":
        text = f"no ({', '.join(o.rising)} rises distinguishably)"
    else:
        text = f"cannot tell ({', '.join(o.left_out)} left out)"
    if o.saturated:
        text += f"; saturated on {o.rate}: {', '.join(f'`{s}`' for s in o.saturated)}"
    return text


def _knob_section(a: Artifact, table: KnobTable) -> list[str]:
    depth = table.knob == "depth"
    cells = [a.cell(arm) for arm in table.levels]
    title = f"## `{table.knob}`: one row per level (read on {table.read_on} pass@1)"
    out = ["", title, ""]
    out += _table(level_columns(a.thresholds.confidence), [_row(c, depth) for c in cells])
    rates = ("leaky", "strict") if depth else ("strict",)
    for rate in rates:
        comps = [c for c in table.comparisons if c.rate == rate]
        out += ["", f"### `{table.knob}`: adjacent levels on {rate} pass@1", ""]
        if not comps:
            out.append("One level only: nothing to compare.")
            continue
        out += _table(
            (
                "pair",
                "difference (lower − upper)",
                f"paired {percent(a.thresholds.confidence)} interval",
                "churn",
                "seeds",
                "verdict",
            ),
            _comparison_rows(comps),
        )
    order = (
        "Ordering, read from the adjacent comparisons: strict pass@1 non-increasing across the "
        f"levels: {_ordering(table.ordering_strict)}."
    )
    if table.ordering_leaky is not None:
        order += f" Leaky pass@1 non-increasing: {_ordering(table.ordering_leaky)}."
    out += ["", order]
    return out


def render_knob(artifact: Artifact, knob: str) -> str:
    """One knob's section of the card (levels, adjacent comparisons, ordering) as markdown."""
    for table in artifact.knobs:
        if table.knob == knob:
            return "\n".join(_knob_section(artifact, table)).lstrip("\n") + "\n"
    raise KeyError(f"the card has no knob {knob!r}")


def _controls_section(a: Artifact) -> list[str]:
    if not a.controls:
        return []
    out = [
        "",
        "## Control arms",
        "",
        "Each control arm separates a knob from something that travels with it (history, "
        "block or prompt length). They are not levels, and no comparison or ordering reads them.",
        "",
    ]
    header = level_columns(a.thresholds.confidence)
    return out + _table(header, [_row(a.cell(arm), False) for arm in a.controls])


def _concurrency(p: Provenance) -> str:
    """How many episodes were in flight at once, per session when the sessions differ."""
    per_session = sorted({s.concurrency for s in p.sessions if s.concurrency is not None})
    if len(per_session) > 1:
        return f"{', '.join(map(str, per_session))} episodes in flight at once, by session"
    value = per_session[0] if per_session else p.concurrency
    return NOT_RECORDED if value is None else f"{value} episodes in flight at once"


def _arm_rows(a: Artifact) -> list[Cell]:
    """Every arm in card order: each knob's levels, then the control arms."""
    order = [arm for t in a.knobs for arm in t.levels] + list(a.controls)
    return [a.cell(arm) for arm in order]


def _cost_sections(a: Artifact) -> list[str]:
    cells = _arm_rows(a)
    calls = []
    time = []
    for c in cells:
        k = c.costs
        if k is None:
            reason = "withheld" if not c.published else "no scored episode"
            calls.append([f"`{c.arm_id}`", *([reason] * 8)])
            time.append([f"`{c.arm_id}`", *([reason] * 7)])
            continue
        calls.append(
            [
                f"`{c.arm_id}`",
                _num(k.mean_model_calls),
                _num(k.median_model_calls),
                _num(k.mean_tool_calls),
                _num(k.median_tool_calls),
                _num(k.mean_tokens),
                _num(k.median_tokens),
                _num(k.p90_tokens),
                NA
                if k.mean_tokens is not None and k.tokens_per_strict_pass is None
                else _num(k.tokens_per_strict_pass),
            ]
        )
        time.append(
            [
                f"`{c.arm_id}`",
                _secs(k.episode_s_median),
                _secs(k.episode_s_p90),
                _secs(k.model_s_median),
                _secs(k.model_s_p90),
                _secs(k.harness_s_median),
                _secs(k.harness_s_p90),
                _secs(k.setup_s_median),
            ]
        )
    concurrency = _concurrency(a.provenance)
    out = ["", "## Cost: calls and tokens per episode (scored episodes)", ""]
    out += _table(
        (
            "arm",
            "mean model calls",
            "median model calls",
            "mean tool calls",
            "median tool calls",
            "mean tokens",
            "median tokens",
            "p90 tokens",
            "tokens per strict pass",
        ),
        calls,
    )
    out += [
        "",
        "## Cost: time per episode (scored episodes that kept time)",
        "",
        f"Concurrency: {concurrency}. Seconds belong to the serving and its load as much as to "
        "the task: they are printed and decide nothing.",
        "",
    ]
    if any(c.costs is not None and c.costs.timed_episodes for c in cells):
        out += _table(
            (
                "arm",
                "median episode s",
                "p90 episode s",
                "median model s",
                "p90 model s",
                "median harness s",
                "p90 harness s",
                "median setup s",
            ),
            time,
        )
    else:
        out.append(f"No episode of this run kept time: every time figure reads {NOT_RECORDED}.")
    rates = a.provenance.rates
    if rates is None:
        rate_line = "No rate was declared for this model, so the card has no computed dollars."
    else:
        rate_line = (
            "Computed dollars use the declared rates per million tokens: "
            f"${rates.input:g} uncached input, ${rates.cached_input:g} cached input, "
            f"${rates.output:g} completion, read on {rates.as_of}"
            + (f" from {rates.source}." if rates.source else ".")
        )
    out += [
        "",
        "## Cost: token totals and dollars (every episode, instrument failures included)",
        "",
        rate_line + " Reasoning tokens are part of the completion tokens and are not added again.",
        "",
    ]
    missing_usd = "no rate" if rates is None else NOT_RECORDED
    rows = []
    for label, t in [(f"`{c.arm_id}`", c.totals) for c in cells] + [("all arms", a.run_totals)]:
        provider = (
            "not reported"
            if t.provider_usd is None
            else f"{_usd(t.provider_usd, NOT_RECORDED)} ({t.provider_usd_episodes} episodes)"
        )
        rows.append(
            [
                label,
                str(t.episodes),
                _num(t.prompt_tokens),
                _num(t.cached_input_tokens),
                _num(t.completion_tokens),
                _num(t.reasoning_tokens),
                _rate(t.reasoning_share),
                _usd(t.computed_usd, missing_usd),
                provider,
            ]
        )
    out += _table(
        (
            "arm",
            "episodes",
            "uncached input",
            "cached input",
            "completion",
            "of which reasoning",
            "reasoning share",
            "computed dollars",
            "provider-reported dollars",
        ),
        rows,
    )
    return out


def _mapping(m: dict[str, Any]) -> str:
    if not m:
        return NOT_RECORDED
    return ", ".join(f"{k} {'not set' if m[k] is None else m[k]}" for k in sorted(m))


def _thresholds(th: Thresholds) -> str:
    return (
        f"saturated at or below {th.saturation_low:g} or at or above {th.saturation_high:g}; "
        f"resolution {th.resolution:g}; no-call limit {th.no_call_max:g}; instrument limit "
        f"{th.instrument_max:g}; {percent(th.confidence)} intervals (cluster-adjusted Wilson "
        "rates, paired MOVER differences; no resampling)"
    )


def _count(n: int | None, unit: str) -> str:
    return f"{n:,} {unit}" if n is not None else f"{unit} {NOT_RECORDED}"


def _llamacpp_lines(f: LlamaCppFacts) -> list[str]:
    """What a llama.cpp server reported about itself and the file it serves (self-served)."""
    server = f" ({f.server})" if f.server else ""
    threads = f"{f.threads} thread(s)" if f.threads is not None else f"threads {NOT_RECORDED}"
    slots = f"{f.slots} slot(s)" if f.slots is not None else f"slots {NOT_RECORDED}"
    sha = f"`{f.model_sha256}`" if f.model_sha256 else NOT_RECORDED
    tools = {True: "lists tools", False: "lists no tools", None: "tool support not reported"}
    return [
        f"- llama.cpp: build {f.build or NOT_RECORDED}{server}; {threads}, {slots}, context "
        f"{_count(f.n_ctx, 'tokens')}" + (f"; started by {f.started_by}" if f.started_by else ""),
        f"- model file: {f.model_file or NOT_RECORDED}, {_count(f.model_bytes, 'bytes')}, "
        f"quantisation {f.quantization or NOT_RECORDED}, {_count(f.parameters, 'parameters')}",
        f"- model file sha256: {sha} ({f.sha256_from})",
        f"- chat template: {f.template or NOT_RECORDED}, sha256 "
        + (f"`{f.template_sha256}`" if f.template_sha256 else NOT_RECORDED)
        + f" ({tools[f.template_tools]})",
    ]


def _serving_lines(p: Provenance) -> list[str]:
    s = p.serving
    served = f"- served: {s.kind}" + (
        f" ({s.provider})" if s.provider and s.provider != s.kind else ""
    )
    lines = [f"- model: `{p.model}`", served]
    if s.policy:
        lines.append(f"- reference policy: `{s.policy}`")
    if s.kind == "self-served" or s.stack or s.gpu or s.weights_revision:
        lines += [
            f"- serving stack: {s.stack or NOT_RECORDED} {s.stack_version or ''}".rstrip(),
            f"- serving flags: {' '.join(s.flags) if s.flags else NOT_RECORDED}",
            f"- GPU: {s.gpu or NOT_RECORDED}",
            f"- weights revision: {s.weights_revision or NOT_RECORDED}",
        ]
    if s.context_window is not None:
        lines.append(f"- context window: {s.context_window} tokens (as the server reported it)")
    if s.llamacpp is not None:
        lines += _llamacpp_lines(s.llamacpp)
    return lines


def _observed_lines(o: ServingObserved | None) -> list[str]:
    """What the responses showed about the serving (model cards)."""
    if o is None:
        return []
    if o.system_fingerprints:
        fps = ", ".join(f"`{k}` x{v}" for k, v in o.system_fingerprints.items())
        fps += (
            f"; none on {o.responses_without_fingerprint}"
            if o.responses_without_fingerprint
            else ""
        )
    else:
        fps = f"null (none of {o.responses} responses carried one)"
    share = f"{o.estimated_share:.1%}" if o.estimated_share is not None else "-"
    overflow = (
        f"{o.context_overflow} episodes ("
        + ", ".join(f"`{a}` {n}" for a, n in o.context_overflow_by_arm.items())
        + "), scored turn_limit and kept in the denominator"
        if o.context_overflow
        else "0 episodes"
    )
    return [
        f"- system_fingerprint over {o.responses} responses: {fps}",
        f"- tokens estimated with the pinned tokenizer (responses without usage): "
        f"{o.estimated_tokens:,} ({share} of all tokens)",
        f"- context overflow: {overflow}",
    ]


def _provenance_section(a: Artifact) -> list[str]:
    p = a.provenance
    sessions = (
        "; ".join(
            f"#{s.index} {s.started_at} to {s.ended_at or 'not recorded'}, {s.episodes_written} "
            f"episodes, stopped: {s.stop_reason}" + (f" ({s.detail})" if s.detail else "")
            for s in p.sessions
        )
        or NOT_RECORDED
    )
    lines = [
        "",
        "## Provenance",
        "",
        f"- package version: {p.package_version}",
        f"- harness: {p.harness}; verifiers: {p.verifiers_version or NOT_RECORDED}",
        f"- engine hash: `{p.engine_hash}`",
        f"- generator hash: `{p.generator_hash}` "
        + (
            f"(stale: this install's is `{a.installed_generator_hash}`)"
            if a.stale
            else "(this install's)"
        ),
        f"- vocabulary hash: `{p.vocabulary_hash}`",
        f"- seed list hash: `{p.seed_list_hash}`",
        f"- seeds ({len(p.seeds)}): {', '.join(str(s) for s in p.seeds)}",
        f"- environment hash: `{p.environment_hash}` ({describe_environment_hash(p.environment_hash)})",
        f"- pre-registration hash: `{p.preregistration_hash}`",
        f"- records sha256: `{p.records_sha256}`",
        *_serving_lines(p),
        *_observed_lines(a.serving_observed),
        f"- decoding: {_mapping(p.decoding)}",
        f"- budget: {_mapping(p.budget)}",
        f"- turn limit: {p.turn_limit if p.turn_limit is not None else NOT_RECORDED} model calls",
        f"- concurrency: {_concurrency(p)}",
        f"- arms ({len(p.arms)}), tasks per level {len(p.seeds)}, attempts per task {p.attempts}",
        f"- verifier strictness: {', '.join(p.strictness)}",
        f"- sessions: {sessions}",
        f"- thresholds: {_thresholds(a.thresholds)}",
    ]
    if a.thresholds != p.thresholds:
        lines.append(f"- thresholds the run declared: {_thresholds(p.thresholds)}")
    if p.own_tools is not None:
        lines.append(
            f"- own tools: {len(p.own_tools.names)} from {p.own_tools.file}, sha256 "
            f"`{p.own_tools.sha256}`, in place of the read tools"
        )
    cards = ", ".join(a.published_cards) if a.published_cards else "none"
    lines.append(f"- published cards it was checked against: {cards}")
    return lines


def _summary(a: Artifact) -> list[str]:
    cells = a.cells
    planned = sum(c.planned for c in cells)
    episodes = sum(c.episodes for c in cells)
    scored = sum(c.scored for c in cells)
    failed = sum(c.instrument.count for c in cells)
    p = a.provenance
    lines = [
        f"{len(cells)} arms × {len(p.seeds)} tasks × {p.attempts} attempts: {planned} episodes "
        f"planned, {episodes} written, {scored} scored, {failed} failed on the instrument's side. "
        f"The run's last session stopped with {p.stop_reason or 'no session recorded'}.",
    ]
    peak = a.no_call_peak
    if peak is not None:
        lines.append(
            f"The no-call refusal passed: the highest no-call share in any cell is "
            f"{peak.share:.3f}, on `{peak.arm_id}` (the limit is {a.thresholds.no_call_max:g})."
        )
    withheld = [c.arm_id for c in cells if not c.published]
    if withheld:
        lines.append(
            "Withheld for instrument failures above "
            f"{a.thresholds.instrument_max:g}: " + ", ".join(f"`{w}`" for w in withheld) + "."
        )
    incomplete = [c.arm_id for c in cells if c.incomplete]
    if incomplete:
        lines.append("Incomplete: " + ", ".join(f"`{w}`" for w in incomplete) + ".")
    return lines


def _banner(a: Artifact) -> list[str]:
    out = []
    if a.kind == "reference-policy":
        out.append(
            "> **Reference policy.** Every figure below is a scripted baseline's, served by "
            "poisson-tasks itself: it shows how the instrument reads a known behaviour and is "
            "no language model's result."
        )
    if a.stale:
        out.append(
            f"> **Stale.** This card was made with generator build "
            f"`{short_hash(a.provenance.generator_hash)}`; this install's is "
            f"`{short_hash(a.installed_generator_hash)}`. The tasks it measured are not the ones "
            "this install generates."
        )
    return out


def render_document(artifact: Artifact) -> str:
    """The card as markdown: tables per knob, controls, costs, provenance and closing texts."""
    a = artifact
    title = (
        f"# Reference-policy card: `{a.provenance.serving.policy or a.model}`"
        if a.kind == "reference-policy"
        else f"# Card: `{a.model}`"
    )
    out = [title, ""]
    banner = _banner(a)
    if banner:
        out += [*banner, ""]
    out += _summary(a)
    for table in a.knobs:
        out += _knob_section(a, table)
    out += _controls_section(a)
    out += _cost_sections(a)
    out += _provenance_section(a)
    out += ["", "## What this card is", "", a.statements.what_it_is]
    out += ["", "## What this card does not claim", ""]
    out += [f"- {c.text}" for c in a.statements.does_not_claim]
    if a.statements.depth_note:
        out += ["", "## How depth is read", "", a.statements.depth_note]
    return "\n".join(out) + "\n"
