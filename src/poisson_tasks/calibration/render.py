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
    FirstRequestContrast,
    FirstRequestPin,
    KnobTable,
    Ordering,
    RateFigure,
    ReplayShare,
    Reproducibility,
    ServingObserved,
)
from poisson_tasks.calibration.comparisons import ordering_reading
from poisson_tasks.calibration.pacingline import pacing_lines
from poisson_tasks.calibration.provenance import Provenance, ServingInfo
from poisson_tasks.calibration.statements import stale_text
from poisson_tasks.glossary import POINTER
from poisson_tasks.hashes import describe_environment_hash
from poisson_tasks.local.facts import LlamaCppFacts
from poisson_tasks.nouns import counted, noun
from poisson_tasks.prereg import Thresholds
from poisson_tasks.runfolder import stop_words
from poisson_tasks.servingpin import N10_FIELDS
from poisson_tasks.supplied import markdown, markdown_code
from poisson_tasks.verifier import INSTRUMENT_OUTCOMES, OUTCOMES

NOT_RECORDED = "not recorded"
NA = "n/a"
SHOWN_K = (2, 5)
FEW_EVENTS_NOTE = "few events: interval wide"

__all__ = [
    "level_columns",
    "percent",
    "render_costs",
    "render_document",
    "render_knob",
    "reproducibility_lines",
]


def _rate(value: float | None) -> str:
    return NA if value is None else f"{value:.3f}"


def _interval(fig: RateFigure | None) -> str:
    if fig is None:
        return NA
    text = f"[{fig.low:.3f}, {fig.high:.3f}]"
    return f"{text} ({FEW_EVENTS_NOTE})" if fig.few_events else text


def percent(confidence: float) -> str:
    """A confidence level as the card prints it: 0.9 -> 90%, 0.975 -> 97.5%."""
    return f"{confidence * 100:g}%"


def _num(value: float | None, missing: str = NOT_RECORDED) -> str:
    """A count-like figure: an integer prints bare, anything else with one decimal."""
    if value is None:
        return missing
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


def _secs(seconds: float | None) -> str:
    return NOT_RECORDED if seconds is None else f"{seconds:.2f}"


def _usd(dollars: float | None, missing: str) -> str:
    return missing if dollars is None else f"${dollars:,.4f}"


