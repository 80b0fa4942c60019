"""One PNG per knob: strict and leaky pass@1 by level, each with its interval.

The interval's confidence level is the card's own (its pre-registered threshold). Every point is
drawn beside its level's tick, and the legend sits below the axes, so it hides none of them.

Needs matplotlib (the `plot` extra); without it, MissingExtraError says what to install.
"""

from __future__ import annotations

import io
from pathlib import Path
from types import ModuleType
from typing import Any

from poisson_tasks.calibration.artifact import Artifact, KnobTable, RateFigure
from poisson_tasks.calibration.sections.text import percent
from poisson_tasks.errors import MissingExtraError
from poisson_tasks.files import atomic_write

OFFSET = 0.08  # strict drawn this far left of its level's tick, leaky this far right

__all__ = ["OFFSET", "draw_knob", "write_plots"]


def _points(figs: list[RateFigure | None]) -> tuple[list[int], list[float], list[list[float]]]:
    xs, ys, err_low, err_high = [], [], [], []
    for index, fig in enumerate(figs):
        if fig is None:
            continue
        xs.append(index)
        ys.append(fig.pass_at_1)
        err_low.append(fig.pass_at_1 - fig.low)
        err_high.append(fig.high - fig.pass_at_1)
    return xs, ys, [err_low, err_high]


def draw_knob(pyplot: ModuleType, artifact: Artifact, table: KnobTable) -> Any:
    """One knob's figure (a matplotlib Figure), drawn with the given pyplot module."""
    cells = [artifact.cell(a) for a in table.levels]
    labels = [c.arm_id.split(":", 1)[1] for c in cells]
    # Constrained layout with the legend outside the axes, below them: no point is hidden.
    fig, ax = pyplot.subplots(figsize=(6.4, 4.4), dpi=100, layout="constrained")
    for rate, offset, marker in (("strict", -OFFSET, "o"), ("leaky", OFFSET, "s")):
        xs, ys, err = _points([c.strict if rate == "strict" else c.leaky for c in cells])
        ax.errorbar(
            [x + offset for x in xs],
            ys,
            yerr=err,
            fmt=marker,
            capsize=4,
            label=f"{rate} pass@1 ({percent(artifact.thresholds.confidence)} interval)",
        )
    ax.set_xticks(range(len(labels)), labels)
    # Half a slot either side of the first and last level: a single level sits mid-plot with
    # its two markers beside its tick, not at the plot's edges.
    ax.set_xlim(-0.5, len(labels) - 0.5)
    ax.set_ylim(-0.03, 1.05)
    ax.set_xlabel(f"{table.knob} level")
    ax.set_ylabel("pass@1")
    who = "reference policy" if artifact.kind == "reference-policy" else "model"
    ax.set_title(f"{artifact.model} ({who}): {table.knob}")
    fig.legend(loc="outside lower center", ncols=2, frameon=False)
    return fig


def write_plots(artifact: Artifact, out_dir: Path | str) -> list[Path]:
    """Write `<knob>.png` for every knob on the card; returns the paths written."""
    try:  # matplotlib is the optional `plot` extra: imported only when a plot is asked for
        import matplotlib  # noqa: PLC0415 (optional `plot` extra)

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415 (optional `plot` extra)
    except ImportError as exc:
        raise MissingExtraError(
            "--plot needs matplotlib: pip install 'poisson-tasks[plot]'"
        ) from exc
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for table in artifact.knobs:
        fig = draw_knob(plt, artifact, table)
        path = out / f"{table.knob}.png"
        png = io.BytesIO()
        fig.savefig(png, format="png")
        plt.close(fig)
        atomic_write(path, png.getvalue())  # a failure leaves the previous plot or none
        written.append(path)
    return written
