"""measure_pins(bundle): every pin-ledger row's value read off one bundle, whatever its knob.

A row that binds another knob is still measured (N27's block size is a number on any bundle);
the two rows no bundle can carry (N10, N13) go into `unmeasured` with the reason. Every row is
in exactly one of the two.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from pydantic import BaseModel, ConfigDict

from poisson_tasks.arms import ArmSpec
from poisson_tasks.bundle import TaskBundle, canonical_json, digest
from poisson_tasks.domain.engine import apply, initial_state
from poisson_tasks.domain.ledger import EngineConfig, ToolBinding
from poisson_tasks.domain.vocabulary import EXTRA_FIELDS
from poisson_tasks.generator import generate
from poisson_tasks.pins import views
from poisson_tasks.pins.table import ROWS
from poisson_tasks.transcript import history_tokens

_PART = re.compile(r"^part_(\d+)_of_(\d+)$")


class PinMeasurement(BaseModel):
    """One bundle's pin-ledger values: `measured` by row id, `unmeasured` row id -> reason."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    arm_id: str
    seed: int
    split: str
    task_id: str
    measured: dict[str, Any]
    unmeasured: dict[str, str]

    def value(self, row: str) -> Any:
        return self.measured[row]


@dataclass(frozen=True)
class _Bundle:
    """A bundle and the facts several rows share, each computed once."""

    b: TaskBundle

    @cached_property
    def instruction(self) -> str:
        return views.instruction(self.b)

    @cached_property
    def tool_texts(self) -> list[str]:
        return views.tool_texts(self.b)

    @cached_property
    def block_tokens(self) -> int:
        return views.block_tokens(self.b, self.tool_texts)

    @cached_property
    def request_tokens(self) -> int:
        return views.tokens(self.instruction)

    @cached_property
    def seeded_tokens(self) -> int:
        return views.seeded_tokens(self.b)

    @cached_property
    def right(self) -> list[str]:
        return views.right_tools(self.b)

    @cached_property
    def names(self) -> list[str]:
        return self.b.tool_names

    @cached_property
    def system_base(self) -> str:
        """The system prompt less the filler at its end, when it carries the declared one."""
        sp, fill = self.b.system_prompt, self.b.system_filler
        if fill and sp.endswith(" " + fill):
            return sp[: -len(fill) - 1]
        return sp

    @cached_property
    def filler_tokens(self) -> int:
        """Tokens of the system filler counted alone (0 when there is none)."""
        return views.tokens(self.b.system_filler) if self.b.system_filler else 0

    @cached_property
    def bindings(self) -> dict[str, ToolBinding]:
        return views.bindings(self.b)

    def binding(self, name: str) -> ToolBinding | None:
        return self.bindings.get(name)

    @cached_property
    def schemas(self) -> dict[str, dict[str, Any]]:
        return {t["function"]["name"]: t for t in self.b.tools}

    def schema(self, name: str) -> dict[str, Any]:
        return self.schemas[name]


def _n1(x: _Bundle) -> dict[str, Any]:
    b = x.b
    return {
        "split": b.split,
        "seed": b.seed,
        "key": b.engine.key,
        "class": views.goal_class(b),
        "record_id": b.goal[0].record_id if b.goal else "",
        "entry_code": views.entry_code(b),
    }


def _n2(x: _Bundle) -> dict[str, Any]:
    required = [[n, x.names.index(n)] for n in views.required_tools(x.b) if n in x.names]
    return {"slots": required, "block": list(x.names)}


def _n3(x: _Bundle) -> dict[str, Any]:
    fill = x.b.system_filler
    return {
        "base": digest(x.system_base),
        "filler": bool(fill),
        "filler_at_end": not fill or x.system_base != x.b.system_prompt,
        "filler_tokens": x.filler_tokens,
    }


def _n4(x: _Bundle) -> dict[str, Any]:
    """Digests of the block's canonical JSON and of [names, non-stage schemas], from tool_texts.

    The same digests as bundle.digest() of those lists: canonical JSON of a list is its items'
    canonical JSON joined by commas inside brackets.
    """
    reads = [
        t
        for n, t in zip(x.names, x.tool_texts, strict=True)
        if (bd := x.binding(n)) is None or bd.kind != "stage"
    ]
    names = canonical_json(x.names).decode()
    return {
        "block": _sha("[" + ",".join(x.tool_texts) + "]"),
        "names_and_reads": _sha(f"[{names},[{','.join(reads)}]]"),
    }


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _n6(x: _Bundle) -> dict[str, Any]:
    parts = x.b.prompt_parts
    try:
        renders = parts.template.format(**parts.slots) == x.instruction
    except (KeyError, IndexError, ValueError):
        renders = False
    return {
        "template": digest(parts.template),
        "knob_slots": sorted(parts.knob_slots),
        "slot_tokens": {
            k: views.tokens(v) for k, v in sorted(parts.slots.items()) if k not in parts.knob_slots
        },
        "renders": renders,
    }


