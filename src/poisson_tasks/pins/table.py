"""The pin ledger's thirty rows as data: what each holds, for whom, whether it refuses or reports.

This table is the single source: check_pins reads it, the CLI prints it, and a test holds
docs/knobs-and-arms.md to it row by row (id, who, mode).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from poisson_tasks.arms import KNOBS

Mode = Literal["refused", "reported", "reported-and-refused"]

# Who a row binds besides knob names: one knob's control arms, or a stage after generation.
CONTROL_SCOPES: dict[str, str] = {
    "depth controls": "depth",
    "faults control": "faults",
    "arguments control": "arguments",
    "shape control": "shape",
}
LATER_SCOPES: tuple[str, ...] = ("at run time", "at analysis")


class PinRow(BaseModel):
    """One row of the ledger: an id, what it holds across a contrast, who it binds, and its mode."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    holds: str
    who: tuple[str, ...]
    mode: Mode
    report_only_for: tuple[str, ...] = ()
    unmeasured_reason: str | None = None
    note: str = ""

    @property
    def measurable(self) -> bool:
        """False for the two rows no bundle can carry (no server, no trace at generation time)."""
        return self.unmeasured_reason is None

    def knobs(self) -> tuple[str, ...]:
        """The knobs whose contrasts check_pins holds this row across, in KNOBS order."""
        named = {CONTROL_SCOPES.get(w, w) for w in self.who}
        return tuple(k for k in KNOBS if k in named)

    def controls_only(self, knob: str) -> bool:
        """True when the row binds only `knob`'s control arms (N9, N26, N32, N34)."""
        return any(CONTROL_SCOPES.get(w) == knob for w in self.who) and knob not in self.who

    def who_text(self) -> str:
        """The who column as the doc prints it."""
        knobs = [w for w in self.who if w in KNOBS]
        rest = [w for w in self.who if w not in KNOBS]
        head = ["every knob"] if len(knobs) == len(KNOBS) else knobs
        return ", ".join([*head, *rest])

    def mode_text(self) -> str:
        """The mode column as the doc prints it."""
        if self.report_only_for:
            return f"{self.mode}; reported for {', '.join(self.report_only_for)}"
        return self.mode


_EVERY = KNOBS
_NO_SERVER = "no server and no trace exist at generation time: the serving pin is read off the run"
_NO_TRACE = "first-request input tokens are counted by the model's own tokenizer in a run's trace"

