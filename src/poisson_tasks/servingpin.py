"""Pin N10, the serving pin: which serving facts it holds, read off a run, and the one comparison.

A run records what the endpoint said about itself once per session (runfolder.Session.serving,
written by the runner's preflight) and the decoding once (the pre-registration). N10 holds the
model, the weights' revision, the serving engine and its version, the serving flags (with the
context window and quantisation the server reported) and the sampling. `compare_serving` is the
one comparison of two sets of those facts: a resumed session against the first (runner), a replay
against its run (replay), one shard against another (merge), the sessions of a card's run
(calibration). It names every field that differs; nothing else decides whether N10 held.

Two revisions agree when one is a prefix of the other of at least seven hex digits
(`revisions_agree`), the rule the runner's preflight also checks a declared revision by; the
note a revision carries ("declared, not verified", "verified: ...") is not part of it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from poisson_tasks.runfolder import MAX_CONTEXT_WINDOW, RunHeader, ServingRecord

__all__ = [
    "MAX_CONTEXT_WINDOW",
    "N10_FIELDS",
    "RAW_ANSWER_BYTES",
    "UNREADABLE",
    "ServingComparison",
    "ServingDifference",
    "ServingFacts",
    "bounded_answer",
    "compare_serving",
    "context_window",
    "readable_version",
    "revisions_agree",
    "serving_facts",
    "session_facts",
]

# (attribute, the words a message and a card use for it), in the order they are reported
N10_FIELDS: tuple[tuple[str, str], ...] = (
    ("model", "model"),
    ("revision", "weights revision"),
    ("engine", "serving engine"),
    ("engine_version", "engine version"),
    ("flags", "serving flags"),
    ("context_window", "context window"),
    ("quantization", "quantization"),
    ("chat_template", "chat template"),
    ("sampling", "sampling"),
)
NOT_RECORDED = "not recorded"
_MIN_HEX = 7
_WIDTH = 80  # a value in a one-line message (serving flags can run to 2,000 characters)


# What a server says about itself is typed and bounded before it is recorded (runner/provenance.py)
# and again when a card reads it (calibration/provenance.py): a version is a short printable
# string, a context window a positive integer, a raw answer at most RAW_ANSWER_BYTES of JSON.
UNREADABLE = "unreadable"
_VERSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+_\-:/ ()~@,]{0,63}", re.ASCII)
RAW_ANSWER_BYTES = 4096


def readable_version(value: Any) -> str | None:
    """A version as recorded: None when the server gave none, the text when it is a short
    printable string (at most 64 characters: letters, digits, . + _ - : / ( ) ~ @ , and spaces),
    else "unreadable" (an HTML fragment, a list, a megabyte of text)."""
    if value is None or value == "":
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = str(value)
    if isinstance(value, str) and _VERSION.fullmatch(value.strip()):
        return value.strip()
    return UNREADABLE


def context_window(value: Any) -> int | None:
    """A context window as recorded: a positive integer the server sent as one (a string, a
    float or a boolean is not trusted), at most 2^31; else None (not reported)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_CONTEXT_WINDOW:
        return value
    return None


