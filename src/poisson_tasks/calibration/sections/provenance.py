"""The card's Provenance section: everything a figure depends on, from the package version to the
thresholds, the sessions and a merged run's shards.
"""

from __future__ import annotations

from typing import Any

from poisson_tasks.calibration.artifact import Artifact
from poisson_tasks.calibration.pacingline import pacing_lines
from poisson_tasks.calibration.provenance import Provenance
from poisson_tasks.calibration.sections.costs import concurrency_text
from poisson_tasks.calibration.sections.serving import observed_lines, serving_lines, servings_lines
from poisson_tasks.calibration.sections.text import NOT_RECORDED, percent
from poisson_tasks.hashes import describe_environment_hash
from poisson_tasks.nouns import counted
from poisson_tasks.prereg import Thresholds
from poisson_tasks.supplied import markdown, markdown_code

__all__ = ["provenance_section"]


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


def provenance_section(artifact: Artifact) -> list[str]:
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
        *serving_lines(provenance),
        *servings_lines(provenance),
        *observed_lines(artifact.serving_observed),
        f"- decoding: {_mapping(provenance.decoding)}",
        f"- budget: {_mapping(provenance.budget)}",
        f"- turn limit: {NOT_RECORDED if provenance.turn_limit is None else provenance.turn_limit}"
        " model calls",
        f"- concurrency: {concurrency_text(provenance)}",
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