def _level(arm_id: str) -> str:
    return arm_id.split(":", 1)[1]


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def level_columns(confidence: float) -> tuple[str, ...]:
    """The level table's header, with the card's own confidence level in the interval columns."""
    level = percent(confidence)
    return (
        LEVEL_COLUMNS[0],
        LEVEL_COLUMNS[1],
        f"{level} interval",
        LEVEL_COLUMNS[3],
        f"leaky {level} interval",
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
    *(f"strict pass^{k}" for k in SHOWN_K),
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


def _pass_at(cell: Cell, attempts: int) -> str:
    for figure in cell.pass_at_k:
        if figure.attempts == attempts:
            return _rate(figure.value)
    return NA


def _pass_hat(cell: Cell, attempts: int) -> str:
    for figure in cell.pass_hat_k:
        if figure.attempts == attempts:
            return _rate(figure.value)
    return NA


def _saturated(cell: Cell, depth: bool) -> str:
    if cell.saturated_strict is None:
        return NA
    strict = "yes" if cell.saturated_strict else "no"
    if not depth:
        return strict
    return f"strict {strict}, leaky {'yes' if cell.saturated_leaky else 'no'}"


def _instrument(cell: Cell) -> str:
    instrument = cell.instrument
    return "0" if instrument.count == 0 else f"{instrument.count} ({_rate(instrument.rate)})"


def _level_row(cell: Cell, depth: bool) -> list[str]:
    return [
        f"`{_level(cell.arm_id)}`",
        _rate(cell.strict.pass_at_1 if cell.strict else None),
        _interval(cell.strict),
        _rate(cell.leaky.pass_at_1 if cell.leaky else None),
        _interval(cell.leaky),
        _rate(cell.overshoot),
        *(_pass_at(cell, k) for k in SHOWN_K),
        *(_pass_hat(cell, k) for k in SHOWN_K),
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


# The scored outcomes, best first: the verifier's closed vocabulary in reverse priority order.
SCORED_OUTCOMES: tuple[str, ...] = tuple(
    o for o in reversed(OUTCOMES) if o not in INSTRUMENT_OUTCOMES
)


def outcome_columns() -> tuple[str, ...]:
    """The outcome table's header: the scored outcomes, then no tool call and the instrument."""
    return ("level", "scored", *SCORED_OUTCOMES, "no tool call", "instrument failures")


def _clauses(cell: Cell) -> str:
    count = cell.outcomes.get("malformed_call", 0)
    if not count:
        return "0"
    clauses = ", ".join(
        f"clause {c} {n}" if c.isdigit() else f"{c} {n}" for c, n in cell.malformed_clauses.items()
    )
    return f"{count} ({clauses})"


def _outcome_row(cell: Cell, label: str) -> list[str]:
    if not cell.published:
        row = ["withheld"] * len(outcome_columns())
        row[0], row[-1] = label, _failures(cell)
        return row
    cells = [
        _clauses(cell) if outcome == "malformed_call" else str(cell.outcomes.get(outcome, 0))
        for outcome in SCORED_OUTCOMES
    ]
    return [label, str(cell.scored), *cells, _no_calls(cell), _failures(cell)]


def _no_calls(cell: Cell) -> str:
    calls = cell.no_calls
    if not calls.as_text:
        return str(calls.episodes)
    dialects = ", ".join(f"{d} {n}" for d, n in calls.dialects.items())
    return f"{calls.episodes} ({calls.as_text} wrote a call as text: {dialects})"


def _failures(cell: Cell) -> str:
    instrument = cell.instrument
    if not instrument.count:
        return "0"
    return (
        f"{instrument.count} ("
        + ", ".join(f"{o} {n}" for o, n in instrument.by_outcome.items())
        + ")"
    )


def _outcome_table(cells: Sequence[Cell], title: str) -> list[str]:
    """How each level's episodes ended: how a level fails, not only how often."""
    rows = [
        _outcome_row(c, f"`{c.arm_id}`" if c.control else f"`{_level(c.arm_id)}`") for c in cells
    ]
    intro = (
        "Scored episodes by outcome (malformed calls by the format clause they broke); no tool "
        "call counts the scored episodes that made none, whatever their outcome; instrument "
        "failures are out of every denominator."
    )
    return ["", title, "", intro, "", *_table(outcome_columns(), rows)]


def _verdict(comparison: Comparison) -> str:
    if comparison.verdict == "left_out":
        return f"left out: {comparison.reason}"
    if comparison.verdict == "too_small":
        because = f" ({comparison.reason})" if comparison.reason else ""
        return f"too small for this design to call{because}"
    direction = "falls" if (comparison.diff or 0.0) > 0 else "rises"
    return f"distinguishable (the rate {direction} at `{_level(comparison.upper)}`)"


def _comparison_rows(comparisons: Sequence[Comparison]) -> list[list[str]]:
    rows = []
    for comparison in comparisons:
        interval = (
            NA
            if comparison.low is None or comparison.high is None
            else f"[{comparison.low:.3f}, {comparison.high:.3f}]"
        )
        rows.append(
            [
                f"`{_level(comparison.lower)}` → `{_level(comparison.upper)}`",
                _rate(comparison.diff),
                interval,
                _rate(comparison.churn),
                str(comparison.pairs_used),
                _verdict(comparison),
            ]
        )
    return rows


def _ordering(ordering: Ordering) -> str:
    verdict = ordering.verdict.replace("_", " ")
    return (
        f"{ordering.rate.capitalize()} pass@1 non-increasing across the levels: {verdict} "
        f"({ordering_reading(ordering)})."
    )


def _knob_section(artifact: Artifact, table: KnobTable) -> list[str]:
    depth = table.knob == "depth"
    cells = [artifact.cell(arm) for arm in table.levels]
    title = f"## `{table.knob}`: one row per level (read on {table.read_on} pass@1)"
    out = ["", title, ""]
    out += _table(level_columns(artifact.thresholds.confidence), [_row(c, depth) for c in cells])
    out += _outcome_table(cells, f"### `{table.knob}`: how each level's episodes ended")
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
                f"paired {percent(artifact.thresholds.confidence)} interval",
                "churn",
                "seeds",
                "verdict",
            ),
            _comparison_rows(comps),
        )
    if table.ordering_strict.verdict == "single_level":
        out += [
            "",
            f"Ordering: the card has one level of `{table.knob}`, so there is nothing to order.",
        ]
        return out
    orderings = [table.ordering_strict, table.ordering_leaky]
    order = " ".join(_ordering(o) for o in orderings if o is not None)
    out += ["", f"Ordering, from the point estimates and the adjacent comparisons. {order}"]
    return out


