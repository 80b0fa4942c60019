"""What a report shows, gathered in the card's own pass: the Artifact, each episode, each task.

The card is built by calibration.card_from_run, the function behind card.md, with an observer
that keeps a slim copy of every episode line as the pass reads it: the figures come from the
Artifact alone, never computed again here. Tasks are regenerated from (arm, seed) with the
generator and checked against the task id each episode line records; an episode whose id differs
(a build whose generator moved, a run on the user's own tools) shows no reference solution and
says why.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from poisson_tasks.arms import ArmSpec, arm_id, parse_arm_id
from poisson_tasks.bundle import TaskBundle
from poisson_tasks.calibration.artifact import Artifact
from poisson_tasks.calibration.build import card_from_run
from poisson_tasks.calibration.manifest import published_dir, published_facts, read_manifest
from poisson_tasks.calibration.records import episode_tokens
from poisson_tasks.calibration.render import render_document
from poisson_tasks.errors import CardRefusal, PoissonError, RunFolderError
from poisson_tasks.generator import generate
from poisson_tasks.runfolder import RunHeader, read_header
from poisson_tasks.runner.endpoint import scrub
from poisson_tasks.view.diverge import first_divergence, flat_calls, task_changes

__all__ = ["Collected", "collect", "resolve_target"]

# The episode line's fields a report lists, in this order (the transcript is kept apart).
_ROW_FIELDS = (
    "seed",
    "attempt",
    "task_id",
    "session",
    "resumed",
    "outcome",
    "strict_label",
    "leaky_pass",
    "passed",
    "malformed_clause",
    "min_calls",
    "tool_calls",
    "model_calls",
    "goal_stages",
    "usage",
    "timing",
    "system_fingerprints",
    "finish_reasons",
    "unparsed_text_calls",
    "context_overflow",
    "error",
)


@dataclass
class Collected:
    """Everything a report is written from."""

    title: str
    folder: Path
    header: RunHeader
    artifact: Artifact | None
    card_md: str | None
    refusal: str | None
    episodes: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    tasks: dict[str, dict[int, dict[str, Any]]] = field(default_factory=dict)
    pairs: dict[str, dict[int, dict[str, Any]]] = field(default_factory=dict)
    task_problems: list[str] = field(default_factory=list)
    mismatched: int = 0
    secret: str | None = None

    def scrub(self, value: Any) -> Any:
        """`value` with the run's API key (when set here) redacted: the runner's one scrubber."""
        return scrub(value, self.secret)


def resolve_target(target: Path | None, published: str | None) -> tuple[Path, str]:
    """The run folder to read and the report's title: a run folder, or a published card's name."""
    if (target is None) == (published is None):
        raise PoissonError("give a run folder, or --published NAME (one of the two, not both)")
    if published is not None:
        names = read_manifest()
        if published not in names:
            raise PoissonError(
                f"--published {published!r} is not a published card; the published cards are: "
                f"{', '.join(names) or 'none'}"
            )
        return published_dir() / published, f"published card {published}"
    assert target is not None
    if not target.exists():
        raise RunFolderError(f"{target} does not exist: give a run folder (run.json + episodes)")
    if not target.is_dir():
        raise RunFolderError(f"{target} is not a folder: give a run folder (run.json + episodes)")
    read_header(target)  # a folder without run.json is named before any work is done
    return target, str(target)


def _secret(header: RunHeader) -> str | None:
    """The API key the run's pre-registration names (model.api_key_env), when it is set here."""
    model = header.preregistration.get("model")
    name = model.get("api_key_env") if isinstance(model, dict) else None
    return os.environ.get(name) or None if isinstance(name, str) and name else None


def _slim_response(response: Any) -> Any:
    """A raw response less each choice's message content and tool calls (the transcript's messages
    hold them); everything else the server sent is kept."""
    if not isinstance(response, dict) or not isinstance(response.get("choices"), list):
        return response
    choices = []
    for choice in response["choices"]:
        if isinstance(choice, dict) and isinstance(choice.get("message"), dict):
            message = {
                k: v for k, v in choice["message"].items() if k not in ("content", "tool_calls")
            }
            choice = {**choice, "message": message}
        choices.append(choice)
    return {**response, "choices": choices}


def _slim(number: int, doc: Mapping[str, Any]) -> dict[str, Any]:
    transcript = doc.get("transcript") or {}
    if isinstance(transcript, dict) and "responses" in transcript:
        transcript = {
            **transcript,
            "responses": [_slim_response(r) for r in transcript["responses"]],
        }
    usage = doc.get("usage") or {}
    row: dict[str, Any] = {"line": number, "arm_id": doc["arm_id"]}
    for name in _ROW_FIELDS:
        row[name] = doc.get(name)
    row["tokens"] = episode_tokens(
        usage.get("prompt_tokens"), usage.get("cached_input_tokens"), usage.get("completion_tokens")
    )
    row["transcript"] = transcript
    return row


