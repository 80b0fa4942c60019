"""A card says what happened (issue 27, items 1-4): text calls named in the no-call refusal,
outcomes per cell on card.md, a single level that has nothing to order, plots that show every
point beside its level."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from synthetic_runs import FAKE_ENGINE_HASH, FAKE_HASH, header, line, write_run

from poisson_tasks.calibration import card_from_run, render_document
from poisson_tasks.calibration.artifact import Artifact
from poisson_tasks.calibration.cardjson import card_json
from poisson_tasks.errors import CardRefusal
from poisson_tasks.reference import ReferenceServer
from poisson_tasks.runfolder import EpisodeLine
from poisson_tasks.runner import run_preregistration
from poisson_tasks.verifier import OUTCOMES, Outcome

ARMS = ("depth:d1", "depth:d2")
SEEDS = tuple(range(10))


def _text_call(arm: str, seed: int, attempt: int, dialect: str) -> EpisodeLine:
    """A scored episode whose model wrote its call as text (clause 1, no tool call)."""
    base = line(arm, seed, attempt, "malformed_call", tool_calls=0, model_calls=1)
    return base.model_copy(
        update={
            "malformed_clause": 1,
            "unparsed_text_calls": 1,
            "transcript": {"text_calls": ['{"name": "x"}'], "text_call_dialects": [dialect]},
        }
    )


def _card(folder: Path, lines: Sequence[EpisodeLine], arms: Sequence[str] = ARMS) -> Artifact:
    write_run(folder, header(arms, SEEDS, 2), lines)
    return card_from_run(
        folder,
        installed_generator_hash=FAKE_HASH,
        installed_engine_hash=FAKE_ENGINE_HASH,
        published=[],
    )


def _refusal(folder: Path, lines: Sequence[EpisodeLine]) -> str:
    with pytest.raises(CardRefusal) as caught:
        _card(folder, lines)
    return str(caught.value)


# ------------------------------------------------------------------ 1. the refusal names text calls


def test_a_no_call_refusal_made_of_text_calls_names_them_their_dialects_and_the_parser(
    tmp_path: Path,
) -> None:
    lines = [
        _text_call("depth:d1", s, a, "json" if s < 8 else "hermes")
        if s < 9
        else line("depth:d1", s, a, "wrong_state", tool_calls=0)
        for s in SEEDS
        for a in range(2)
    ] + [line("depth:d2", s, a) for s in SEEDS for a in range(2)]
    message = _refusal(tmp_path / "run", lines)
    assert "depth:d1 (1.000)" in message and "depth:d2" not in message
    assert "18 of their 20 no-call episodes wrote a call as text" in message
    assert "dialects: hermes 2, json 16" in message
    assert "tool parser" in message and "format alarm, clause 1" in message
    assert "whether the model starts the task" not in message
    assert "\n" not in message


def test_a_no_call_refusal_without_text_calls_keeps_its_reading(tmp_path: Path) -> None:
    lines = [line("depth:d1", s, a, "wrong_state", tool_calls=0) for s in SEEDS for a in range(2)]
    lines += [line("depth:d2", s, a) for s in SEEDS for a in range(2)]
    message = _refusal(tmp_path / "run", lines)
    assert "measures whether the model starts the task" in message
    assert "as text" not in message


def test_the_text_call_policy_run_for_real_is_refused_as_text_calls(
    tmp_path: Path, server: ReferenceServer
) -> None:
    """The reference endpoint's text-call policy writes every call as text: the runner scores
    them malformed_call (clause 1) and the card's refusal says what they were."""
    doc: dict[str, Any] = {
        "format": "poisson-tasks/preregistration@1",
        "name": "text-calls",
        "model": {"provider": "reference", "model": "text-call", "base_url": server.base_url},
        "decoding": {
            "temperature": 1.0,
            "top_p": 1.0,
            "reasoning_effort": "low",
            "max_completion_tokens": 256,
        },
        "design": {
            "arms": ["faults:f0", "faults:f1", "faults:f0+len(f4)"],
            "tasks": 3,
            "attempts": 1,
            "seed_string": "text-calls",
            "slack": 0,
            "horizon": 4,
        },
        "budget": {"tokens": 5_000_000, "wall_clock_s": 120},
    }
    path = tmp_path / "text-calls.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    run_preregistration(path, tmp_path / "run", show_progress=False)
    with pytest.raises(CardRefusal) as caught:
        card_from_run(tmp_path / "run", published=[])
    message = str(caught.value)
    assert "all of their 9 no-call episodes wrote a call as text" in message
    assert "dialects: " in message and "tool parser" in message


# ------------------------------------------------------------------ 2. outcomes per cell