def render_knob(artifact: Artifact, knob: str) -> str:
    """One knob's section of the card (levels, adjacent comparisons, ordering) as markdown."""
    for table in artifact.knobs:
        if table.knob == knob:
            return "\n".join(_knob_section(artifact, table)).lstrip("\n") + "\n"
    raise KeyError(f"the card has no knob {knob!r}")


def _controls_section(artifact: Artifact) -> list[str]:
    if not artifact.controls:
        return []
    out = [
        "",
        "## Control arms",
        "",
        "Each control arm separates a knob from something that travels with it (history, "
        "block or prompt length). They are not levels, and no comparison or ordering reads them.",
        "",
    ]
    header = level_columns(artifact.thresholds.confidence)
    cells = [artifact.cell(arm) for arm in artifact.controls]
    out += _table(header, [_row(cell, False) for cell in cells])
    return out + _outcome_table(cells, "### Control arms: how each arm's episodes ended")


def _concurrency(provenance: Provenance) -> str:
    """How many episodes were in flight at once, per session when the sessions differ (and per
    shard, on a merged run: each shard ran on its own machine against its own server)."""
    per_session = sorted({s.concurrency for s in provenance.sessions if s.concurrency is not None})
    where = "" if provenance.shards is None else f" in each of {provenance.shards.count} shards"
    if len(per_session) > 1:
        return f"{', '.join(map(str, per_session))} episodes in flight at once{where}, by session"
    value = per_session[0] if per_session else provenance.concurrency
    if value is None:
        return NOT_RECORDED
    return f"{counted(value, 'episode')} in flight at once{where}"


def _shard_lines(provenance: Provenance) -> list[str]:
    """A merged run: its shards, each one's budget share and what it spent."""
    merged = provenance.shards
    if merged is None:
        return []
    shares = {(s.budget.get("tokens"), s.budget.get("dollars")) for s in merged.shards}
    tokens, dollars = next(iter(shares))
    each = (
        f"{tokens:,} tokens"
        + (f" and ${dollars:g}" if isinstance(dollars, int | float) else "")
        + f" each (the study's caps divided by {merged.count})"
        if len(shares) == 1 and isinstance(tokens, int)
        else "shares differ by shard"
    )
    shards = "; ".join(
        f"#{s.index} {markdown(s.folder)}: {counted(s.episodes, 'episode')}, {s.tokens:,} tokens, sessions "
        + ", ".join(f"#{i}" for i in s.sessions)
        for s in merged.shards
    )
    return [
        f"- shards: {merged.count}, merged {markdown(merged.merged_at)} (rule "
        f"{markdown(merged.rule)}, plan hash {markdown_code(merged.plan_hash)}); the budget above "
        "is the study's, each shard ran within its "
        f"share: {each}",
        f"- shard folders: {shards}",
    ]


def _arm_rows(artifact: Artifact) -> list[Cell]:
    """Every arm in card order: each knob's levels, then the control arms."""
    order = [arm for t in artifact.knobs for arm in t.levels] + list(artifact.controls)
    return [artifact.cell(arm) for arm in order]