def bounded_answer(value: Any) -> Any:
    """A server's raw answer as recorded: whole when its JSON is at most RAW_ANSWER_BYTES, else
    its size and its first RAW_ANSWER_BYTES characters of JSON text, marked truncated."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    if len(text.encode("utf-8")) <= RAW_ANSWER_BYTES:
        return value
    return {"truncated": True, "bytes": len(text.encode("utf-8")), "head": text[:RAW_ANSWER_BYTES]}


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


@dataclass(frozen=True, slots=True)
class ServingFacts:
    """What pin N10 holds about one serving, each as text (None: the server did not say)."""

    model: str | None
    revision: str | None
    engine: str | None
    engine_version: str | None
    flags: str | None
    context_window: str | None
    quantization: str | None
    chat_template: str | None
    sampling: str | None

    def value(self, name: str) -> str:
        """One field as a message or a card prints it."""
        found = getattr(self, name)
        return NOT_RECORDED if found is None else str(found)


@dataclass(frozen=True, slots=True)
class ServingDifference:
    """One N10 field that differs: its name, its words, and the two values as printed."""

    field: str
    label: str
    first: str
    other: str

    def describe(self, width: int = _WIDTH) -> str:
        """'engine version 0.11.0 -> 0.12.0', each value cut to `width` characters."""
        return f"{self.label} {_clip(self.first, width)} -> {_clip(self.other, width)}"


@dataclass(frozen=True, slots=True)
class ServingComparison:
    """The differences between two servings, in N10_FIELDS order; none when the pin held."""

    differences: tuple[ServingDifference, ...]

    @property
    def held(self) -> bool:
        return not self.differences

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(d.field for d in self.differences)

    def describe(self) -> str:
        """'engine version 0.11.0 -> 0.12.0; serving flags ...' (empty when the pin held)."""
        return "; ".join(d.describe() for d in self.differences)


def _bare_revision(value: str) -> str:
    """A revision without the note the preflight adds, lower-cased, 'sha256:' dropped."""
    head = value.split(" (", 1)[0].strip()
    return head.removeprefix("sha256:").lower()


def revisions_agree(first: str, other: str) -> bool:
    """Whether two revisions name the same weights: equal, or one a prefix of the other of at
    least seven characters (a short commit hash against the full one)."""
    one, two = _bare_revision(first), _bare_revision(other)
    if one == two:
        return True
    return min(len(one), len(two)) >= _MIN_HEX and (one.startswith(two) or two.startswith(one))


def _text(value: Any) -> str | None:
    if value is None or value == "" or value == []:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return " ".join(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _engine_version(serving: ServingRecord) -> str | None:
    """stack_version, else the version the server's own route reported (vLLM and Ollama:
    details.version; the reference endpoint: details.health.version)."""
    if serving.stack_version is not None:
        return readable_version(serving.stack_version)
    details = serving.details
    version = details.get("version")
    if isinstance(version, Mapping):
        version = version.get("version")
    if version is None and isinstance(details.get("health"), Mapping):
        version = details["health"].get("version")
    return readable_version(version)


def serving_facts(serving: ServingRecord, decoding: Mapping[str, Any]) -> ServingFacts:
    """N10's facts from what the runner recorded about a serving and the declared decoding."""
    llamacpp = serving.llamacpp
    template = llamacpp.get("template_sha256") if llamacpp is not None else None
    return ServingFacts(
        model=_text(serving.model),
        revision=_text(serving.weights_revision or serving.revision),
        engine=_text(serving.stack or serving.provider),
        engine_version=_engine_version(serving),
        flags=_text(serving.flags),
        context_window=_text(serving.context_window),
        quantization=_text(serving.quantization),
        chat_template=_text(template),
        sampling=_text(dict(decoding)) if decoding else None,
    )


def _same(name: str, first: str | None, other: str | None) -> bool:
    if name == "revision" and first is not None and other is not None:
        return revisions_agree(first, other)
    return first == other


def compare_serving(first: ServingFacts, other: ServingFacts) -> ServingComparison:
    """Every N10 field on which `other` differs from `first` (a field one side did not record
    differs too: the pin cannot be shown to hold on it)."""
    return ServingComparison(
        tuple(
            ServingDifference(name, label, first.value(name), other.value(name))
            for name, label in N10_FIELDS
            if not _same(name, getattr(first, name), getattr(other, name))
        )
    )


def session_facts(header: RunHeader) -> list[ServingFacts]:
    """Each session's N10 facts, in session order (a session that recorded no serving of its own
    was served as the run's header says: the runner wrote both from one preflight)."""
    decoding = header.preregistration.get("decoding")
    sampling = decoding if isinstance(decoding, Mapping) else {}
    sessions = header.sessions or []
    if not sessions:
        return [serving_facts(header.serving, sampling)]
    return [
        serving_facts(s.serving if s.serving is not None else header.serving, sampling)
        for s in sessions
    ]
