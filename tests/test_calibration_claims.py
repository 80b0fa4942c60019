"""Refusals, the closing texts' "does not claim" lines, and the card's canonical JSON bytes.

Each refusal and each line has a test that makes it apply and one that shows it absent otherwise.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from synthetic_runs import (
    DECODING,
    FAKE_ENGINE_HASH,
    FAKE_HASH,
    PUBLISHED_ARMS,
    header,
    line,
    write_run,
)

from poisson_tasks.calibration import card_from_run, card_json, read_card_json, render_document
from poisson_tasks.calibration.artifact import Artifact, PublishedFacts
from poisson_tasks.calibration.cardjson import round_figure
from poisson_tasks.errors import CardRefusal
from poisson_tasks.prereg import Thresholds
from poisson_tasks.runfolder import EpisodeLine
from poisson_tasks.verifier import Outcome

ROOT = Path(__file__).resolve().parents[1]


def run(
    folder: Path,
    arms: Sequence[str] = ("depth:d1", "depth:d2"),
    tasks: int = 4,
    attempts: int = 2,
    lines: Sequence[EpisodeLine] | None = None,
    installed: str = FAKE_HASH,
    published: Sequence[PublishedFacts] = (),
    **head: Any,
) -> Artifact:
    """A card from a small full run (alternating pass and fail) unless lines are given."""
    if lines is None:
        lines = [
            line(a, s, t, "passed" if (s + t) % 2 else "wrong_state")
            for a in arms
            for s in range(tasks)
            for t in range(attempts)
        ]
    write_run(folder, header(arms, range(tasks), attempts, **head), lines)
    return card_from_run(
        folder,
        installed_generator_hash=installed,
        installed_engine_hash=FAKE_ENGINE_HASH,
        published=list(published),
    )


def keys(a: Artifact) -> list[str]:
    return [c.key for c in a.statements.does_not_claim]


def facts(**over: Any) -> PublishedFacts:
    base: dict[str, Any] = {
        "name": "reference-oracle",
        "model": "oracle",
        "generator_hash": FAKE_HASH,
        "seeds": list(range(60)),
        "decoding": dict(DECODING),
        "strictness": ["strict"],
        "arms": list(PUBLISHED_ARMS),
        "attempts": 5,
    }
    return PublishedFacts(**{**base, **over})


# --------------------------------------------------------------------------- refusals


def _no_call_lines(arm: str, n: int, no_calls: int) -> list[EpisodeLine]:
    return [
        line(
            arm,
            s,
            0,
            "wrong_state" if s < no_calls else "passed",
            tool_calls=0 if s < no_calls else None,
        )
        for s in range(n)
    ]


def test_no_call_refusal_names_every_cell_and_its_share(tmp_path: Path) -> None:
    lines = _no_call_lines("depth:d1", 20, 3) + _no_call_lines("depth:d1+h8", 20, 5)
    with pytest.raises(CardRefusal) as err:
        run(tmp_path, arms=("depth:d1", "depth:d1+h8"), tasks=20, attempts=1, lines=lines)
    msg = str(err.value)
    assert "depth:d1 (0.150)" in msg and "depth:d1+h8 (0.250)" in msg
    assert "\n" not in msg and err.value.exit_code == 1


def test_no_call_share_at_the_limit_is_published(tmp_path: Path) -> None:
    lines = _no_call_lines("depth:d1", 20, 2)  # 0.10 exactly: "more than 10%" is not met
    a = run(tmp_path, arms=("depth:d1",), tasks=20, attempts=1, lines=lines)
    assert a.no_call_peak is not None
    assert (a.no_call_peak.arm_id, a.no_call_peak.share) == ("depth:d1", 0.1)
    assert "The no-call refusal passed" in render_document(a)


def _instrument_lines(arm: str, n: int, failures: int) -> list[EpisodeLine]:
    out = [line(arm, s, 0, "passed" if s % 2 else "wrong_state") for s in range(n)]
    out += [line(arm, s, 0, "api_error", tool_calls=0) for s in range(failures)]
    return out


def test_a_cell_over_the_instrument_limit_is_withheld_with_its_comparisons(tmp_path: Path) -> None:
    lines = _instrument_lines("depth:d1", 49, 2) + _instrument_lines("depth:d2", 49, 1)
    a = run(tmp_path, tasks=49, attempts=1, lines=lines)
    d1, d2 = a.cell("depth:d1"), a.cell("depth:d2")
    assert not d1.published and d1.withheld is not None and "0.039" in d1.withheld
    assert d1.strict is None and d1.leaky is None and d1.costs is None and d1.pass_at_k == []
    assert d1.instrument.count == 2 and d1.instrument.rate == round(2 / 51, 6)
    assert d2.published and d2.instrument.rate == 0.02  # exactly the limit: published
    assert all(
        c.verdict == "left_out" and c.reason == "d1 is withheld" for c in a.knobs[0].comparisons
    )
    assert a.knobs[0].ordering_strict.verdict == "cannot_tell"
    assert a.knobs[0].ordering_strict.no_estimate == ["d1"]
    assert "withheld" in keys(a)
    md = render_document(a)
    assert "| `d1` | withheld | withheld |" in md and "left out: d1 is withheld" in md
    assert "cannot tell (point estimates: none at d1; never rise elsewhere;" in md


def test_no_cell_withheld_means_no_withheld_line(tmp_path: Path) -> None:
    assert "withheld" not in keys(run(tmp_path))


def test_cli_refusal_is_one_line_and_exit_1(tmp_path: Path) -> None:
    write_run(tmp_path, header(["depth:d1"], range(10), 1), _no_call_lines("depth:d1", 10, 5))
    proc = subprocess.run(
        [sys.executable, "-m", "poisson_tasks.cli", "card", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert (
        len(lines) == 1
        and lines[0].startswith("error: card refused:")
        and "depth:d1 (0.500)" in lines[0]
    )


# --------------------------------------------------------------------------- does-not-claim lines


def test_one_model_line_is_always_there_and_the_what_it_is_text_counts(tmp_path: Path) -> None:
    a = run(tmp_path)
    assert keys(a)[0] == "one_model"
    text = a.statements.what_it_is
    assert "`synthetic-model`" in text and "4 generated tasks per level with 2 attempts" in text
    assert "16 episodes over 2 arms, 16 of them scored" in text and "at least 0.15" in text


def test_reference_policy_is_labelled(tmp_path: Path) -> None:
    a = run(tmp_path / "ref", provider="reference", model="oracle")
    assert a.kind == "reference-policy" and "reference_policy" in keys(a)
    md = render_document(a)
    assert md.startswith("# Reference-policy card: `oracle`") and "**Reference policy.**" in md
    b = run(tmp_path / "api")
    assert b.kind == "model" and "reference_policy" not in keys(b)
    assert "Reference policy" not in render_document(b)


GRADED_ARMS = ("depth:d8", "depth:d2", "depth:d1+h8", "depth:d2+h5")  # not in level order


def _what_it_is(folder: Path, model: str, arms: Sequence[str] = GRADED_ARMS) -> str:
    return run(folder, arms=arms, provider="reference", model=model).statements.what_it_is


def test_a_graded_card_says_its_difference_is_the_designed_one(tmp_path: Path) -> None:
    """A card of the graded fixture gives the chance its parameters set at each level, in level
    order, which way it moves, that the difference is the fixture's own, and how its controls and
    a one-call task behave; no other reference policy's card, and no model's, says any of it."""
    text = _what_it_is(tmp_path / "up", "graded?p_low=0.1&p_high=0.8")
    assert (
        "with a chance its parameters set for each level: 0.200 at depth:d2 and 0.800 at "
        "depth:d8, so more often at higher depth, by construction. A difference between its "
        "levels is therefore the one the fixture was built to have: this card shows the "
        "instrument resolving a known effect, not a property of any model."
    ) in text
    assert "Its control arms give up at the chance of their own level" in text
    assert "passes whatever the chance: depth:d1+h8 here." in text
    follows = _what_it_is(tmp_path / "len", "graded?p_low=0.1&p_high=0.8&length_follows=1")
    assert "give up at the chance of the level they stand in for" in follows
    down = _what_it_is(tmp_path / "down", "graded?depth_low=0.8&depth_high=0.1", GRADED_ARMS[:2])
    assert "0.700 at depth:d2 and 0.100 at depth:d8, so less often at higher depth" in down
    assert "control arms" not in down and "whatever the chance" not in down
    flat = _what_it_is(tmp_path / "flat", "graded?p_low=0.3&p_high=0.3", GRADED_ARMS[:2])
    assert "so equally at every depth level" in flat
    for name, model in (("noisy", "noisy"), ("oracle", "oracle")):
        assert "fixture" not in _what_it_is(tmp_path / name, model)
    assert "fixture" not in run(tmp_path / "model", arms=GRADED_ARMS).statements.what_it_is


def test_fewer_tasks_than_published(tmp_path: Path) -> None:
    assert "fewer_tasks" in keys(run(tmp_path / "few", tasks=59, attempts=1))
    assert "fewer_tasks" not in keys(run(tmp_path / "full", tasks=60, attempts=1))


def test_other_generator_than_the_published_cards(tmp_path: Path) -> None:
    a = run(tmp_path / "a", published=[facts(generator_hash="a" * 64)])
    assert "other_generator" in keys(a)
    assert "aaaaaaaaaaaa" in a.statements.does_not_claim[keys(a).index("other_generator")].text
    assert "other_generator" not in keys(run(tmp_path / "b", published=[facts()]))
    assert "other_generator" not in keys(run(tmp_path / "c", published=[]))


@pytest.mark.parametrize(
    ("over", "head", "what"),
    [
        ({}, {"decoding": {**DECODING, "temperature": 0.7}}, "decoding"),
        ({"strictness": ["leaky"]}, {}, "strictness"),
        ({"seeds": [100, 101]}, {}, "seeds"),
    ],
)
def test_measured_differently(
    tmp_path: Path, over: dict[str, Any], head: dict[str, Any], what: str
) -> None:
    a = run(tmp_path / "a", published=[facts(**over)], **head)
    assert "measured_differently" in keys(a)
    assert (
        f"({what} differ)"
        in a.statements.does_not_claim[keys(a).index("measured_differently")].text
    )
    assert "measured_differently" not in keys(run(tmp_path / "b", published=[facts()]))


def test_no_published_card_covers_the_plan(tmp_path: Path) -> None:
    assert "not_covered" in keys(
        run(tmp_path / "a", arms=("faults:f0", "faults:f1"), published=[facts()])
    )
    assert "not_covered" in keys(run(tmp_path / "b", published=[]))
    assert "not_covered" not in keys(run(tmp_path / "c", published=[facts()]))


def test_self_served_model(tmp_path: Path) -> None:
    a = run(
        tmp_path / "a",
        provider="vllm",
        serving={
            "provider": "vllm",
            "model": "m",
            "revision": "rev1",
            "details": {"version": {"version": "0.29.0"}},
        },
    )
    assert "self_served" in keys(a)
    md = render_document(a)
    assert "- serving stack: vllm 0.29.0" in md and "- weights revision: rev1" in md
    assert "self_served" not in keys(run(tmp_path / "b"))


def test_distractor_is_experimental(tmp_path: Path) -> None:
    a = run(tmp_path / "a", arms=("distractor:r0@k16", "distractor:r2@k16"))
    assert "distractor_experimental" in keys(a)
    assert "distractor_experimental" not in keys(run(tmp_path / "b"))


def test_stale_when_the_installed_generator_differs(tmp_path: Path) -> None:
    a = run(tmp_path / "a", installed="1" * 64)
    assert a.stale and "stale" in keys(a)
    md = render_document(a)
    assert "> **Stale.**" in md and "111111111111" in md
    b = run(tmp_path / "b")
    assert not b.stale and "stale" not in keys(b) and "Stale" not in render_document(b)


def test_resumed_attempts(tmp_path: Path) -> None:
    lines = [line("depth:d1", s, 0, "passed", session=1 if s == 3 else 0) for s in range(4)]
    a = run(
        tmp_path / "a",
        arms=("depth:d1",),
        attempts=1,
        lines=lines,
        sessions=("interrupted", "complete"),
    )
    assert "resumed" in keys(a) and a.cell("depth:d1").resumed == 1
    assert "resumed" not in keys(run(tmp_path / "b"))


def test_incomplete_cells_name_the_stop(tmp_path: Path) -> None:
    lines = [line("depth:d1", s, t) for s in range(4) for t in range(2)] + [line("depth:d2", 0, 0)]
    a = run(tmp_path / "a", lines=lines, sessions=("token_budget",))
    assert [a.cell(x).incomplete for x in ("depth:d1", "depth:d2")] == [False, True]
    assert a.cell("depth:d2").missing == 7
    text = a.statements.does_not_claim[keys(a).index("incomplete")].text
    assert text.startswith("depth:d2 holds fewer") and "stopped at its token budget" in text
    assert "incomplete" not in keys(run(tmp_path / "b"))


def test_thresholds_other_than_declared(tmp_path: Path) -> None:
    write_run(
        tmp_path, header(["depth:d1"], range(4), 1), [line("depth:d1", s, 0) for s in range(4)]
    )
    changed = card_from_run(
        tmp_path,
        Thresholds(resolution=0.05),
        installed_generator_hash=FAKE_HASH,
        installed_engine_hash=FAKE_ENGINE_HASH,
        published=[],
    )
    assert "thresholds_changed" in keys(changed) and changed.thresholds.resolution == 0.05
    assert "thresholds the run declared" in render_document(changed)
    same = card_from_run(
        tmp_path,
        installed_generator_hash=FAKE_HASH,
        installed_engine_hash=FAKE_ENGINE_HASH,
        published=[],
    )
    assert "thresholds_changed" not in keys(same)


def test_depth_note_only_with_the_top_depth_level(tmp_path: Path) -> None:
    a = run(tmp_path / "a", arms=("depth:d5", "depth:d8"))
    assert a.statements.depth_note is not None and "## How depth is read" in render_document(a)
    b = run(tmp_path / "b", arms=("depth:d1", "depth:d2", "depth:d1+h8"))
    assert b.statements.depth_note is None and "How depth is read" not in render_document(b)


# --------------------------------------------------------------------------- canonical JSON


def test_rounding_rule() -> None:
    assert round_figure(0.1234565) == round(0.1234565, 6)
    assert round_figure(1 / 3) == 0.333333
    assert repr(round_figure(-1e-9)) == "0.0"
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="no NaN or infinity"):
            round_figure(bad)


def test_card_json_is_sorted_rounded_and_reads_back_equal(tmp_path: Path) -> None:
    a = run(tmp_path)
    data = card_json(a)
    assert data.endswith(b"\n") and read_card_json(data) == a
    parsed = json.loads(data)
    assert list(parsed) == sorted(parsed)

    def floats(x: Any) -> list[float]:
        if isinstance(x, float):
            return [x]
        if isinstance(x, dict):
            return [f for v in x.values() for f in floats(v)]
        if isinstance(x, list):
            return [f for v in x for f in floats(v)]
        return []

    assert all(f == round(f, 6) for f in floats(parsed))


_SCRIPT = """
import sys
from pathlib import Path
from synthetic_runs import FAKE_ENGINE_HASH, FAKE_HASH
from poisson_tasks.calibration import card_from_run, card_json, render_document
a = card_from_run(Path(sys.argv[1]), installed_generator_hash=FAKE_HASH, installed_engine_hash=FAKE_ENGINE_HASH, published=[])
sys.stdout.buffer.write(card_json(a) + render_document(a).encode())
"""


def test_card_bytes_are_identical_across_processes_with_different_hash_seeds(
    tmp_path: Path,
) -> None:
    outcomes: list[Outcome] = ["passed", "overshoot", "wrong_state", "collateral_mutation"]
    arms = ("depth:d1", "depth:d2", "distractor:r0@k16", "distractor:r2@k16")
    lines = [
        line(a, s, t, outcomes[(s * 7 + t * 3 + len(a)) % 4])
        for a in arms
        for s in range(12)
        for t in range(3)
    ]
    write_run(tmp_path, header(arms, range(12), 3), lines)
    outs = []
    for hash_seed in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(ROOT / "tests")}
        proc = subprocess.run(
            [sys.executable, "-c", _SCRIPT, str(tmp_path)],
            capture_output=True,
            cwd=ROOT,
            env=env,
            check=True,
        )
        outs.append(proc.stdout)
    assert outs[0] == outs[1] and len(outs[0]) > 1000


def test_counts_take_their_noun_in_number_and_a_stop_reads_as_words(tmp_path: Path) -> None:
    # issue 34 item 5: "1 attempts", "1 episodes in flight", "stopped with complete"
    a = run(tmp_path / "one", arms=("depth:d1", "depth:d2"), tasks=3, attempts=1, concurrency=1)
    md = render_document(a)
    for wrong in ("1 attempts", "1 episodes", "1 sessions", "1 tasks", "stopped with"):
        assert wrong not in md, wrong
    assert "2 arms × 3 tasks × 1 attempt: 6 episodes planned" in md
    assert "The run's last session ran every planned episode." in md
    assert "1 episode in flight at once" in md and "with 1 attempt at each" in md
    cut = run(tmp_path / "cut", tasks=2, attempts=2, sessions=("token_budget",))
    assert "The run's last session stopped at its token budget." in render_document(cut)


def test_every_stop_reason_has_its_words() -> None:
    from typing import get_args

    from poisson_tasks.runfolder import STOP_WORDS, StopReason, stop_words

    assert set(STOP_WORDS) == set(get_args(StopReason))
    assert stop_words("complete") == "ran every planned episode"


def test_the_card_opens_with_what_it_can_and_cannot_tell(tmp_path: Path) -> None:
    # issue 34 item 4: one sentence at the top of the card says what its size can tell
    from poisson_tasks.power import called_difference

    a = run(tmp_path / "a", tasks=12, attempts=2)
    md = render_document(a)
    top = md.split("\n## ", 1)[0]
    sentence = a.statements.can_tell
    assert f"**What this card can tell.** {sentence}" in top
    assert (
        f"with 12 tasks per level it calls a difference of {called_difference(12, 0.15):.2f}"
        in (sentence)
    )
    assert "it calls none measured below 0.15" in sentence
    widest = max(f.high - f.low for c in a.cells for f in (c.strict, c.leaky) if f is not None)
    assert f"(at most {widest:.2f} wide here)" in sentence
    assert json.loads(card_json(a))["statements"]["can_tell"] == sentence
    # too few tasks to be sure of any call, and one level of each knob
    few = run(tmp_path / "b", tasks=3, attempts=2).statements.can_tell
    assert "with 3 tasks per level no difference between neighbouring levels is sure" in few
    one = run(tmp_path / "c", arms=("depth:d1",), tasks=3, attempts=1).statements.can_tell
    assert one.endswith("it has one level of each knob, so it compares no levels.")
