"""The card's Reproducibility section: a replayed sample beside the run
(calibration/reproducibility.py), or "not replayed".
"""

from __future__ import annotations

from poisson_tasks.calibration.artifact import ReplayShare, Reproducibility
from poisson_tasks.calibration.sections.text import md_table, percent
from poisson_tasks.nouns import noun
from poisson_tasks.supplied import markdown, markdown_code

__all__ = ["NOT_REPLAYED", "reproducibility_lines"]


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
        out += md_table(
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