def _n7(x: _Bundle) -> dict[str, Any]:
    names = "\n".join(x.names).lower()  # a word never holds "\n", so no match spans two names
    hits = [w for w in views.words(x.instruction) if w in names]
    return {"words": sorted(hits), "count": len(hits)}


def _n8(x: _Bundle) -> dict[str, Any]:
    lines = list(x.b.reference_observations)
    lines += [m.get("content") or "" for m in views.seeded_history(x.b) if m.get("role") == "tool"]
    return {"sizes": sorted({len(str(line).encode()) for line in lines}), "lines": len(lines)}


def _n9(x: _Bundle) -> dict[str, Any]:
    return {
        "seeded_tokens": x.seeded_tokens,
        "transcript_tokens": history_tokens(views.transcript(x.b)),
    }


def _n12(x: _Bundle) -> dict[str, Any]:
    b = x.b
    return {
        "engine_hash": b.engine_hash,
        "vocabulary_hash": b.vocabulary_hash,
        "generator_hash": b.generator_hash,
    }


def _lookalike_ledgers(x: _Bundle) -> tuple[int, list[str]]:
    """(lookalike stage tools, their distinct ledgers in block order): same class, other ledger."""
    goal, cls = views.goal_ledger(x.b), views.goal_class(x.b)
    tools, ledgers = 0, []
    for n in x.names:
        bd = x.binding(n)
        if bd is None or bd.kind != "stage" or bd.ledger == goal:
            continue
        if bd.ledger.split("-")[0] == cls:
            tools += 1
            if bd.ledger not in ledgers:
                ledgers.append(bd.ledger)
    return tools, ledgers


def _number(ledger: str) -> str:
    return ledger.split("-", 1)[1] if "-" in ledger else ""


def _n21(x: _Bundle) -> dict[str, Any]:
    target = _number(views.goal_ledger(x.b))
    _, ledgers = _lookalike_ledgers(x)
    looks = [_number(led) for led in ledgers]
    return {
        "target": target,
        "lookalikes": [[n, sum(a == b for a, b in zip(n, target, strict=False))] for n in looks],
    }


def _n22(x: _Bundle) -> dict[str, Any]:
    return {"names": x.right[:2], "schemas": digest([x.schema(n) for n in x.right[:2]])}


def _n24(x: _Bundle) -> dict[str, Any]:
    calls = views.seeded_calls(x.b)
    offenders: list[str] = []
    if not calls:
        return {"seeded_calls": 0, "offenders": offenders}
    e = x.b.engine  # rebuilt, so the engine's lookup reads these bindings (see views.bindings)
    config = EngineConfig(
        key=e.key, rows=e.rows, bindings=e.bindings, faults=e.faults, start_seq=e.start_seq
    )
    start = initial_state(config)
    for _cid, name, args, answer in calls:
        bd = x.binding(name)
        if bd is None or bd.kind != "read":
            offenders.append(f"{name}: not a read tool of the block")
            continue
        if answer is None or views.status(answer) != "ok":
            offenders.append(f"{name}: answered {answer and views.status(answer)!r}, not ok")
            continue
        seq = int(answer[:6]) if answer[:6].isdigit() else 1
        _, line = apply(config, start._replace(seq=seq - 1), name, args)
        if line != answer:
            offenders.append(f"{name}: the answer is not the engine's ({answer!r})")
    return {"seeded_calls": len(calls), "offenders": offenders}


def _n25(x: _Bundle) -> dict[str, Any]:
    return {
        "faults": [[f.tool, f.count] for f in x.b.engine.faults],
        "right_tools": x.right[:2],
    }


def _n26(x: _Bundle) -> dict[str, Any]:
    return {
        "seeded_tokens": x.seeded_tokens,
        "failed_call_tokens": history_tokens(views.failed_transcript(x.b)),
    }


def _n28(x: _Bundle) -> dict[str, Any]:
    return {"right_slots": [x.names.index(n) for n in x.right if n in x.names]}


