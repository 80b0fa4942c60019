"""`poisson-tasks view`: a card as one self-contained HTML page, every cell opening its episodes.

write_view(target, out) reads a run folder (or a published card) in the card's one pass, keeps
its episodes, regenerates its tasks, and writes one HTML file that needs nothing else: no network,
no other file. See docs/view.md.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from poisson_tasks.errors import OutputError
from poisson_tasks.files import atomic_write, os_problem
from poisson_tasks.view.gather import Collected, collect, resolve_target
from poisson_tasks.view.page import render_page

__all__ = ["ViewReport", "build_view", "write_view"]


@dataclass(frozen=True)
class ViewReport:
    """What was written: the file, its size, and what the page says about the run."""

    path: Path
    size: int
    episodes: int
    refusal: str | None
    task_problems: list[str]

    def notes(self) -> list[str]:
        """What `view` prints as notes: the card's refusal, then the first five task problems."""
        return ([self.refusal] if self.refusal else []) + self.task_problems[:5]


@contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """Run the pass without the cycle collector, then leave what it made to reference counting.

    The pass keeps every episode line it parses, and parsed JSON holds no reference cycle: the
    collector's passes over that growing heap find nothing, yet cost about a third of the write
    (benchmarks/RESULTS.md, view report), and the first one after re-enabling would scan it all
    once more. So collection is paused during the pass and the heap is then frozen (gc.freeze:
    the collector ignores those objects; reference counting still frees them). Collection is on
    again after, if it was on before.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()


def build_view(target: Path | None = None, published: str | None = None) -> tuple[Collected, bytes]:
    """The report's contents and its bytes, for a run folder or a published card's name."""
    run, title = resolve_target(target, published)
    with _no_cycle_collection():
        collected = collect(run, title, published=published is not None)
        return collected, render_page(collected)


def write_view(
    out: Path | None, target: Path | None = None, published: str | None = None
) -> ViewReport:
    """Write the report to `out` atomically (a kill or a full disk leaves the old file or none);
    `view` passes its --out as given, so a missing one is refused here in one line."""
    if out is None:
        raise OutputError("--out is required: the HTML file to write, e.g. --out report.html")
    if out.exists() and out.is_dir():
        raise OutputError(f"--out {out} is a folder: give the HTML file to write, e.g. report.html")
    if not out.parent.is_dir():
        raise OutputError(f"--out {out}: folder {out.parent} does not exist; create it first")
    collected, page = build_view(target, published)
    try:
        atomic_write(out, page)
    except OSError as exc:
        raise OutputError(f"{out}: the report cannot be written: {os_problem(exc)}") from None
    return ViewReport(
        path=out,
        size=len(page),
        episodes=sum(len(rows) for rows in collected.episodes.values()),
        refusal=collected.refusal,
        task_problems=collected.task_problems,
    )
