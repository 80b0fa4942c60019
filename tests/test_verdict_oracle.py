"""Every verdict read twice: verify() beside tests/verdict_oracle.py, a second reading written from
the spec alone, over seeded episodes of every knob's arms (issue 32, item 2).

The fast tests run a sample on every arm of every knob (levels and control arms, eval and train,
strict and /leaky), with and without the user's own tools in the block, and read every bundle's
reference and negative controls twice; the slow sweep runs over 100,000 episodes. Any field the two
readings give differently fails the test, with a count and one example per class of disagreement.
docs/what-a-task-is.md ("The verdict, read twice") describes the classes and the counts.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from verdict_episodes import Case, World, case
from verdict_oracle import ORDER, OracleVerdict, block_signatures, judge

from poisson_tasks.arms import KNOBS, all_arms, arm_id
from poisson_tasks.bundle import TaskBundle
from poisson_tasks.generator import generate
from poisson_tasks.owntools import (
    ToolSet,
    load_tool_file,
    scored_calls,
    tool_file_problems,
    with_own_tools,
)
from poisson_tasks.verifier import verify

VARIANTS = ("", "/train", "/leaky", "/train/leaky")
# Compared on every verdict; the replay's fields only where a verdict was reached (on
# verifier_error the spec defines no replay, and verify reports none).
LABEL_FIELDS = ("outcome", "strict_label", "leaky_pass", "passed", "malformed_clause")
ROOT = Path(__file__).resolve().parent.parent
# Two tool files for the own-tools readings: the example's forty tools (every schema closed,
# additionalProperties false) and three whose schemas let other names through.
OPEN_TOOLS: list[dict[str, Any]] = [
    {
        "name": "lookup_account",
        "description": "An account by id; other fields are passed on.",
        "parameters": {
            "type": "object",
            "properties": {"account_id": {"type": "string"}, "depth": {"type": "integer"}},
            "required": ["account_id"],
        },
    },
    {
        "name": "rate_card",
        "description": "A rate card for a region.",
        "parameters": {
            "type": "object",
            "properties": {"region": {"type": "string", "enum": ["eu", "us"]}},
            "required": ["region"],
            "additionalProperties": True,
        },
    },
    {
        "name": "tag_note",
        "description": "Tags a note; any further tag is a string.",
        "parameters": {
            "type": "object",
            "properties": {"note": {"type": "string"}},
            "required": [],
            "additionalProperties": {"type": "string"},
        },
    },
]


def own_tool_sets() -> list[ToolSet]:
    tools, problems = tool_file_problems(OPEN_TOOLS)
    assert problems == []
    open_set = ToolSet(source="open", sha256="0" * 64, tools=tuple(tools))
    return [load_tool_file(ROOT / "examples" / "own-tools-40.json"), open_set]


# Overshoot needs a stage tool above the goal, which only depth and shape blocks carry.
OVERSHOOT_KNOBS = frozenset({"depth", "shape"})


def arms_of(knob: str, variants: Sequence[str] = VARIANTS) -> list[str]:
    """Every arm of a knob (each level and control arm) in every split and strictness."""
    return [arm_id(spec) + variant for spec in all_arms(knob) for variant in variants]


def read_twice(
    bundle: TaskBundle, episode: Case, own: ToolSet | None = None
) -> tuple[OracleVerdict, list[tuple[str, Any, Any]]]:
    """The oracle's verdict, and (field, oracle's value, verify's value) for every field the two
    readings give differently.

    With the user's own tools in the block, the oracle judges the model's calls against the user's
    schemas, while verify judges them as the runner scores them (owntools.scored_calls), so their
    observations differ by design (a user tool's call reaches the engine rewritten) and are not
    compared; neither moves a record.
    """
    flags = (episode.ended_with_reply, episode.turn_limit_hit, episode.fmt)
    mine = judge(bundle, episode.turns, *flags)
    scored = episode.turns if own is None else [scored_calls(list(t), own) for t in episode.turns]
    theirs = verify(bundle, scored, *flags)
    out = [(f, getattr(mine, f), getattr(theirs, f)) for f in LABEL_FIELDS]
    if "verifier_error" not in (mine.outcome, theirs.outcome):
        out += [
            ("calls", mine.calls, theirs.calls),
            ("goal_stages", mine.goal_stages, tuple(theirs.goal_stages)),
            ("final_state", mine.final_state, tuple(sorted(theirs.final_state))),
        ]
        if own is None:
            out.append(("observations", mine.observations, tuple(theirs.observations)))
    return mine, [d for d in out if d[1] != d[2]]


@dataclass
class Tally:
    """What a sweep compared, per knob, and every class of disagreement it met."""

    episodes: Counter[str] = field(default_factory=Counter)
    outcomes: dict[str, Counter[str]] = field(default_factory=dict)
    clauses: dict[str, Counter[int]] = field(default_factory=dict)
    leaky_not_strict: Counter[str] = field(default_factory=Counter)
    over_and_short: Counter[str] = field(default_factory=Counter)
    controls: Counter[str] = field(default_factory=Counter)
    disagreements: Counter[tuple[tuple[str, Any, Any], ...]] = field(default_factory=Counter)
    examples: dict[tuple[tuple[str, Any, Any], ...], str] = field(default_factory=dict)

    def add(
        self, knob: str, bundle: TaskBundle, episode: Case, where: str, own: ToolSet | None
    ) -> None:
        seen, diff = read_twice(bundle, episode, own)
        self.episodes[knob] += 1
        if diff:
            key = tuple((f, a, b) for f, a, b in diff if f not in ("observations", "final_state"))
            key += tuple(
                (f, "differ", "") for f, _, _ in diff if f in ("observations", "final_state")
            )
            self.disagreements[key] += 1
            self.examples.setdefault(key, f"{where} ({episode.kind})")
            return
        self.outcomes.setdefault(knob, Counter())[seen.outcome] += 1
        if seen.malformed_clause is not None:
            self.clauses.setdefault(knob, Counter())[seen.malformed_clause] += 1
        if seen.leaky_pass and seen.strict_label != "passed":
            self.leaky_not_strict[knob] += 1
        if seen.goal_stages is not None:
            pairs = list(zip(seen.goal_stages, bundle.goal, strict=True))
            if any(s > g.stage for s, g in pairs) and any(s < g.stage for s, g in pairs):
                self.over_and_short[knob] += 1

    def report(self) -> str:
        lines = [f"{'knob':<11} {'episodes':>9} {'controls':>9}  outcomes (oracle = verify)"]
        for knob in KNOBS:
            seen = self.outcomes.get(knob, Counter())
            shown = ", ".join(f"{o} {seen[o]}" for o in ORDER if seen[o])
            lines.append(f"{knob:<11} {self.episodes[knob]:>9,} {self.controls[knob]:>9,}  {shown}")
        total, controls = sum(self.episodes.values()), sum(self.controls.values())
        lines.append(f"{'all':<11} {total:>9,} {controls:>9,}")
        for key, n in self.disagreements.most_common():
            lines.append(f"DISAGREE x{n}: {key}; e.g. {self.examples[key]}")
        return "\n".join(lines)


def read_controls(tally: Tally, knob: str, bundle: TaskBundle) -> None:
    """The reference and every negative control, judged by both: each earns its keyed outcome."""
    ref = [[c] for c in bundle.reference_calls]
    for name, args in [("reference", (ref, True, False, None))] + [
        (key, (ep.turns, ep.ended_with_reply, ep.turn_limit_hit, None))
        for key, ep in sorted(bundle.negative_controls.items())
    ]:
        want = "passed" if name == "reference" else name.split("_clause_")[0]
        clause = int(name.rsplit("_", 1)[1]) if "_clause_" in name else None
        for verdict in (judge(bundle, *args), verify(bundle, *args)):
            assert (verdict.outcome, verdict.malformed_clause) == (want, clause), (
                f"{bundle.arm_id} seed {bundle.seed}: {name} earned {verdict.outcome} "
                f"(clause {verdict.malformed_clause}) from {type(verdict).__name__}"
            )
        tally.controls[knob] += 1


def sweep(
    knobs: Iterable[str],
    seeds: Sequence[int],
    per_bundle: int,
    own: ToolSet | None = None,
    variants: Sequence[str] = VARIANTS,
) -> Tally:
    """Both readings over `per_bundle` episodes of every arm of `knobs` at each seed (with the
    user's tools `own` in every block, when given)."""
    tally = Tally()
    for knob in knobs:
        for arm in arms_of(knob, variants):
            for seed in seeds:
                bundle = generate(arm, seed)
                if own is not None:
                    bundle = with_own_tools(bundle, own)
                read_controls(tally, knob, bundle)
                world = World(bundle, own)
                for index in range(per_bundle):
                    where = f"{arm} seed {seed} #{index}"
                    tally.add(knob, bundle, case(world, index), where, own)
    return tally


def assert_covered(tally: Tally, knobs: Iterable[str]) -> None:
    """The sweep reached every outcome, every clause and both leaky readings on every knob, so
    agreement is not agreement on one easy case."""
    for knob in knobs:
        want = {o for o in ORDER if o not in ("replay_mismatch", "api_error", "wall_timeout")}
        if knob not in OVERSHOOT_KNOBS:
            want.discard("overshoot")
        assert want <= set(tally.outcomes[knob]), (knob, tally.outcomes[knob])
        assert set(tally.clauses[knob]) == {1, 2, 3, 4}, (knob, tally.clauses[knob])
        assert tally.leaky_not_strict[knob] > 0, knob
    assert tally.over_and_short["shape"] > 0


def test_a_sample_of_every_knob_reads_the_same_twice() -> None:
    tally = sweep(KNOBS, seeds=(11,), per_bundle=60)
    assert not tally.disagreements, tally.report()
    for knob in KNOBS:
        assert tally.episodes[knob] == 60 * len(arms_of(knob)), knob
    assert_covered(tally, KNOBS)


def test_every_block_states_what_the_engine_binds() -> None:
    """verify judges clauses 2 to 4 from the engine's bindings, the oracle (as the spec says) from
    the block the model saw; they agree because every generated block names exactly the bound tools,
    each schema requiring and allowing exactly its binding's parameters, and every goal record is
    in the ledger. Held here for every arm."""
    for knob in KNOBS:
        for arm in arms_of(knob):
            for seed in (0, 1):
                b = generate(arm, seed)
                block = block_signatures(b.tools)
                bound = {x.name: frozenset(x.parameters) for x in b.engine.bindings}
                assert {n: (s.required, s.allowed) for n, s in block.items()} == {
                    n: (p, p) for n, p in bound.items()
                }, arm
                assert len(block) == len(b.tools), arm
                rows = {(r.ledger, r.record_id) for r in b.initial_state}
                assert all((g.ledger, g.record_id) in rows for g in b.goal), arm


def test_every_control_earns_its_key_under_both_readings() -> None:
    tally = sweep(KNOBS, seeds=(0, 1, 2), per_bundle=0)  # read_controls asserts each verdict
    for knob in KNOBS:
        want = sum(
            1 + len(generate(arm, seed).negative_controls)
            for arm in arms_of(knob)
            for seed in (0, 1, 2)
        )
        assert tally.controls[knob] == want, knob


def own_tools_sweep(seeds: Sequence[int], per_bundle: int) -> Tally:
    """Both readings with the user's tools in the block (eval, strict and /leaky arms)."""
    tally = Tally()
    for own in own_tool_sets():
        one = sweep(KNOBS, seeds, per_bundle, own=own, variants=("", "/leaky"))
        for name in ("episodes", "controls", "disagreements", "leaky_not_strict"):
            getattr(tally, name).update(getattr(one, name))
        tally.examples = {**one.examples, **tally.examples}
        for knob in KNOBS:
            tally.outcomes.setdefault(knob, Counter()).update(one.outcomes.get(knob, Counter()))
            tally.clauses.setdefault(knob, Counter()).update(one.clauses.get(knob, Counter()))
    return tally


def test_own_tools_read_the_same_twice() -> None:
    """A block holding the user's own tools: the oracle reads the model's calls against the
    user's schemas (docs/own-tools.md's table), verify reads them as the runner scores them."""
    tally = own_tools_sweep(seeds=(5,), per_bundle=20)
    assert not tally.disagreements, tally.report()
    assert sum(tally.episodes.values()) == 2 * 20 * 2 * sum(len(all_arms(k)) for k in KNOBS)
    assert set().union(*tally.clauses.values()) == {1, 2, 3, 4}


@pytest.mark.slow
def test_over_100000_episodes_read_the_same_twice(capsys: pytest.CaptureFixture[str]) -> None:
    seeds, per_bundle = range(40), 15
    tally = sweep(KNOBS, seeds=seeds, per_bundle=per_bundle)
    with capsys.disabled():
        print("\n" + tally.report())
    assert not tally.disagreements, tally.report()
    for knob in KNOBS:
        assert tally.episodes[knob] == len(seeds) * per_bundle * len(arms_of(knob)), knob
    assert sum(tally.episodes.values()) >= 100_000
    assert_covered(tally, KNOBS)


@pytest.mark.slow
def test_own_tools_over_many_seeds_read_the_same_twice(capsys: pytest.CaptureFixture[str]) -> None:
    tally = own_tools_sweep(seeds=range(6), per_bundle=20)
    with capsys.disabled():
        print("\nown tools in the block\n" + tally.report())
    assert not tally.disagreements, tally.report()
    assert sum(tally.episodes.values()) == 6 * 20 * 2 * 2 * sum(len(all_arms(k)) for k in KNOBS)
    assert set().union(*tally.clauses.values()) == {1, 2, 3, 4}


def episodes_digest() -> str:
    """A digest of 40 episodes of one arm of every knob at seed 3 (their calls, endings and fmt)."""
    h = hashlib.sha256()
    for knob in KNOBS:
        bundle = generate(arms_of(knob)[-1], 3)
        world = World(bundle)
        for index in range(40):
            ep = case(world, index)
            calls = [[(c.name, c.arguments, c.raw_arguments) for c in t] for t in ep.turns]
            fmt = None if ep.fmt is None else ep.fmt.model_dump()
            h.update(repr((ep.kind, calls, ep.ended_with_reply, ep.turn_limit_hit, fmt)).encode())
    return h.hexdigest()


@pytest.mark.slow
def test_the_episodes_are_the_same_in_every_process() -> None:
    """The episodes are keyed by task id and index, never by hash() or set order."""
    script = "import test_verdict_oracle as t; print(t.episodes_digest())"
    runs = {
        subprocess.run(
            [sys.executable, "-c", script],
            env={**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT / "tests")},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for seed in ("0", "1", "4242")
    }
    assert runs == {episodes_digest()}