def _n30(x: _Bundle) -> dict[str, Any]:
    """Stage schemas with EXTRA_FIELDS taken out of properties and required."""
    out = []
    for n in x.names:
        bd = x.binding(n)
        if bd is None or bd.kind != "stage":
            continue
        fn = dict(x.schema(n)["function"])
        params = dict(fn["parameters"])
        params["properties"] = {
            k: v for k, v in params["properties"].items() if k not in EXTRA_FIELDS
        }
        params["required"] = [k for k in params["required"] if k not in EXTRA_FIELDS]
        fn["parameters"] = params
        out.append(fn)
    return {"stage_schemas": digest(out), "stage_tools": len(out)}


def _n31(x: _Bundle) -> dict[str, Any]:
    fixed = []
    for n in x.right:
        bd = x.binding(n)
        fixed.append([n, [list(fv) for fv in (bd.fixed if bd else ())]])
    values = sorted({(f, v) for _, fv in fixed for f, v in fv})
    text, names = x.instruction, x.names
    fixed_by = {n: fv for n, fv in fixed}
    uncarried = [
        f"{c.name} lacks {f}={v}"
        for c in x.b.reference_calls
        for f, v in fixed_by.get(c.name, [])
        if (c.arguments or {}).get(f) != v
    ]
    return {
        "fixed": fixed,
        "unstated": [f"{f}={v}" for f, v in values if f not in text or v not in text],
        "in_tool_names": [v for _, v in values if any(v.lower() in n.lower() for n in names)],
        "uncarried": uncarried,
    }


def _n33(x: _Bundle) -> dict[str, Any]:
    stage_calls = 0
    for c in x.b.reference_calls:
        bd = x.binding(c.name)
        if bd is not None and bd.kind == "stage":
            stage_calls += 1
    return {"stage_calls": stage_calls, "tools": len(x.names), "block_tokens": x.block_tokens}


def _n35(x: _Bundle) -> dict[str, Any]:
    reads = [
        n
        for n in views.required_tools(x.b)
        if (bd := x.binding(n)) is not None and bd.kind == "read"
    ]
    parts: list[tuple[int, int, str, str]] = []
    for n in reads:
        bd = x.binding(n)
        if bd is None or bd.part is None:
            continue
        m = _PART.match(bd.part_status)
        i, of = (int(m[1]), int(m[2])) if m else (0, 0)
        parts.append((i, of, n, bd.part))
    return {
        "reads": reads,
        "parts": [[n, i, of, p] for i, of, n, p in parts],
        "joined": "".join(p for _, _, _, p in sorted(parts)),
        "entry_code": views.entry_code(x.b),
    }


_MEASURES: dict[str, Callable[[_Bundle], Any]] = {
    "N1": _n1,
    "N2": _n2,
    "N3": _n3,
    "N4": _n4,
    "N5": lambda x: {"block_tokens": x.block_tokens},
    "N6": _n6,
    "N7": _n7,
    "N8": _n8,
    "N9": _n9,
    "N11": lambda x: {"verifier": x.b.verifier},
    "N12": _n12,
    "N19": lambda x: {"lookalike_tools": _lookalike_ledgers(x)[0]},
    "N20": lambda x: {"block_tokens": x.block_tokens},
    "N21": _n21,
    "N22": _n22,
    "N23": lambda x: {"seeded_tokens": x.seeded_tokens},
    "N24": _n24,
    "N25": _n25,
    "N26": _n26,
    "N27": lambda x: {"tools": len(x.names)},
    "N28": _n28,
    "N29": lambda x: {"block_tokens": x.block_tokens, "filler_tokens": x.filler_tokens},
    "N30": _n30,
    "N31": _n31,
    "N32": lambda x: {"request_tokens": x.request_tokens},
    "N33": _n33,
    "N34": lambda x: {"request_tokens": x.request_tokens},
    "N35": _n35,
}


def measure_pins(bundle: TaskBundle) -> PinMeasurement:
    """Every row's value on `bundle`; rows no bundle can carry are listed with the reason."""
    x = _Bundle(bundle)
    measured: dict[str, Any] = {}
    unmeasured: dict[str, str] = {}
    for row in ROWS:
        if row.unmeasured_reason is not None:
            unmeasured[row.id] = row.unmeasured_reason
        else:
            measured[row.id] = _MEASURES[row.id](x)
    return PinMeasurement(
        arm_id=bundle.arm_id,
        seed=bundle.seed,
        split=bundle.split,
        task_id=bundle.task_id,
        measured=measured,
        unmeasured=unmeasured,
    )


def pinned_bundle(arm: ArmSpec | str, seed: int) -> TaskBundle:
    """generate(arm, seed) with `bundle.pins` filled by the pin ledger's measurements.

    What `poisson-tasks generate --json` prints; task_id is the same as the plain bundle's.
    """
    bundle = generate(arm, seed)
    return bundle.model_copy(update={"pins": measure_pins(bundle).measured})
