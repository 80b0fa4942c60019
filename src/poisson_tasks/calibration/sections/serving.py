"""Where the model was served, as the Provenance section prints it: the serving, a llama.cpp
server's own facts, every session's serving when the figures pool several, and what the
responses showed (fingerprints, estimated tokens, context overflow).
"""

from __future__ import annotations

from poisson_tasks.calibration.artifact import ServingObserved
from poisson_tasks.calibration.provenance import Provenance, ServingInfo
from poisson_tasks.calibration.sections.text import NOT_RECORDED
from poisson_tasks.local.facts import LlamaCppFacts
from poisson_tasks.nouns import counted
from poisson_tasks.supplied import markdown, markdown_code

__all__ = ["flags_text", "observed_lines", "serving_lines", "servings_lines"]


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


def serving_lines(provenance: Provenance) -> list[str]:
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
            f"- serving flags: {flags_text(serving)}",
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


def flags_text(serving: ServingInfo) -> str:
    return markdown(" ".join(serving.flags)) if serving.flags else NOT_RECORDED


def _serving_summary(serving: ServingInfo) -> str:
    """One serving in one line: kind, engine and version, revision, flags, context window."""
    parts: list[str] = [serving.kind]
    engine = " ".join(x for x in (serving.stack or serving.provider, serving.stack_version) if x)
    if engine:
        parts.append(markdown(engine))
    parts.append(f"weights revision {markdown(serving.weights_revision or NOT_RECORDED)}")
    parts.append(f"flags {flags_text(serving)}")
    if serving.context_window is not None:
        parts.append(f"context window {serving.context_window}")
    if serving.policy:
        parts.append(f"policy {markdown_code(serving.policy)}")
    return ", ".join(parts)


def servings_lines(provenance: Provenance) -> list[str]:
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


def observed_lines(observed: ServingObserved | None) -> list[str]:
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
