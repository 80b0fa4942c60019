"""The glossary: every term a card prints, defined once, in one or two sentences.

docs/glossary.md is this table written out (scripts/render_docs.py writes it; a test holds it
current), `poisson-tasks glossary [TERM]` prints it, and the view shows a term's definition when
the pointer rests on it. A term's `forms` are the other ways a card prints it (a column header, a
verdict); `lookup` finds a term by its name or any form, numbers aside (`95% interval` and
`90% interval` are one term, `strict pass@2` and `strict pass@5` another).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from poisson_tasks.errors import PoissonError

__all__ = [
    "GLOSSARY_PAGE",
    "POINTER",
    "TERMS",
    "Term",
    "describe",
    "glossary_markdown",
    "lookup",
    "normalised",
]

GLOSSARY_PAGE = "docs/glossary.md"
# The line under a card's opening sentence that sends a reader to the definitions.
POINTER = (
    f"Every term on this card is defined in the glossary: {GLOSSARY_PAGE} in the poisson-tasks "
    "source, or `poisson-tasks glossary TERM` for one."
)


@dataclass(frozen=True, slots=True)
class Term:
    """One glossary entry: its name, its definition, and the other labels a card prints for it."""

    name: str
    definition: str
    forms: tuple[str, ...] = ()


TERMS: tuple[Term, ...] = (
    # ----------------------------------------------------------------- what is measured
    Term(
        "knob",
        "One thing about a task that a study varies on purpose, such as depth (how many chained "
        "calls the goal is away). `poisson-tasks knobs` lists the nine.",
    ),
    Term(
        "level",
        "One setting of a knob, such as depth 3; on a card each level is one row of its knob's "
        "table.",
    ),
    Term(
        "arm",
        "One level of one knob written as an id, such as `depth:d3`: the tasks a cell is measured "
        "on. A control arm is an arm too.",
        ("arms",),
    ),
    Term(
        "control arm",
        "An arm that keeps a lower level's task but adds what travels with a higher level (its "
        "history, block or prompt length), so a drop can be told apart from mere length. Control "
        "arms are never compared as levels.",
        ("control arms",),
    ),
    Term(
        "cell",
        "Everything measured on one arm for one model: its tasks, their attempts, and the figures "
        "on the arm's row.",
    ),
    Term(
        "task",
        "One generated request to move a record of a mock ledger to a goal stage with the tools "
        "given, made from (arm, seed) with no model and no network; the same arm and seed always "
        "give the same task.",
        ("tasks", "tasks per level"),
    ),
    Term(
        "seed",
        "The number that picks which task of an arm is generated. A card's seeds are derived from a "
        "declared string and are the same at every arm, which is what pairs two levels task by "
        "task.",
        ("seeds",),
    ),
    Term(
        "attempt",
        "One independent try at one task; a card has the same number of attempts at every task.",
        ("attempts", "attempts per task"),
    ),
    Term(
        "episode",
        "One attempt at one task from the first request to the model's final reply (or its cut-off), "
        "recorded as one line of the run folder.",
        ("episodes",),
    ),
    Term(
        "scored",
        "An episode whose outcome is the model's (passed or one of the model's failures); an "
        "episode the instrument failed is not scored and leaves every rate's denominator.",
    ),
    Term(
        "model call",
        "One request to the model and its reply; an episode makes one per turn until the model "
        "replies without calling a tool or the turn limit is reached.",
        ("model calls",),
    ),
    Term(
        "tool call",
        "One call of a tool in the task's block, answered by the mock ledger with a 52-byte line.",
        ("tool calls",),
    ),
    Term(
        "reference policy",
        "A scripted baseline served by poisson-tasks itself (oracle, noisy, overshoot, ...): it "
        "shows how the instrument reads a known behaviour, and no figure of it is a language "
        "model's.",
        ("reference-policy card",),
    ),
    # ----------------------------------------------------------------- rates
    Term(
        "strict pass@1",
        "The share of attempts that ended exactly at the goal, with nothing past the goal stage "
        "and no other record moved, averaged task by task so that every task weighs the same.",
        ("strict",),
    ),
    Term(
        "leaky pass@1",
        "The share of attempts in which the goal was reached, whatever else happened; depth is read "
        "on this rate.",
        ("leaky",),
    ),
    Term(
        "pass@1",
        "A level's pass rate: the average over its tasks of each task's own share of passing "
        "attempts.",
    ),
    Term(
        "interval",
        "The range the level's true pass rate lies in at the card's confidence (95% unless the "
        "pre-registration says otherwise), counting a task's attempts as less than independent "
        "ones because they move together.",
        ("C% interval", "leaky C% interval", "C% intervals"),
    ),
    Term(
        "few events",
        "Beside an interval: the cell has fewer than 15 passes or 15 failures, so its interval is "
        "wide.",
        ("few events: interval wide",),
    ),
    Term(
        "overshoot",
        "The share of attempts that reached the goal and then carried the record past it; strict "
        "fails them and leaky counts them. As an outcome, an episode whose record went past the "
        "goal stage.",
    ),
    Term(
        "pass@k",
        "The chance that at least one of k attempts at a task passes, estimated without bias per "
        "task and averaged over tasks; n/a when the run made fewer than k attempts.",
        ("strict pass@k",),
    ),
    Term(
        "pass^k",
        "The chance that all k attempts at a task pass, estimated without bias per task and "
        "averaged over tasks: how reliable a level is for a user who runs it k times.",
        ("strict pass^k",),
    ),
    Term(
        "min calls",
        "The fewest tool calls that solve the arm's tasks, known from the task alone (3 at depth "
        "3).",
        ("minimum calls",),
    ),
    Term(
        "no tool call",
        "The scored episodes that ended without calling any tool. A cell where more than the "
        "no-call limit of them did so is refused, because it measures whether the model starts, "
        "not the level.",
    ),
    Term(
        "stopped short",
        "The share of scored episodes that made at least one tool call but fewer than the minimum.",
    ),
    Term(
        "saturated",
        "A rate at or below 0.05 or at or above 0.95 (the declared bounds): a comparison on that "
        "rate leaves the level out, since nothing can fall or rise much further.",
    ),
    Term(
        "instrument failure",
        "An episode that failed for a reason that is not the model's (verifier_error, "
        "replay_mismatch, api_error, wall_timeout). It is counted where it happened and leaves "
        "every denominator; a cell with more than the instrument limit of them is withheld.",
        ("instrument", "instrument failures"),
    ),
    Term(
        "withheld",
        "A cell whose instrument failures are above the declared limit: its counts are kept, and "
        "every figure and comparison that needs it is left out.",
    ),
    Term(
        "incomplete",
        "A cell holding fewer episodes than planned, because the run stopped (a budget, a limit, "
        "a kill) before every attempt had a line; its figures come from the smaller sample.",
    ),
    # ----------------------------------------------------------------- outcomes
    Term(
        "outcome",
        "How an episode ended, one label from a closed, ordered list; the first label that applies "
        "wins.",
        ("outcomes",),
    ),
    Term("passed", "The goal was reached and nothing else moved."),
    Term(
        "collateral_mutation",
        "The goal was reached, but another record was moved too.",
    ),
    Term(
        "wrong_state",
        "The episode ended with the ledger somewhere other than the goal, typically short of it.",
    ),
    Term(
        "turn_limit",
        "The episode used up its turn limit (the declared number of model calls) before it ended.",
        ("turn limit",),
    ),
    Term(
        "malformed_call",
        "The model made a call the instrument cannot accept: written as text or as arguments that "
        "are not JSON (clause 1), to a tool outside the block (2), missing a required argument "
        "(3), or with an argument the schema does not allow (4).",
        ("malformed call", "clause"),
    ),
    Term(
        "api_error",
        "The serving side failed the request (an HTTP error the retries did not get past): an "
        "instrument failure.",
    ),
    Term(
        "wall_timeout",
        "The episode ran out of its wall-clock time: an instrument failure.",
    ),
    Term(
        "replay_mismatch",
        "The harness's record of the episode did not replay to the state it claimed: an "
        "instrument failure.",
    ),
    Term(
        "verifier_error",
        "The verifier could not reach a verdict: an instrument failure.",
    ),
    # ----------------------------------------------------------------- comparing levels
    Term(
        "adjacent levels",
        "Each level set beside the next one up on the same seeds; the card compares levels only "
        "in these pairs.",
        ("pair",),
    ),
    Term(
        "difference",
        "The lower level's rate minus the upper level's: positive when the rate falls as the level "
        "rises.",
        ("difference (lower − upper)",),
    ),
    Term(
        "paired interval",
        "The interval of a difference between two levels, computed over the seeds both share with "
        "the correlation of their tasks' rates, so the pairing narrows it.",
        ("paired C% interval",),
    ),
    Term(
        "sign test",
        "An exact binomial test over the seeds whose rate changed between two levels: most of them "
        "must move the way the difference does before the pair is called; its p-value is printed.",
        ("sign test p",),
    ),
    Term(
        "rate",
        "Which pass rate a comparison reads: strict pass@1 or leaky pass@1.",
    ),
    Term(
        "churn",
        "The share of shared seeds whose task pass rate changed between the two levels.",
    ),
    Term(
        "verdict",
        "What the card concludes about a pair of levels: distinguishable, too small to call, or "
        "left out.",
    ),
    Term(
        "distinguishable",
        "The paired interval leaves out zero, the difference reaches the declared resolution, and "
        "an exact sign test over the seeds that changed agrees: the card calls the two levels "
        "different.",
    ),
    Term(
        "too small to call",
        "The design could not tell the two levels apart: the difference is below the resolution, "
        "its interval holds zero, or the sign test disagrees. It does not say the levels are "
        "alike.",
        ("too small for this design to call",),
    ),
    Term(
        "left out",
        "The pair is not compared, because one of its levels is saturated on that rate, withheld, "
        "or has no scored episode; the reason is printed.",
    ),
    Term(
        "resolution",
        "The smallest difference between levels the card will call, declared before the run (0.15 "
        "by default). A true difference of exactly the resolution is called about half the time.",
    ),
    Term(
        "MDD",
        "Minimum detectable difference: the smallest true difference whose interval clears zero at "
        "80% power for the design's number of tasks, in the worst case unless said otherwise.",
    ),
    Term(
        "under-powered",
        "A design whose worst-case MDD is above its declared resolution: whether a difference of "
        "the resolution is called then depends on how closely the levels' tasks agree.",
    ),
    Term(
        "ordering",
        "Whether a knob's pass rate never rises from one level to the next, read from the adjacent "
        "comparisons and never from the point estimates.",
    ),
    # ----------------------------------------------------------------- costs
    Term(
        "tokens",
        "Uncached input, cached input and completion tokens of an episode added up, as the server "
        "reported them.",
    ),
    Term(
        "uncached input",
        "Input tokens the server did not serve from its prompt cache: its prompt tokens less the "
        "cached ones (the run folder's `uncached_input_tokens`).",
    ),
    Term(
        "cached input",
        "Input tokens the server reported as served from its prompt cache, usually billed at a "
        "lower rate.",
    ),
    Term(
        "completion",
        "Tokens the model wrote, its reasoning tokens included.",
    ),
    Term(
        "reasoning",
        "Completion tokens the server reported as reasoning; they are already inside completion "
        "and are never added again.",
        ("of which reasoning", "reasoning share"),
    ),
    Term(
        "tokens per strict pass",
        "Mean tokens per episode divided by strict pass@1: what one strict pass costs at that "
        "level; n/a where nothing passed.",
    ),
    Term(
        "computed dollars",
        "Dollars from the token counts at the rates the pre-registration declared; none when no "
        "rate was declared (a reference policy, a model you serve).",
    ),
    Term(
        "provider-reported dollars",
        "The cost the provider itself reported in its responses, where it did.",
    ),
    Term(
        "median",
        "The middle value over the cell's scored episodes (half above it, half below); a column "
        "headed `median X` or `mean X` is that figure of X per episode.",
        ("mean",),
    ),
    Term(
        "p90",
        "The 90th percentile over the cell's scored episodes: nine in ten were at or below it.",
    ),
    Term(
        "episode seconds",
        "Wall-clock seconds of an episode; model seconds are spent waiting on the server, harness "
        "seconds in poisson-tasks itself, setup seconds before the first request. Time is printed "
        "and decides nothing.",
        ("episode s", "model s", "harness s", "setup s"),
    ),
    Term(
        "concurrency",
        "How many episodes were in flight at once; time figures depend on it.",
    ),
    # ----------------------------------------------------------------- pins and provenance
    Term(
        "pin ledger",
        "The thirty checks (pins N1 to N35) that two arms of a knob differ in the knob and in "
        "nothing else; a violated pin refuses the contrast before any model runs.",
        ("pin", "pins"),
    ),
    Term(
        "N10",
        "The serving pin: the model, its weights, the serving engine and its version, flags, "
        "context window, quantization, chat template and sampling, held across every session of "
        "the run.",
        ("serving pin",),
    ),
    Term(
        "N13",
        "Realised first-request input tokens: the server's count of each arm's first request "
        "beside the pinned tokenizer's, reported per arm and never refused.",
        ("server tokens", "pinned tokens", "server less pinned"),
    ),
    Term(
        "contrast",
        "The arms of one knob (its levels and control arms) at one seed, held to the pin ledger "
        "together.",
    ),
    Term(
        "replay",
        "A seeded sample of a run's scored episodes run again against the same endpoint, to "
        "measure how much comes out the same (`poisson-tasks replay`).",
        ("reproducibility", "replayed episodes", "of N replayed episodes"),
    ),
    Term(
        "identical transcript",
        "A replayed episode whose every message has the same bytes as the run's, tool-call ids "
        "left out.",
    ),
    Term(
        "same tool calls",
        "A replayed episode that made the same tool calls as the run's, whatever its text.",
    ),
    Term(
        "same verdict",
        "A replayed episode scored with the same outcome as the run's.",
        ("different verdict",),
    ),
    Term(
        "first difference",
        "The model call at which a replayed transcript first parts from the run's, counting the "
        "model's own calls only.",
        ("where the first difference appeared",),
    ),
    Term(
        "count",
        "How many of the episodes named in the table's heading are in that row.",
    ),
    Term(
        "share",
        "The row's count over all the episodes named in the heading.",
    ),
    Term(
        "no-call refusal",
        "A card is not published when a cell has more than the no-call limit (10% by default) of "
        "its scored episodes without a tool call.",
        ("no-call limit", "card refused"),
    ),
    Term(
        "stale",
        "The card was made with another generator or engine build than the one installed, so its "
        "tasks or the tools' answers are not the ones this install makes.",
    ),
    Term(
        "generator hash",
        "A digest of the generator's, the verifier's and the vocabulary's source files: two builds "
        "with the same hash make the same tasks and judge them the same way.",
        ("engine hash", "vocabulary hash"),
    ),
    Term(
        "seed list hash",
        "A digest of the card's seeds, so two cards can be checked to share their tasks.",
    ),
    Term(
        "environment hash",
        "What pins the Python environment the run used: the lock file's digest, or the installed "
        "packages' versions marked as not from a lock.",
    ),
    Term(
        "pre-registration",
        "The YAML file that fixes the study before it runs: model, arms, tasks, attempts, decoding, "
        "budget and thresholds; its hash is on the card.",
        ("pre-registration hash",),
    ),
    Term(
        "records sha256",
        "The digest of the episode lines the card was computed from.",
    ),
    Term(
        "session",
        "One invocation of the runner on a run folder; a resumed run adds a session, and the card "
        "lists each with why it stopped.",
        ("sessions",),
    ),
    Term(
        "system_fingerprint",
        "An id the server returns with each response naming its backend build; a change between "
        "responses means the serving changed.",
    ),
    Term(
        "thresholds",
        "Every cut-off the card applies (saturation bounds, resolution, no-call and instrument "
        "limits, confidence), declared before the run.",
    ),
)

_PERCENT = re.compile(r"\d+(?:\.\d+)?%")
_K = re.compile(r"pass([@^])(?:[2-9]|[1-9]\d+)\b")  # pass@1 is its own term
_REPLAYED = re.compile(r"^of \d+ replayed episodes?$")


def normalised(label: str) -> str:
    """A label with its numbers set aside: `95% interval` -> `C% interval`, `pass@5` ->
    `pass@k`, `of 4 replayed episodes` -> `of N replayed episodes`; lower case, single spaces."""
    text = " ".join(label.replace("`", "").split()).lower()
    text = _PERCENT.sub("c%", text)
    text = _K.sub(lambda found: f"pass{found.group(1)}k", text)
    return _REPLAYED.sub("of n replayed episodes", text)


# A column headed `median model calls` is the median of model calls: the term after the prefix.
_PREFIXES = ("mean ", "median ", "p90 ")

_INDEX: dict[str, Term] = {}
for _term in TERMS:
    for _label in (_term.name, *_term.forms):
        _key = normalised(_label)
        if _key in _INDEX:
            raise ValueError(f"glossary: {_label!r} is defined twice")
        _INDEX[_key] = _term


def lookup(label: str) -> Term | None:
    """The term a card's label names (by name or form, numbers aside; `median X` names X), or
    None."""
    key = normalised(label)
    found = _INDEX.get(key)
    if found is None and key.startswith(_PREFIXES):
        found = _INDEX.get(key.split(" ", 1)[1])
    return found


def describe(label: str | None = None) -> str:
    """`poisson-tasks glossary [TERM]`: one term's line, or every term's; PoissonError (one line,
    exit 2) for a label the glossary does not hold, with the nearest names."""
    if label is None:
        return "\n".join(f"{term.name}: {term.definition}" for term in TERMS)
    term = lookup(label)
    if term is None:
        near = difflib.get_close_matches(normalised(label), list(_INDEX), n=3, cutoff=0.6)
        hint = f" (did you mean {', '.join(near)}?)" if near else ""
        raise PoissonError(
            f"{label!r} is not a term of the glossary{hint}; `poisson-tasks glossary` prints "
            "every term"
        )
    return f"{term.name}: {term.definition}"


def _shown(form: str) -> str:
    """A form as the glossary page prints it: `C%` as the default confidence, 95%."""
    return form.replace("C%", "95%")


def glossary_markdown() -> str:
    """docs/glossary.md: every term with its definition, in the order above."""
    out = [
        "# Glossary",
        "",
        "Every term a card prints, in a sentence or two. The view (`poisson-tasks view`) shows the "
        "same definition when the pointer rests on a term, and `poisson-tasks glossary TERM` "
        "prints one on the command line. This page is written from `poisson_tasks.glossary` by "
        "`python scripts/render_docs.py`; a test holds it current.",
        "",
    ]
    for term in TERMS:
        also = f" Also printed as: {', '.join(map(_shown, term.forms))}." if term.forms else ""
        out += [f"**{term.name}**: {term.definition}{also}", ""]
    return "\n".join(out[:-1]) + "\n"
