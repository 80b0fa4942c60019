"""The words the model is shown: one system prompt, and user-prompt templates with named slots."""

from __future__ import annotations

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


def goal_text(stage: int, stage_name: str) -> str:
    return f"{stage} ({stage_name})"


def filler(tokens: int) -> str:
    """Neutral text of about `tokens` tokens (never over), appended to a control arm's system prompt."""
    if tokens <= 0:
        return ""
    words: list[str] = []
    i = 0
    while count_tokens(" ".join(words)) < tokens:
        words.extend(FILLER_SENTENCES[i % len(FILLER_SENTENCES)].split())
        i += 1
    while words and count_tokens(" ".join(words)) > tokens:
        words.pop()
    return " ".join(words)