def _cost_sections(artifact: Artifact) -> list[str]:
    cells = _arm_rows(artifact)
    calls = []
    time = []
    for cell in cells:
        costs = cell.costs
        if costs is None:
            reason = "withheld" if not cell.published else "no scored episode"
            calls.append([f"`{cell.arm_id}`", *([reason] * 8)])
            time.append([f"`{cell.arm_id}`", *([reason] * 7)])
            continue
        calls.append(
            [
                f"`{cell.arm_id}`",
                _num(costs.mean_model_calls),
                _num(costs.median_model_calls),
                _num(costs.mean_tool_calls),
                _num(costs.median_tool_calls),
                _num(costs.mean_tokens),
                _num(costs.median_tokens),
                _num(costs.p90_tokens),
                NA
                if costs.mean_tokens is not None and costs.tokens_per_strict_pass is None
                else _num(costs.tokens_per_strict_pass),
            ]
        )
        time.append(
            [
                f"`{cell.arm_id}`",
                _secs(costs.episode_s_median),
                _secs(costs.episode_s_p90),
                _secs(costs.model_s_median),
                _secs(costs.model_s_p90),
                _secs(costs.harness_s_median),
                _secs(costs.harness_s_p90),
                _secs(costs.setup_s_median),
            ]
        )
    concurrency = _concurrency(artifact.provenance)
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
    rates = artifact.provenance.rates
    if rates is None:
        rate_line = "No rate was declared for this model, so the card has no computed dollars."
    else:
        rate_line = (
            "Computed dollars use the declared rates per million tokens: "
            f"${rates.input:g} uncached input, ${rates.cached_input:g} cached input, "
            f"${rates.output:g} completion, read on {markdown(rates.as_of)}"
            + (f" from {markdown(rates.source)}." if rates.source else ".")
        )
    out += [
        "",
        "## Cost: token totals and dollars (every episode, instrument failures included)",
        "",
        rate_line
        + " Reasoning tokens are part of the completion tokens and are not added again."
        + _estimated_note(artifact.serving_observed),
        "",
    ]
    missing_usd = "no rate" if rates is None else NOT_RECORDED
    rows = []
    for label, totals in [(f"`{c.arm_id}`", c.totals) for c in cells] + [
        ("all arms", artifact.run_totals)
    ]:
        provider = (
            "not reported"
            if totals.provider_usd is None
            else f"{_usd(totals.provider_usd, NOT_RECORDED)} "
            f"({counted(totals.provider_usd_episodes, 'episode')})"
        )
        rows.append(
            [
                label,
                str(totals.episodes),
                _num(totals.uncached_input_tokens),
                _num(totals.cached_input_tokens),
                _num(totals.completion_tokens),
                _num(totals.reasoning_tokens),
                _rate(totals.reasoning_share),
                _usd(totals.computed_usd, missing_usd),
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


def render_costs(artifact: Artifact) -> str:
    """The card's three cost sections as markdown: what `poisson-tasks view` shows as its cost
    tables, so the page's labels and figures are the card's own."""
    return "\n".join(_cost_sections(artifact)).lstrip("\n") + "\n"


def _mapping(mapping: dict[str, Any]) -> str:
    if not mapping:
        return NOT_RECORDED
    return ", ".join(
        f"{markdown(k)} {'not set' if mapping[k] is None else markdown(mapping[k])}"
        for k in sorted(mapping)
    )


def _thresholds(th: Thresholds) -> str:
    return (
        f"saturated at or below {th.saturation_low:g} or at or above {th.saturation_high:g}; "
        f"resolution {th.resolution:g}; no-call limit {th.no_call_max:g}; instrument limit "
        f"{th.instrument_max:g}; {percent(th.confidence)} intervals (cluster-adjusted "
        "Agresti-Coull rates, paired MOVER differences, calls also need an exact sign test; no "
        "resampling)"
    )


def _count(amount: int | None, unit: str) -> str:
    return f"{amount:,} {unit}" if amount is not None else f"{unit} {NOT_RECORDED}"


def _llamacpp_lines(facts: LlamaCppFacts) -> list[str]:
    """What a llama.cpp server reported about itself and the file it serves (self-served)."""
    server = f" ({markdown(facts.server)})" if facts.server else ""
    threads = (
        counted(facts.threads, "thread") if facts.threads is not None else f"threads {NOT_RECORDED}"
    )
    slots = counted(facts.slots, "slot") if facts.slots is not None else f"slots {NOT_RECORDED}"
    sha = f"`{facts.model_sha256}`" if facts.model_sha256 else NOT_RECORDED
    tools = {True: "lists tools", False: "lists no tools", None: "tool support not reported"}
    return [
        f"- llama.cpp: build {markdown(facts.build or NOT_RECORDED)}{server}; {threads}, {slots}, "
        "context "
        f"{_count(facts.n_ctx, 'tokens')}"
        + (f"; started by {markdown(facts.started_by)}" if facts.started_by else ""),
        f"- model file: {markdown(facts.model_file or NOT_RECORDED)}, "
        f"{_count(facts.model_bytes, 'bytes')}, "
        f"quantisation {markdown(facts.quantization or NOT_RECORDED)}, "
        f"{_count(facts.parameters, 'parameters')}",
        f"- model file sha256: {sha} ({markdown(facts.sha256_from)})",
        _template_line(facts, tools[facts.template_tools]),
    ]


def _template_line(facts: LlamaCppFacts, tools: str) -> str:
    """The chat template's name and its two hashes, each with how a reader reproduces it."""
    file = (
        f"file sha256 `{facts.template_file_sha256}` (`sha256sum` of the template file); "
        if facts.template_file_sha256
        else ""
    )
    served = (
        f"served sha256 `{facts.template_sha256}` (of /props `chat_template`: `curl -s "
        "HOST/props | jq -j .chat_template | sha256sum`"
        + (
            ", the file less one trailing newline if it ends in one"
            if facts.template_file_sha256
            else ""
        )
        + ")"
        if facts.template_sha256
        else f"served sha256 {NOT_RECORDED}"
    )
    return f"- chat template: {markdown(facts.template or NOT_RECORDED)} ({tools}); {file}{served}"


def _serving_lines(provenance: Provenance) -> list[str]:
    serving = provenance.serving
    served = f"- served: {serving.kind}" + (
        f" ({markdown(serving.provider)})"
        if serving.provider and serving.provider != serving.kind
        else ""
    )
    lines = [f"- model: {markdown_code(provenance.model)}", served]
    if serving.policy:
        lines.append(f"- reference policy: {markdown_code(serving.policy)}")
    if serving.kind == "self-served" or serving.stack or serving.gpu or serving.weights_revision:
        lines += [
            f"- serving stack: {markdown(serving.stack or NOT_RECORDED)} "
            f"{markdown(serving.stack_version or '')}".rstrip(),
            f"- serving flags: {_flags(serving)}",
            f"- GPU: {markdown(serving.gpu or NOT_RECORDED)}",
            f"- weights revision: {markdown(serving.weights_revision or NOT_RECORDED)}",
        ]
    if serving.context_window is not None:
        lines.append(
            f"- context window: {serving.context_window} tokens (as the server reported it)"
        )
    if serving.llamacpp is not None:
        lines += _llamacpp_lines(serving.llamacpp)
    return lines


def _flags(serving: ServingInfo) -> str:
    return markdown(" ".join(serving.flags)) if serving.flags else NOT_RECORDED


def _serving_summary(serving: ServingInfo) -> str:
    """One serving in one line: kind, engine and version, revision, flags, context window."""
    parts: list[str] = [serving.kind]
    engine = " ".join(x for x in (serving.stack or serving.provider, serving.stack_version) if x)
    if engine:
        parts.append(markdown(engine))
    parts.append(f"weights revision {markdown(serving.weights_revision or NOT_RECORDED)}")
    parts.append(f"flags {_flags(serving)}")
    if serving.context_window is not None:
        parts.append(f"context window {serving.context_window}")
    if serving.policy:
        parts.append(f"policy {markdown_code(serving.policy)}")
    return ", ".join(parts)


def _servings_lines(provenance: Provenance) -> list[str]:
    """Every session's serving, when the figures pool several (pin N10 did not hold)."""
    if not provenance.pooled_servings:
        return []
    lines = [
        "- servings: the figures pool several servings (pin N10 did not hold across the "
        f"{len(provenance.sessions)} sessions); each session's:"
    ]
    for session in provenance.sessions:
        served = session.serving or provenance.serving
        change = (
            f" (not as session #0: {markdown(session.serving_change)})"
            if session.serving_change
            else ""
        )
        lines.append(f"  - session #{session.index}: {_serving_summary(served)}{change}")
    return lines


def _estimated_note(observed: ServingObserved | None) -> str:
    """Tokens are measured; only those of responses without usage are estimated, and then said."""
    if observed is None or not observed.estimated_tokens:
        return ""
    share = f"{observed.estimated_share:.1%}" if observed.estimated_share is not None else "-"
    return (
        f" Estimated, not measured: {observed.estimated_tokens:,} tokens ({share} of all tokens), "
        "of responses that reported no usage, counted with the pinned tokenizer (o200k_base), "
        "another model's tokenizer; the dollars on them are estimates too."
    )


def _observed_lines(observed: ServingObserved | None) -> list[str]:
    """What the responses showed about the serving (model cards)."""
    if observed is None:
        return []
    if observed.system_fingerprints:
        fps = ", ".join(f"{markdown_code(k)} x{v}" for k, v in observed.system_fingerprints.items())
        fps += (
            f"; none on {observed.responses_without_fingerprint}"
            if observed.responses_without_fingerprint
            else ""
        )
    else:
        fps = f"null (none of {counted(observed.responses, 'response')} carried one)"
    share = f"{observed.estimated_share:.1%}" if observed.estimated_share is not None else "-"
    overflow = (
        f"{counted(observed.context_overflow, 'episode')} ("
        + ", ".join(f"`{a}` {n}" for a, n in observed.context_overflow_by_arm.items())
        + "), scored turn_limit and kept in the denominator"
        if observed.context_overflow
        else "0 episodes"
    )
    return [
        f"- system_fingerprint over {counted(observed.responses, 'response')}: {fps}",
        "- tokens estimated with the pinned tokenizer (counts a response did not report, or "
        f"reported as no count): "
        f"{observed.estimated_tokens:,} ({share} of all tokens)",
        f"- context overflow: {overflow}",
    ]


def _n10_line(provenance: Provenance) -> str:
    held = (
        f"held across the run's {len(provenance.sessions)} session"
        + ("s" if len(provenance.sessions) != 1 else "")
        if not provenance.pooled_servings
        else "not held: "
        + "; ".join(
            f"session #{s.index} {markdown(s.serving_change)}"
            for s in provenance.sessions
            if s.serving_change
        )
        + "; the figures pool several servings (each is listed under Provenance)"
    )
    return f"- N10, the serving pin ({', '.join(label for _, label in N10_FIELDS)}): {held}"


def _median(value: float | None) -> str:
    return NOT_RECORDED if value is None else f"{value:,g}"


def _offset(value: float | None) -> str:
    return NOT_RECORDED if value is None else f"{value:+,g}"


def _n13_contrast(contrast: FirstRequestContrast) -> str:
    if contrast.held is None:
        return "no seed on which every arm was counted"
    if contrast.held:
        return f"held on {contrast.held_seeds} of {counted(contrast.seeds, 'seed')}"
    offsets = ", ".join(f"`{a}` {o:+d}" for a, o in contrast.widest_offsets.items())
    return (
        f"not held on {contrast.seeds - contrast.held_seeds} of {counted(contrast.seeds, 'seed')}: "
        f"server less pinned spreads up to {contrast.widest} tokens across the arms "
        f"(seed {contrast.widest_seed}: {offsets})"
    )


def _n13_lines(pin: FirstRequestPin | None) -> list[str]:
    head = (
        "- N13, realised first-request input tokens (reported, never refused): per arm, the first "
        "request's input tokens as the server counted them beside the pinned tokenizer's count "
        "of the same request; across a contrast's arms it holds when the server's less the "
        f"pinned count is the same on every arm, within {pin.band if pin else 2} tokens, on "
        "every seed"
    )
    if pin is None or pin.status == "not_recorded":
        return [head + ": not recorded (this run's episode lines predate the first-request counts)"]
    if pin.status == "no_server_count":
        return [
            head + ": the server reported no usage on any first request, so nothing is set "
            "beside the pinned count"
        ]
    lines = [head + ":", ""]
    lines += _table(
        ["arm", "tasks", "server tokens", "pinned tokens", "server less pinned"],
        [
            [
                f"`{a.arm_id}`",
                str(a.tasks),
                _median(a.server_median),
                _median(a.pinned_median),
                _offset(a.offset_median),
            ]
            for a in pin.arms
        ],
    )
    if pin.contrasts:
        lines += [""]
        lines += _table(
            ["contrast", "arms", "N13"],
            [[f"`{c.knob}`", str(len(c.arms)), _n13_contrast(c)] for c in pin.contrasts],
        )
    return lines


def _pins_section(artifact: Artifact) -> list[str]:
    """The pin rows no bundle can carry, read off the run: N10 across sessions, N13 per arm."""
    return [
        "",
        "## Pins read off the run",
        "",
        _n10_line(artifact.provenance),
        *_n13_lines(artifact.first_request),
    ]


NOT_REPLAYED = (
    "Not replayed: no sample of this run was run again (`poisson-tasks replay RUN_DIR --sample N` "
    "measures how much of a run comes out the same)."
)


def _replay_row(label: str, figure: ReplayShare) -> list[str]:
    return [
        label,
        str(figure.count),
        f"{figure.share:.3f}",
        f"[{figure.low:.3f}, {figure.high:.3f}]",
    ]


def _serving_facts_line(facts: dict[str, str]) -> str:
    return "; ".join(f"{markdown(label)} {markdown(value)}" for label, value in facts.items())


def reproducibility_lines(rep: Reproducibility | None, confidence: float) -> list[str]:
    """The card's Reproducibility section: a replayed sample beside the run
    (calibration/reproducibility.py), or "not replayed"."""
    out = ["", "## Reproducibility", ""]
    if rep is None:
        return [*out, NOT_REPLAYED]
    out.append(
        f"A replay ran {rep.sample} of the run's {rep.scored_in_run} scored "
        f"{noun(rep.scored_in_run, 'slot')} again, drawn "
        f"across arms with seed {rep.seed} (rule {markdown_code(rep.rule)}), against the run's "
        f"endpoint with its decoding and {rep.seeds or 'per-attempt seeds'}: {rep.replayed} "
        f"replayed, {rep.not_yet_replayed} not yet."
    )
    if rep.replayed:
        level = percent(confidence)
        out += [""]
        out += _table(
            (
                f"of {rep.replayed} replayed {noun(rep.replayed, 'episode')}",
                "count",
                "share",
                f"{level} interval",
            ),
            [
                _replay_row("identical transcript", rep.identical_transcript),
                _replay_row("same tool calls", rep.same_tool_calls),
                _replay_row("same verdict", rep.same_verdict),
                _replay_row("different verdict", rep.different_verdict),
            ],
        )
        firsts = (
            "; ".join(
                f"model call {d.turn}, {'the calls' if d.kind == 'call' else 'the text' if d.kind == 'text' else 'one ended'}: {d.episodes}"
                for d in rep.first_differences
            )
            or "none: every replayed transcript is identical"
        )
        out += [
            "",
            "- an identical transcript has the same bytes in every message (the model's text and "
            "calls, the tools' answers), tool-call ids left out; intervals take the task as the "
            "cluster, as the card's rates do",
            f"- where the first difference appeared: {firsts}",
            f"- strict pass flipped: {rep.pass_flips} of the {rep.different_verdict.count} "
            f"different {noun(rep.different_verdict.count, 'verdict')}",
            f"- verdict flips {rep.different_verdict.share:.3f} beside the smallest difference the "
            f"design calls distinguishable, {rep.resolution:g}: {rep.reading}",
        ]
    out += [
        f"- serving, run: {_serving_facts_line(rep.run_serving)}",
        f"- serving, replay: {_serving_facts_line(rep.replay_serving)}",
    ]
    if rep.serving_differences:
        out.append(
            "- N10 between the run and its replay: not held ("
            + "; ".join(markdown(d) for d in rep.serving_differences)
            + "): **the replay was served otherwise, so it is not a like-for-like re-run**, and "
            "its agreement mixes the change with the serving's nondeterminism"
        )
    else:
        out.append("- N10 between the run and its replay: held (a like-for-like re-run)")
    out.append(f"- replay records sha256: {markdown_code(rep.replay_records_sha256)}")
    return out


def _provenance_section(artifact: Artifact) -> list[str]:
    provenance = artifact.provenance
    sessions = (
        "; ".join(
            f"#{s.index} {markdown(s.started_at)} to {markdown(s.ended_at or NOT_RECORDED)}, "
            f"{counted(s.episodes_written, 'episode')}, stopped: {s.stop_reason}"
            + (f" ({markdown(s.detail)})" if s.detail else "")
            for s in provenance.sessions
        )
        or NOT_RECORDED
    )
    lines = [
        "",
        "## Provenance",
        "",
        f"- package version: {markdown(provenance.package_version)}",
        f"- harness: {markdown(provenance.harness)}; "
        f"verifiers: {markdown(provenance.verifiers_version or NOT_RECORDED)}",
        f"- engine hash: {markdown_code(provenance.engine_hash)} "
        + (
            f"(stale: this install's is `{artifact.installed_engine_hash}`)"
            if "engine" in artifact.stale_hashes
            else "(this install's)"
        ),
        f"- generator hash: {markdown_code(provenance.generator_hash)} "
        + (
            f"(stale: this install's is `{artifact.installed_generator_hash}`)"
            if "generator" in artifact.stale_hashes
            else "(this install's)"
        ),
        f"- vocabulary hash: {markdown_code(provenance.vocabulary_hash)}",
        f"- seed list hash: {markdown_code(provenance.seed_list_hash)}",
        f"- seeds ({len(provenance.seeds)}): {', '.join(str(s) for s in provenance.seeds)}",
        f"- environment hash: {markdown_code(provenance.environment_hash)} "
        f"({markdown(describe_environment_hash(provenance.environment_hash))})",
        f"- pre-registration hash: {markdown_code(provenance.preregistration_hash)}",
        f"- records sha256: {markdown_code(provenance.records_sha256)}",
        *_serving_lines(provenance),
        *_servings_lines(provenance),
        *_observed_lines(artifact.serving_observed),
        f"- decoding: {_mapping(provenance.decoding)}",
        f"- budget: {_mapping(provenance.budget)}",
        f"- turn limit: {NOT_RECORDED if provenance.turn_limit is None else provenance.turn_limit}"
        " model calls",
        f"- concurrency: {_concurrency(provenance)}",
        *pacing_lines(provenance, artifact.rate_limited),
        f"- arms ({len(provenance.arms)}), tasks per level {len(provenance.seeds)}, "
        f"attempts per task {provenance.attempts}",
        f"- verifier strictness: {markdown(', '.join(provenance.strictness))}",
        f"- sessions: {sessions}",
        *_shard_lines(provenance),
        f"- thresholds: {_thresholds(artifact.thresholds)}",
    ]
    if artifact.thresholds != provenance.thresholds:
        lines.append(f"- thresholds the run declared: {_thresholds(provenance.thresholds)}")
    if provenance.own_tools is not None:
        lines.append(
            f"- own tools: {len(provenance.own_tools.names)} from "
            f"{markdown(provenance.own_tools.file_name)}, sha256 "
            f"{markdown_code(provenance.own_tools.sha256)}, in place of the read tools"
        )
    cards = ", ".join(artifact.published_cards) if artifact.published_cards else "none"
    lines.append(f"- published cards it was checked against: {cards}")
    return lines


def _summary(artifact: Artifact) -> list[str]:
    cells = artifact.cells
    planned = sum(c.planned for c in cells)
    episodes = sum(c.episodes for c in cells)
    scored = sum(c.scored for c in cells)
    failed = sum(c.instrument.count for c in cells)
    provenance = artifact.provenance
    lines = [
        f"{counted(len(cells), 'arm')} × {counted(len(provenance.seeds), 'task')} × "
        f"{counted(provenance.attempts, 'attempt')}: {counted(planned, 'episode')} planned, "
        f"{episodes} written, {scored} scored, {failed} failed on the instrument's side. The "
        f"run's last session {stop_words(provenance.stop_reason)}.",
    ]
    peak = artifact.no_call_peak
    if peak is not None:
        lines.append(
            f"The no-call refusal passed: the highest no-call share in any cell is "
            f"{peak.share:.3f}, on `{peak.arm_id}` "
            f"(the limit is {artifact.thresholds.no_call_max:g})."
        )
    withheld = [c.arm_id for c in cells if not c.published]
    if withheld:
        lines.append(
            "Withheld for instrument failures above "
            f"{artifact.thresholds.instrument_max:g}: "
            + ", ".join(f"`{w}`" for w in withheld)
            + "."
        )
    incomplete = [c.arm_id for c in cells if c.incomplete]
    if incomplete:
        lines.append("Incomplete: " + ", ".join(f"`{w}`" for w in incomplete) + ".")
    return lines


def _banner(artifact: Artifact) -> list[str]:
    out = []
    if artifact.kind == "reference-policy":
        out.append(
            "> **Reference policy.** Every figure below is a scripted baseline's, served by "
            "poisson-tasks itself: it shows how the instrument reads a known behaviour and is "
            "no language model's result."
        )
    if artifact.stale:
        installed = {
            "generator": artifact.installed_generator_hash,
            "engine": artifact.installed_engine_hash or artifact.provenance.engine_hash,
        }
        text = stale_text(artifact.provenance, installed, artifact.stale_hashes or ["generator"])
        out.append(f"> **Stale.** {text[0].upper()}{text[1:]}.")
    return out


def render_document(artifact: Artifact) -> str:
    """The card as markdown: tables per knob, controls, costs, provenance and closing texts."""
    title = (
        "# Reference-policy card: "
        + markdown_code(artifact.provenance.serving.policy or artifact.model)
        if artifact.kind == "reference-policy"
        else f"# Card: {markdown_code(artifact.model)}"
    )
    out = [title, ""]
    banner = _banner(artifact)
    if banner:
        out += [*banner, ""]
    if artifact.statements.can_tell:  # a card.json written before the sentence has none
        out += [f"**What this card can tell.** {artifact.statements.can_tell}", "", POINTER, ""]
    out += _summary(artifact)
    for table in artifact.knobs:
        out += _knob_section(artifact, table)
    out += _controls_section(artifact)
    out += _cost_sections(artifact)
    out += _pins_section(artifact)
    out += reproducibility_lines(artifact.reproducibility, artifact.thresholds.confidence)
    out += _provenance_section(artifact)
    out += ["", "## What this card is", "", artifact.statements.what_it_is]
    out += ["", "## What this card does not claim", ""]
    out += [f"- {c.text}" for c in artifact.statements.does_not_claim]
    if artifact.statements.depth_note:
        out += ["", "## How depth is read", "", artifact.statements.depth_note]
    return "\n".join(out) + "\n"
