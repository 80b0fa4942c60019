"""The words the model is shown: one system prompt, and user-prompt templates with named slots."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from poisson_tasks.bundle import PromptParts
from poisson_tasks.domain.vocabulary import FILLER_SENTENCES
from poisson_tasks.tokens import count_tokens

SYSTEM_PROMPT = (
    "You operate a records ledger through the tools in this request and nothing else. "
    "Every tool call returns one line: a six-digit sequence number, a status word and a "
    "32-digit hexadecimal payload. A wrong call returns a status word saying so and changes "
    "nothing. When the task is done, reply in one short sentence without calling a tool."
)

# The base template of a stage task. {goal} is the knob slot of depth.
CLIMB = (
    "Move {ledger} record {record_id} from stage 0 to stage {goal}, and stop there. "
    "Its entry code is {entry_code}: the first stage call takes it as its token, and each "
    "stage call returns in its payload the token for the next one.{extra} "
    "Record {sibling_id} (entry code {sibling_code}) is also in the {ledger} ledger; "
    "leave it where it is."
)


def render(template: str, slots: dict[str, str], knob_slots: list[str]) -> tuple[str, PromptParts]:
    """Fill a template and keep its parts for the pin ledger."""
    return template.format(**slots), PromptParts(
        template=template, slots=dict(slots), knob_slots=list(knob_slots)
    )


@lru_cache(maxsize=512)
def filler(tokens: int) -> str:
    """Neutral text of about `tokens` tokens (never over), appended to a control arm's system prompt."""
    if tokens <= 0:
        return ""
    words: list[str] = []
    i = 0
    while count_tokens(" ".join(words)) < tokens:
        words.extend(FILLER_SENTENCES[i % len(FILLER_SENTENCES)].split())
        i += 1
    lo, hi = 0, len(words)  # the longest prefix of words within `tokens`, by bisection
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count_tokens(" ".join(words[:mid])) <= tokens:
            lo = mid
        else:
            hi = mid - 1
    return " ".join(words[:lo])


# --- templates and sentences of the seven newer knobs ---------------------------------------------

# similarity: the ledger slot is "<cls> ledger <number>", e.g. "invoice ledger 4821".
LEDGER_CLIMB = (
    "Move record {record_id} in {ledger} from stage 0 to stage {goal}, and stop there. "
    "Its entry code is {entry_code}: the first stage call takes it as its token, and each "
    "stage call returns in its payload the token for the next one.{extra} "
    "Record {sibling_id} (entry code {sibling_code}) is also in {ledger}; leave it where it is."
)

# spread: the entry code is not stated; {reads} names the four reads to call, in block order.
SPREAD = (
    "Move {ledger} record {record_id} from stage 0 to stage {goal}, and stop there. "
    "Its entry code is not given: call {reads} (any query). Each answer whose status is "
    "part_i_of_n carries piece i of n at the start of its payload; the pieces are of equal "
    "length and make 12 hex digits in all, and joined in order (piece 1 first) they are the "
    "entry code. The first stage call takes the entry code as its token, and each stage call "
    "returns in its payload the token for the next one. "
    "Record {sibling_id} (entry code {sibling_code}) is also in the {ledger} ledger; "
    "leave it where it is."
)

# shape: {goal_lines} is the knob slot, one GOAL_LINE per record advanced.
SHAPE = (
    "{goal_lines} Stop each record there. A record's first stage call takes its entry code "
    "as its token, and each stage call returns in its payload the token for the next one. "
    "Record {sibling_id} (entry code {sibling_code}) is also in the {ledger} ledger; "
    "leave it where it is."
)
GOAL_LINE = (
    "Move {ledger} record {record_id} from stage 0 to stage {goal}; its entry code is {code}."
)

# faults: the same sentence in the `extra` slot at every level, the control included.
RETRY_NOTE = " A call may answer unavailable; make it again."


def stated_values(values: list[tuple[str, str]]) -> str:
    """The arguments knob's `extra` slot: ' Every stage call must also carry a=X, b=Y and c=Z.'"""
    if not values:
        return ""
    pairs = [f"{f}={v}" for f, v in values]
    listed = pairs[0] if len(pairs) == 1 else ", ".join(pairs[:-1]) + " and " + pairs[-1]
    return f" Every stage call must also carry {listed}."


def listing(names: list[str]) -> str:
    """Names in prose: 'a, b, c and d'."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def padding(target: int, measure: Callable[[str], int]) -> str:
    """Filler words (FILLER_SENTENCES in order) whose `measure` comes closest to `target`.

    `measure(text)` gives the tokens of whatever the padding is put into, so boundary effects
    are counted; ties go to the shorter padding. Empty when the target is 0 or less.
    """
    if target <= 0:
        return ""
    sentences = len(FILLER_SENTENCES)
    while True:  # double the sentences until the measure reaches the target
        text = " ".join(FILLER_SENTENCES[i % len(FILLER_SENTENCES)] for i in range(sentences))
        words = text.split()
        if measure(" ".join(words)) >= target:
            break
        sentences *= 2
    lo, hi = 0, len(words)  # the fewest words whose measure reaches the target, by bisection
    while lo < hi:
        mid = (lo + hi) // 2
        if measure(" ".join(words[:mid])) >= target:
            hi = mid
        else:
            lo = mid + 1
    best = min(
        range(max(0, lo - 2), lo + 1),
        key=lambda n: (abs(measure(" ".join(words[:n])) - target), n),
    )
    return " ".join(words[:best])


@lru_cache(maxsize=1024)
def exact_filler(tokens: int) -> str:
    """Filler words whose own token count is `tokens` or as close as words allow (see padding)."""
    return padding(tokens, count_tokens)
