"""The `verifiers-null` harness: a session's pending slots run by the one-line eval, `vf-eval`.

The runner writes the slots to a JSON file, runs `vf-eval poisson-tasks-verifiers` on them (the
verifiers taskset on the null harness, `poisson_tasks.export.verifiers`) against the run's
endpoint, and turns each line of its traces.jsonl into an episode line in the run folder, in the
same format as the native loop's. vf-eval exits 0 even when every rollout failed on the provider, so
a rollout the trace marks as a provider failure is written as `api_error`, never as the model's
failure. The runner imports nothing from verifiers: vf-eval is a child process.

Limits: the token and dollar caps are checked between batches (one batch is `concurrency` x 8
slots), the wall-clock cap ends the child process; an episode the child did not finish is not
written, so a resumed session runs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from poisson_tasks import boundedjson
from poisson_tasks.bundle import TaskBundle
from poisson_tasks.credentials import redact, scrub
from poisson_tasks.errors import EndpointError, MissingExtraError
from poisson_tasks.generator import generate
from poisson_tasks.prereg import Plan, Slot
from poisson_tasks.runfolder import EpisodeLine, Timing, Usage
from poisson_tasks.runner.nulltrace import TRACE_INFO_KEY, read_turns, verdict_info

TASKSET_ID = "poisson-tasks-verifiers"
TRACES = "traces.jsonl"
_KEY_VAR = "POISSON_VF_API_KEY"


def vf_eval_command() -> list[str]:
    """The vf-eval beside this interpreter, else on PATH; MissingExtraError names the fix."""
    here = Path(sys.executable).parent / "vf-eval"
    found = str(here) if here.exists() else shutil.which("vf-eval")
    if found is None:
        raise MissingExtraError(
            "harness verifiers-null needs the verifiers extra: pip install "
            '"poisson-tasks[verifiers]" (or set design.harness: native)'
        )
    return [found]


def eval_args(
    plan: Plan, slots_file: Path, out_dir: Path, base_url: str, concurrency: int
) -> list[str]:
    """The vf-eval arguments for one batch (the one-line eval, with the run's decoding)."""
    pr = plan.preregistration
    decoding = pr.decoding
    args = [
        TASKSET_ID,
        "--env.taskset.slots",
        str(slots_file),
        "--env.taskset.turn-limit",
        str(pr.design.turn_limit),
        "--model",
        pr.model.model,
        "--client.base-url",
        base_url,
        "--client.api-key-var",
        _KEY_VAR,
        "--sampling.temperature",
        repr(decoding.temperature),
        "--sampling.top-p",
        repr(decoding.top_p),
        "--sampling.max-tokens",
        str(decoding.max_completion_tokens),
        "--max-concurrent",
        str(concurrency),
        "--output-dir",
        str(out_dir),
        "--run.dir",
        "batch",
        "--no-push",
        "--no-rich",
    ]
    if decoding.reasoning_effort is not None:
        args += ["--sampling.reasoning-effort", decoding.reasoning_effort]
    return args


def _usage(calls: Sequence[Mapping[str, Any]]) -> Usage:
    us = [c.get("usage") for c in calls]
    if not us or any(not isinstance(u, dict) for u in us):
        return Usage()
    ud = [u for u in us if isinstance(u, dict)]

    def total(key: str) -> int | None:
        values = [count for u in ud if isinstance(count := u.get(key), int)]
        return sum(values) if len(values) == len(ud) else None

    costs = [float(cost) for u in ud if isinstance(cost := u.get("cost"), (int, float))]
    return Usage(
        uncached_input_tokens=total("prompt_tokens"),
        cached_input_tokens=total("cached_input_tokens"),
        completion_tokens=total("completion_tokens"),
        reasoning_tokens=total("reasoning_tokens"),
        provider_cost_usd=float(sum(costs)) if costs else None,
    )


def _span(timing: Mapping[str, Any], key: str) -> float | None:
    span = timing.get(key)
    if not isinstance(span, dict):
        return None
    start, end = span.get("start"), span.get("end")
    if isinstance(start, (int, float)) and isinstance(end, (int, float)) and end >= start > 0:
        return float(end - start)
    return None


def _timing(trace: Mapping[str, Any]) -> Timing:
    timing = trace.get("timing") if isinstance(trace.get("timing"), dict) else {}
    assert isinstance(timing, dict)
    agent = timing.get("agent") if isinstance(timing.get("agent"), dict) else {}
    assert isinstance(agent, dict)

    def duration(part: str) -> float | None:
        part_timing = agent.get(part)
        seconds = part_timing.get("duration") if isinstance(part_timing, dict) else None
        return float(seconds) if isinstance(seconds, (int, float)) else None

    return Timing(
        episode_s=_span(timing, "agent"),
        model_s=duration("model"),
        harness_s=duration("harness"),
        setup_s=_span(timing, "setup"),
    )


def episode_line(
    bundle: TaskBundle, slot: Slot, episode: Mapping[str, Any], session: int, resumed: bool
) -> EpisodeLine:
    """One vf-eval episode (a traces.jsonl line) as the run folder's episode line."""
    traces = episode.get("traces") or []
    trace: Mapping[str, Any] = traces[-1] if traces and isinstance(traces[-1], dict) else {}
    wire = {**trace, "errors": [*(trace.get("errors") or []), *(episode.get("errors") or [])]}
    info = trace.get("info") if isinstance(trace.get("info"), dict) else {}
    assert isinstance(info, dict)
    # The export's own reading (trace.info) is recomputed here from the same calls, so a line is
    # the same whether or not finalize ran (it does not after a provider failure).
    verdict = verdict_info(bundle, wire)
    exported = info.get(TRACE_INFO_KEY)
    if isinstance(exported, dict) and exported.get("outcome") != verdict["outcome"]:
        verdict = {
            **verdict,
            "outcome": "verifier_error",
            "strict_label": "verifier_error",
            "passed": False,
            "leaky_pass": False,
            "malformed_clause": None,
            "error": f"the export's verdict ({exported.get('outcome')}) differs from the "
            f"runner's reading ({verdict['outcome']}) of the same trace",
        }
    turns, _, _, _, text_calls = read_turns(wire)
    calls = [c for c in trace.get("calls") or [] if isinstance(c, dict)]
    return EpisodeLine(
        arm_id=slot.arm_id,
        seed=slot.seed,
        attempt=slot.attempt,
        task_id=bundle.task_id,
        session=session,
        resumed=resumed,
        outcome=verdict["outcome"],
        strict_label=verdict["strict_label"],
        leaky_pass=verdict["leaky_pass"],
        passed=verdict["passed"],
        malformed_clause=verdict["malformed_clause"],
        min_calls=bundle.min_calls,
        tool_calls=verdict["tool_calls"],
        model_calls=verdict["model_calls"],
        goal_stages=verdict["goal_stages"],
        usage=_usage(calls),
        timing=_timing(trace),
        system_fingerprints=["" for _ in calls],
        finish_reasons=[str(c.get("finish_reason") or "") for c in calls],
        unparsed_text_calls=len(text_calls),
        error=verdict["error"],
        transcript={
            "harness": "verifiers-null",
            "trace_id": trace.get("id"),
            "stop_condition": trace.get("stop_condition"),
            "nodes": trace.get("nodes") or [],
            "tool_calls": [[c.model_dump() for c in t] for t in turns],
            "errors": wire["errors"],
        },
    )


def read_traces(path: Path) -> Iterator[dict[str, Any]]:
    """Every complete, readable line of a traces.jsonl. A torn last line, a line that is not JSON
    or one nested past boundedjson's bound (a model's output is in it) is skipped: its slot stays
    unrecorded, as a rollout that never finished is."""
    if not path.exists():
        return
    with path.open("rb") as fh:
        for raw in fh:
            if not (raw.endswith(b"\n") and raw.strip()):
                continue
            try:
                value = boundedjson.loads(raw)
            except ValueError:
                continue
            if isinstance(value, dict):
                yield value


def slot_of(episode: Mapping[str, Any]) -> Slot | None:
    task = episode.get("task")
    data = task.get("data") if isinstance(task, dict) else None
    if not isinstance(data, dict):
        return None
    try:
        return Slot(str(data["arm_id"]), int(data["seed"]), int(data.get("attempt", 0)))
    except (KeyError, TypeError, ValueError):
        return None


async def run_batch(
    plan: Plan,
    slots: Sequence[Slot],
    base_url: str,
    api_key: str | None,
    session: int,
    resumed: bool,
    timeout_s: float,
    work: Path | None = None,
) -> tuple[list[EpisodeLine], str]:
    """Run `slots` through one vf-eval; returns the episode lines it finished and its log tail."""
    command = vf_eval_command()
    concurrency = plan.preregistration.execution.concurrency
    with contextlib.ExitStack() as stack:
        root = work or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="pt-vf-")))
        root.mkdir(parents=True, exist_ok=True)
        slots_file = root / "slots.json"
        slots_file.write_text(json.dumps([list(s) for s in slots]), encoding="utf-8")
        out = root / "out"
        args = eval_args(plan, slots_file, out, base_url, concurrency)
        env = {**os.environ, _KEY_VAR: api_key or "no-key", "PYTHONUNBUFFERED": "1"}
        log = root / "vf-eval.log"
        with log.open("wb") as fh:
            proc = await asyncio.create_subprocess_exec(
                *command, *args, stdout=fh, stderr=asyncio.subprocess.STDOUT, env=env, cwd=root
            )
            try:
                await asyncio.wait_for(proc.wait(), timeout=max(1.0, timeout_s))
            except (TimeoutError, asyncio.CancelledError):
                proc.terminate()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(proc.wait(), timeout=20)
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()
                raise
        # where the child's server data enters: its log and its traces, redacted of the key
        tail = redact(log.read_text(encoding="utf-8", errors="replace")[-2000:], api_key)
        if proc.returncode != 0:
            raise EndpointError(
                f"vf-eval exited {proc.returncode} on harness verifiers-null: "
                + " ".join(tail.strip().splitlines()[-3:])[:600]
            )
        wanted = set(slots)
        bundles: dict[tuple[str, int], TaskBundle] = {}
        lines = []
        for traced in read_traces(out / "batch" / TRACES):
            episode = scrub(traced, api_key)
            slot = slot_of(episode)
            if slot is None or slot not in wanted:
                continue
            key = (slot.arm_id, slot.seed)
            if key not in bundles:
                bundles[key] = generate(slot.arm_id, slot.seed)
            lines.append(episode_line(bundles[key], slot, episode, session, resumed))
        return lines, tail