def _task_view(bundle: TaskBundle) -> dict[str, Any]:
    """The parts of a task a reader looks at beside an episode; its opening messages are not
    repeated (the transcript holds them, as the model was sent them)."""
    return {
        "task_id": bundle.task_id,
        "verifier": bundle.verifier,
        "goal": [g.model_dump() for g in bundle.goal],
        "tools": bundle.tools,
        "reference_calls": [c.model_dump() for c in bundle.reference_calls],
        "reference_observations": bundle.reference_observations,
        "initial_state": [list(r) for r in bundle.initial_state],
        "expected_final_state": [list(r) for r in bundle.expected_final_state],
        "min_calls": bundle.min_calls,
        "reference_turns": bundle.reference_turns,
        "prompt_slots": bundle.prompt_parts.slots,
    }


def _pairs_of(header: RunHeader, artifact: Artifact | None) -> list[tuple[str, str]]:
    """(lower, upper) arms read side by side: each adjacent comparison of the card, and each
    control arm beside the level it keeps and the level whose length it adds."""
    pairs: list[tuple[str, str]] = []
    if artifact is not None:
        for table in artifact.knobs:
            pairs += [(a, b) for a, b in zip(table.levels, table.levels[1:], strict=False)]
    planned = set(header.arms)
    for arm in header.arms:
        spec = parse_arm_id(arm)
        if spec.control is None:
            continue
        base: ArmSpec = dataclasses.replace(spec, control=None)
        longer: ArmSpec = dataclasses.replace(spec, level=spec.control, control=None)
        for low, up in ((arm_id(base), arm), (arm, arm_id(longer))):
            if low in planned and up in planned:
                pairs.append((low, up))
    return list(dict.fromkeys(pairs))


def collect(folder: Path, title: str, *, published: bool = False) -> Collected:
    """Read a run folder once for its card and its episodes, then regenerate its tasks."""
    header = read_header(folder)
    episodes: dict[str, list[dict[str, Any]]] = {arm: [] for arm in header.arms}

    def keep(number: int, doc: Mapping[str, Any]) -> None:
        episodes.setdefault(doc["arm_id"], []).append(_slim(number, doc))

    artifact: Artifact | None = None
    refusal: str | None = None
    facts = published_facts(folder.parent) if published else None
    try:
        artifact = card_from_run(folder, published=facts, observe=keep)
    except CardRefusal as exc:
        refusal = str(exc)
    out = Collected(
        title=title,
        folder=folder,
        header=header,
        artifact=None,
        card_md=None,
        refusal=refusal,
        episodes=episodes,
        secret=_secret(header),
    )
    if artifact is not None:  # the card as card.md shows it, through the same scrubber
        out.artifact = Artifact.model_validate(out.scrub(artifact.model_dump(mode="json")))
        out.card_md = out.scrub(render_document(artifact))
    if refusal is not None:
        out.refusal = out.scrub(refusal)
    order = {seed: index for index, seed in enumerate(dict.fromkeys(header.seeds))}
    for rows in episodes.values():
        rows.sort(key=lambda row: (order.get(row["seed"], len(order)), row["attempt"], row["line"]))
    _regenerate(out)
    return out


def _regenerate(out: Collected) -> None:
    """Each (arm, seed)'s task, each episode's first divergence from it, and the paired facts."""
    bundles: dict[tuple[str, int], TaskBundle | None] = {}
    for arm in out.header.arms:
        tasks = out.tasks.setdefault(arm, {})
        for seed in dict.fromkeys(out.header.seeds):
            try:
                bundle: TaskBundle | None = generate(arm, seed, controls=False)
            except PoissonError as exc:
                bundle = None
                out.task_problems.append(f"{arm} seed {seed}: no task generated ({exc})")
            bundles[arm, seed] = bundle
            if bundle is not None:
                tasks[seed] = _task_view(bundle)
    for arm, rows in out.episodes.items():
        for row in rows:
            bundle = bundles.get((arm, row["seed"]))
            if bundle is None:
                row["task"] = "missing"
                continue
            if bundle.task_id != row["task_id"]:
                row["task"] = "mismatch"
                out.mismatched += 1
                continue
            row["task"] = "ok"
            turns = row["transcript"].get("tool_calls", []) if row["transcript"] else []
            row["divergence"] = first_divergence(flat_calls(turns), bundle.reference_calls)
    if out.mismatched:
        out.task_problems.insert(
            0,
            f"{out.mismatched} episodes record a task id that this build's generator does not make "
            "for their (arm, seed): their reference solutions are not shown (the run was made by "
            "another generator, or on its own tools)",
        )
    for lower, upper in _pairs_of(out.header, out.artifact):
        key = f"{lower}|{upper}"
        out.pairs[key] = {}
        for seed in dict.fromkeys(out.header.seeds):
            low, up = bundles.get((lower, seed)), bundles.get((upper, seed))
            if low is not None and up is not None:
                out.pairs[key][seed] = task_changes(low, up)
