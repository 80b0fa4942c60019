"""The card's three cost sections (calls and tokens, time, token totals and dollars), one row per
arm in each; `poisson-tasks view` shows the same Markdown as its cost tables.
"""

from __future__ import annotations

from poisson_tasks.calibration.artifact import Artifact, Cell, ServingObserved, Totals
from poisson_tasks.calibration.provenance import Provenance
from poisson_tasks.calibration.sections.text import (
    NA,
    NOT_RECORDED,
    md_table,
    num_text,
    rate_text,
    secs_text,
    usd_text,
)
from poisson_tasks.nouns import counted
from poisson_tasks.supplied import markdown

__all__ = ["concurrency_text", "cost_sections", "render_costs"]


def concurrency_text(provenance: Provenance) -> str:
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


def arm_rows(artifact: Artifact) -> list[Cell]:
    """Every arm in card order: each knob's levels, then the control arms."""
    order = [arm for t in artifact.knobs for arm in t.levels] + list(artifact.controls)
    return [artifact.cell(arm) for arm in order]


CALLS_COLUMNS = (
    "arm",
    "mean model calls",
    "median model calls",
    "mean tool calls",
    "median tool calls",
    "mean tokens",
    "median tokens",
    "p90 tokens",
    "tokens per strict pass",
)
TIME_COLUMNS = (
    "arm",
    "median episode s",
    "p90 episode s",
    "median model s",
    "p90 model s",
    "median harness s",
    "p90 harness s",
    "median setup s",
)
TOTALS_COLUMNS = (
    "arm",
    "episodes",
    "uncached input",
    "cached input",
    "completion",
    "of which reasoning",
    "reasoning share",
    "computed dollars",
    "provider-reported dollars",
)


def _no_costs(cell: Cell, columns: int) -> list[str]:
    """The row of an arm with no cost figures: withheld, or no scored episode to measure."""
    reason = "withheld" if not cell.published else "no scored episode"
    return [f"`{cell.arm_id}`", *([reason] * (columns - 1))]


def _calls_row(cell: Cell) -> list[str]:
    costs = cell.costs
    if costs is None:
        return _no_costs(cell, len(CALLS_COLUMNS))
    per_pass = (
        NA
        if costs.mean_tokens is not None and costs.tokens_per_strict_pass is None
        else num_text(costs.tokens_per_strict_pass)
    )
    return [
        f"`{cell.arm_id}`",
        num_text(costs.mean_model_calls),
        num_text(costs.median_model_calls),
        num_text(costs.mean_tool_calls),
        num_text(costs.median_tool_calls),
        num_text(costs.mean_tokens),
        num_text(costs.median_tokens),
        num_text(costs.p90_tokens),
        per_pass,
    ]


def _time_row(cell: Cell) -> list[str]:
    costs = cell.costs
    if costs is None:
        return _no_costs(cell, len(TIME_COLUMNS))
    return [
        f"`{cell.arm_id}`",
        secs_text(costs.episode_s_median),
        secs_text(costs.episode_s_p90),
        secs_text(costs.model_s_median),
        secs_text(costs.model_s_p90),
        secs_text(costs.harness_s_median),
        secs_text(costs.harness_s_p90),
        secs_text(costs.setup_s_median),
    ]


def _calls_section(artifact: Artifact) -> list[str]:
    out = ["", "## Cost: calls and tokens per episode (scored episodes)", ""]
    return out + md_table(CALLS_COLUMNS, [_calls_row(c) for c in arm_rows(artifact)])


def _time_section(artifact: Artifact) -> list[str]:
    cells = arm_rows(artifact)
    out = [
        "",
        "## Cost: time per episode (scored episodes that kept time)",
        "",
        f"Concurrency: {concurrency_text(artifact.provenance)}. Seconds belong to the serving and "
        "its load as much as to the task: they are printed and decide nothing.",
        "",
    ]
    if any(c.costs is not None and c.costs.timed_episodes for c in cells):
        return out + md_table(TIME_COLUMNS, [_time_row(c) for c in cells])
    return [*out, f"No episode of this run kept time: every time figure reads {NOT_RECORDED}."]


def _rates_line(artifact: Artifact) -> str:
    """Which rates the computed dollars use, or that there are none."""
    rates = artifact.provenance.rates
    if rates is None:
        return "No rate was declared for this model, so the card has no computed dollars."
    return (
        "Computed dollars use the declared rates per million tokens: "
        f"${rates.input:g} uncached input, ${rates.cached_input:g} cached input, "
        f"${rates.output:g} completion, read on {markdown(rates.as_of.isoformat())}"
        + (f" from {markdown(rates.source)}." if rates.source else ".")
    )


def _totals_row(label: str, totals: Totals, missing_usd: str) -> list[str]:
    provider = (
        "not reported"
        if totals.provider_usd is None
        else f"{usd_text(totals.provider_usd, NOT_RECORDED)} "
        f"({counted(totals.provider_usd_episodes, 'episode')})"
    )
    return [
        label,
        str(totals.episodes),
        num_text(totals.uncached_input_tokens),
        num_text(totals.cached_input_tokens),
        num_text(totals.completion_tokens),
        num_text(totals.reasoning_tokens),
        rate_text(totals.reasoning_share),
        usd_text(totals.computed_usd, missing_usd),
        provider,
    ]


def _totals_section(artifact: Artifact) -> list[str]:
    out = [
        "",
        "## Cost: token totals and dollars (every episode, instrument failures included)",
        "",
        _rates_line(artifact)
        + " Reasoning tokens are part of the completion tokens and are not added again."
        + estimated_note(artifact.serving_observed),
        "",
    ]
    missing_usd = "no rate" if artifact.provenance.rates is None else NOT_RECORDED
    rows = [_totals_row(f"`{c.arm_id}`", c.totals, missing_usd) for c in arm_rows(artifact)]
    rows.append(_totals_row("all arms", artifact.run_totals, missing_usd))
    return out + md_table(TOTALS_COLUMNS, rows)


def cost_sections(artifact: Artifact) -> list[str]:
    """The three cost sections, in card order."""
    return _calls_section(artifact) + _time_section(artifact) + _totals_section(artifact)


def render_costs(artifact: Artifact) -> str:
    """The card's three cost sections as markdown: what `poisson-tasks view` shows as its cost
    tables, so the page's labels and figures are the card's own."""
    return "\n".join(cost_sections(artifact)).lstrip("\n") + "\n"


def estimated_note(observed: ServingObserved | None) -> str:
    """Tokens are measured; only those of responses without usage are estimated, and then said."""
    if observed is None or not observed.estimated_tokens:
        return ""
    share = f"{observed.estimated_share:.1%}" if observed.estimated_share is not None else "-"
    return (
        f" Estimated, not measured: {observed.estimated_tokens:,} tokens ({share} of all tokens), "
        "of responses that reported no usage, counted with the pinned tokenizer (o200k_base), "
        "another model's tokenizer; the dollars on them are estimates too."
    )
