"""What a report shows, gathered in the card's own pass: the Artifact, each episode, each task.

The card is built by calibration.card_from_run, the function behind card.md, with an observer
that keeps a slim copy of every episode line as the pass reads it: the figures come from the
Artifact alone, never computed again here. Meanwhile a second process regenerates the tasks
from (arm, seed) with the generator (tasks.py); each is checked against the task id each
episode line records; an episode whose id differs
(a build whose generator moved, a run on the user's own tools) shows no reference solution and
says why.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
from collections.abc import Callable, Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from poisson_tasks.calibration.artifact import Artifact
from poisson_tasks.calibration.build import card_from_run
from poisson_tasks.calibration.manifest import published_dir, published_facts, read_manifest
from poisson_tasks.calibration.records import episode_tokens
from poisson_tasks.calibration.render import render_document
from poisson_tasks.errors import CardRefusal, PoissonError
from poisson_tasks.lifetime import die_with_parent
from poisson_tasks.runfolder import OpenRun, RunHeader, open_run, uncached_input
from poisson_tasks.view.diverge import first_divergence, flat_calls
from poisson_tasks.view.packing import pack, scrubbed
from poisson_tasks.view.tasks import TaskSet, regenerate

__all__ = ["Collected", "collect", "resolve_target"]


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
    tasks: TaskSet = field(default_factory=TaskSet)
    task_problems: list[str] = field(default_factory=list)
    mismatched: int = 0
    secret: str | None = None

    def scrub(self, value: Any) -> Any:
        """`value` with the run's API key (when set here) redacted: the runner's one scrubber."""
        return scrubbed(value, self.secret)


def resolve_target(target: Path | None, published: str | None) -> tuple[OpenRun, str]:
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
        return open_run(published_dir() / published), f"published card {published}"
    assert target is not None
    # a folder without run.json is named before any work
    return open_run(target, "give a run folder (run.json + episodes)"), str(target)


def _secret(header: RunHeader) -> str | None:
    """The API key the run's pre-registration names (model.api_key_env), when it is set here."""
    model = header.preregistration.get("model")
    name = model.get("api_key_env") if isinstance(model, dict) else None
    return os.environ.get(name) or None if isinstance(name, str) and name else None


def _slim(number: int, doc: Mapping[str, Any]) -> dict[str, Any]:
    """The line as read (transcript and raw responses included), with its line number and its
    tokens by the run folder's rule; a shallow copy, so the card's pass keeps its own."""
    row = dict(doc)
    usage = doc.get("usage") or {}
    row["line"] = number
    row["tokens"] = episode_tokens(
        uncached_input(usage), usage.get("cached_input_tokens"), usage.get("completion_tokens")
    )
    return row


def _tasks(arms: list[str], seeds: list[int], secret: str | None) -> Callable[[], TaskSet]:
    """Start regenerating the plan's tasks beside the card's pass (a forked process where the
    platform forks; else in this one, when asked); the returned call waits for them."""
    pack_it = functools.partial(pack, secret=secret)
    if "fork" not in multiprocessing.get_all_start_methods():
        return lambda: regenerate(arms, seeds, pack_it)
    pool = ProcessPoolExecutor(
        max_workers=1,
        mp_context=multiprocessing.get_context("fork"),
        initializer=die_with_parent,  # a killed `view` leaves no worker behind
        initargs=(os.getpid(),),
    )
    future = pool.submit(regenerate, arms, seeds, pack_it)

    def wait() -> TaskSet:
        try:
            return future.result()
        finally:
            pool.shutdown()

    return wait


def collect(run: OpenRun, title: str, *, published: bool = False) -> Collected:
    """Read a run folder once for its card and its episodes while its tasks are regenerated."""
    folder, header = run.path, run.header
    seeds = list(dict.fromkeys(header.seeds))
    secret = _secret(header)
    episodes: dict[str, list[dict[str, Any]]] = {arm: [] for arm in header.arms}

    def keep(number: int, doc: Mapping[str, Any]) -> None:
        episodes.setdefault(doc["arm_id"], []).append(_slim(number, doc))

    tasks = _tasks(list(header.arms), seeds, secret)
    artifact: Artifact | None = None
    refusal: str | None = None
    facts = published_facts(folder.parent) if published else None
    try:
        artifact = card_from_run(run, published=facts, observe=keep)
    except CardRefusal as exc:
        refusal = str(exc)
    # What needs no task is done while the tasks are still being regenerated: the card as card.md
    # shows it, through the same scrubber, and the episodes in seed order.
    shown: Artifact | None = None
    card_md: str | None = None
    if artifact is not None:
        shown = Artifact.model_validate(scrubbed(artifact.model_dump(mode="json"), secret))
        card_md = scrubbed(render_document(artifact), secret)
    if refusal is not None:
        refusal = scrubbed(refusal, secret)
    order = {seed: index for index, seed in enumerate(seeds)}
    for rows in episodes.values():
        rows.sort(key=lambda row: (order.get(row["seed"], len(order)), row["attempt"], row["line"]))
    out = Collected(
        title=title,
        folder=folder,
        header=header,
        artifact=shown,
        card_md=card_md,
        refusal=refusal,
        episodes=episodes,
        tasks=tasks(),
        secret=secret,
    )
    _check(out)
    return out


def _check(out: Collected) -> None:
    """Each episode's task id against its regenerated task, and its first divergence from it."""
    ids, references = out.tasks.ids, out.tasks.references
    for arm, rows in out.episodes.items():
        for row in rows:
            key = (arm, row["seed"])
            if key not in ids:
                row["task"] = "missing"
                continue
            if ids[key] != row["task_id"]:
                row["task"] = "mismatch"
                out.mismatched += 1
                continue
            row["task"] = "ok"
            turns = row["transcript"].get("tool_calls", []) if row["transcript"] else []
            row["divergence"] = first_divergence(flat_calls(turns), references[key])
    out.task_problems = list(out.tasks.problems)
    if out.mismatched:
        out.task_problems.insert(
            0,
            f"{out.mismatched} episodes record a task id that this build's generator does not make "
            "for their (arm, seed): their reference solutions are not shown (the run was made by "
            "another generator, or on its own tools)",
        )