ROWS: tuple[PinRow, ...] = (
    PinRow(
        id="N1",
        who=_EVERY,
        mode="refused",
        holds="the scenario: split, seed, hidden key, task class, goal record and its entry code",
        note="every seed-drawn value comes from draw_scenario(split, seed) alone",
    ),
    PinRow(
        id="N2",
        who=_EVERY,
        mode="refused",
        holds="the slot of every tool a reference solution calls, in every block that holds it",
    ),
    PinRow(
        id="N3",
        who=_EVERY,
        mode="refused",
        holds="the system prompt; only a distractor or block control may append its filler",
    ),
    PinRow(
        id="N4",
        who=("depth", "faults", "history", "arguments", "spread"),
        mode="refused",
        holds="the tool block (for arguments: names, order and read tools; N30 holds the stage "
        "schemas)",
    ),
    PinRow(
        id="N5",
        who=("distractor",),
        mode="reported",
        holds="the block's token count",
        note="it moves with the distractor level by design, so it is recorded, never refused",
    ),
    PinRow(
        id="N6",
        who=_EVERY,
        mode="refused",
        holds="the user prompt's template, its knob slots and each other slot's token count",
        note="the knob's own slots are left out: depth's goal, arguments' values, shape's goal "
        "lines",
    ),
    PinRow(
        id="N7",
        who=_EVERY,
        mode="refused",
        report_only_for=("shape",),
        holds="how many instruction words (4+ characters) occur inside some tool name",
    ),
    PinRow(
        id="N8",
        who=_EVERY,
        mode="refused",
        holds="the observation size: every reference and seeded answer is 52 bytes",
        note="the engine's own tests hold the 52-byte line too",
    ),
    PinRow(
        id="N9",
        who=("depth controls",),
        mode="refused",
        holds="a depth control's seeded history sits in its token band over the contrast",
    ),
    PinRow(
        id="N10",
        who=("at run time",),
        mode="refused",
        holds="the serving pin: model, revision, vLLM version, sampling",
        unmeasured_reason=_NO_SERVER,
    ),
    PinRow(
        id="N11",
        who=(*_EVERY, "at run time"),
        mode="refused",
        holds="the verifier's strictness",
        note="a run inherits it from the bundles, so check_pins already holds it across them",
    ),
    PinRow(
        id="N12",
        who=(*_EVERY, "at run time"),
        mode="refused",
        holds="the engine, vocabulary and generator hashes",
        note="a run inherits them from the bundles, so check_pins already holds them across them",
    ),
    PinRow(
        id="N13",
        who=("at analysis",),
        mode="reported",
        holds="realised first-request input tokens, per model",
        unmeasured_reason=_NO_TRACE,
    ),
    PinRow(
        id="N19",
        who=("similarity",),
        mode="refused",
        holds="twelve lookalike stage tools in the block",
    ),
    PinRow(
        id="N20",
        who=("similarity",),
        mode="refused",
        holds="the block's token count",
    ),
    PinRow(
        id="N21",
        who=("similarity",),
        mode="refused",
        holds="six distinct lookalike numbers, each sharing exactly the level's digits in place "
        "with the target's, none starting with 0",
    ),
    PinRow(
        id="N22",
        who=("similarity",),
        mode="refused",
        holds="the two right tools' names, descriptions and parameters",
    ),
    PinRow(
        id="N23",
        who=("history",),
        mode="refused",
        holds="the seeded history's tokens are the level, within two",
    ),
    PinRow(
        id="N24",
        who=("faults", "history"),
        mode="refused",
        holds="every seeded call is a read tool of the block and carries the engine's ok answer",
    ),
    PinRow(
        id="N25",
        who=("faults",),
        mode="refused",
        holds="the planned unavailable answers number the level, on the right tools only, "
        "the first taking the odd one",
    ),
    PinRow(
        id="N26",
        who=("faults control",),
        mode="refused",
        holds="the control's seeded tokens are what the higher arm's failed calls add over its "
        "own level's, within two",
    ),
    PinRow(
        id="N27",
        who=("block",),
        mode="refused",
        holds="the block holds exactly the level's number of tools",
    ),
    PinRow(
        id="N28",
        who=("block",),
        mode="refused",
        holds="the right tools sit in the same slots, all among the first eight",
    ),
    PinRow(
        id="N29",
        who=("block",),
        mode="reported-and-refused",
        holds="reports the block's token count; refuses a control whose filler is not the "
        "higher arm's extra block tokens, within two",
    ),
    PinRow(
        id="N30",
        who=("arguments",),
        mode="refused",
        holds="the stage tools' schemas with the knob's extra fields set aside",
    ),
    PinRow(
        id="N31",
        who=("arguments",),
        mode="refused",
        holds="each right stage tool fixes the level less two values, the same set on each, "
        "every one stated in the request and in no tool name",
    ),
    PinRow(
        id="N32",
        who=("arguments control",),
        mode="refused",
        holds="the control's request is the higher arm's length, within two tokens",
    ),
    PinRow(
        id="N33",
        who=("shape",),
        mode="reported-and-refused",
        holds="refuses unless four stage calls and sixteen tools at every width; reports the "
        "block's token count",
    ),
    PinRow(
        id="N34",
        who=("shape control",),
        mode="refused",
        holds="the control's request is the widest arm's length, within two tokens",
    ),
    PinRow(
        id="N35",
        who=("spread",),
        mode="refused",
        holds="the same four reads at every level; as many answer a part as the level, and the "
        "parts join in order to the entry code",
    ),
)

ROW_IDS: tuple[str, ...] = tuple(r.id for r in ROWS)
BY_ID: dict[str, PinRow] = {r.id: r for r in ROWS}