def test_card_md_has_each_levels_outcomes_with_malformed_clauses(tmp_path: Path) -> None:
    def outcome(seed: int, attempt: int) -> Outcome:
        return ("passed", "overshoot", "wrong_state", "turn_limit")[(seed + attempt) % 4]

    lines = [line("depth:d1", s, a, outcome(s, a)) for s in SEEDS for a in range(2)]
    lines[0] = line("depth:d1", 0, 0, "malformed_call").model_copy(update={"malformed_clause": 3})
    lines[1] = _text_call("depth:d1", 0, 1, "json")
    lines += [line("depth:d2", s, a) for s in SEEDS for a in range(2)]
    lines.append(line("depth:d2", 0, 0, "api_error"))
    artifact = _card(tmp_path / "run", lines)
    cell = artifact.cell("depth:d1")
    assert cell.malformed_clauses == {"1": 1, "3": 1}
    assert (cell.no_calls.episodes, cell.no_calls.as_text) == (1, 1)
    assert cell.no_calls.dialects == {"json": 1}
    md = render_document(artifact)
    head = (
        "| level | scored | passed | collateral_mutation | wrong_state | overshoot | turn_limit "
        "| malformed_call | no tool call | instrument failures |"
    )
    assert head in md
    n = {o: sum(1 for ln in lines[:20] if ln.outcome == o) for o in OUTCOMES}
    assert (n["passed"], n["wrong_state"], n["overshoot"], n["turn_limit"]) == (4, 5, 5, 4)
    assert (
        "| `d1` | 20 | 4 | 0 | 5 | 5 | 4 | 2 (clause 1 1, clause 3 1) "
        "| 1 (1 wrote a call as text: json 1) | 0 |"
    ) in md
    # d2's one instrument failure in 21 lines is over the 0.02 limit: withheld, failures shown.
    assert "| `d2` | withheld | withheld |" in md and "| 1 (api_error 1) |" in md
    written = json.loads(card_json(artifact))["cells"][0]
    assert written["malformed_clauses"] == {"1": 1, "3": 1}
    assert written["no_calls"] == {"episodes": 1, "as_text": 1, "dialects": {"json": 1}}


def test_control_arms_get_their_own_outcome_table(tmp_path: Path) -> None:
    arms = ("depth:d1", "depth:d2", "depth:d1+h8")
    lines = [line(arm, s, a) for arm in arms for s in SEEDS for a in range(2)]
    md = render_document(_card(tmp_path / "run", lines, arms))
    assert "### Control arms: how each arm's episodes ended" in md
    assert "| `depth:d1+h8` | 20 | 20 |" in md


# ------------------------------------------------------------------ 3. a single level


def test_a_single_level_has_nothing_to_order(tmp_path: Path) -> None:
    lines = [line("faults:f1", s, a) for s in SEEDS for a in range(2)]
    artifact = _card(tmp_path / "run", lines, ("faults:f1",))
    (table,) = artifact.knobs
    assert table.ordering_strict.verdict == "single_level"
    md = render_document(artifact)
    assert "the card has one level of `faults`, so there is nothing to order" in md
    assert "non-increasing" not in md.split("## `faults`", 1)[1].split("## ", 1)[0]


def test_two_levels_are_still_ordered(tmp_path: Path) -> None:
    lines = [line(arm, s, a) for arm in ARMS for s in SEEDS for a in range(2)]
    (table,) = _card(tmp_path / "run", lines).knobs
    assert table.ordering_strict.verdict != "single_level"


# ------------------------------------------------------------------ 4. plots


def _figure(artifact: Artifact) -> Any:
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from poisson_tasks.calibration.plot import draw_knob

    (table,) = artifact.knobs
    return plt, draw_knob(plt, artifact, table)


@pytest.mark.parametrize("arms", [("faults:f1",), ("depth:d1", "depth:d2", "depth:d3")])
def test_every_point_sits_beside_its_level_and_no_legend_covers_it(
    tmp_path: Path, arms: tuple[str, ...]
) -> None:
    # d1 at 1.0 and d3 low: points at the top and the bottom corners, where a legend used to sit.
    def outcome(arm: str, seed: int) -> Outcome:
        return "wrong_state" if arm == "depth:d3" and seed < 8 else "passed"

    lines = [line(arm, s, a, outcome(arm, s)) for arm in arms for s in SEEDS for a in range(2)]
    plt, fig = _figure(_card(tmp_path / "run", lines, arms))
    try:
        fig.canvas.draw()
        (ax,) = fig.axes
        left, right = ax.get_xlim()
        assert (left, right) == (-0.5, len(arms) - 0.5)
        renderer = fig.canvas.get_renderer()
        axes_box = ax.get_window_extent(renderer)
        (legend,) = fig.legends
        assert not legend.get_window_extent(renderer).overlaps(axes_box)
        for container in ax.containers:
            xs, ys = container.lines[0].get_data()
            assert len(xs) == len(arms)
            for index, x in enumerate(xs):
                assert abs(x - index) < 0.25  # beside its own tick
            for x, y in zip(xs, ys, strict=True):
                px, py = ax.transData.transform((x, y))
                assert axes_box.x0 < px < axes_box.x1 and axes_box.y0 < py < axes_box.y1
    finally:
        plt.close(fig)
