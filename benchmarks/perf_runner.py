"""Issue 15, the runner's per-call path: the runner against a bare client `post()` of the same body.

    python benchmarks/perf_runner.py            # a table
    python benchmarks/perf_runner.py --json     # one JSON list of rows (TEAM.md's perf protocol)

A reference endpoint (the oracle policy) is started by this script in its own process on a free
loopback port, so the client and the server each have a core. Its request handler is wrapped to
log, for every chat completion, when the server took the request, when it had the answer ready,
the request's `user` tag (one episode) and a checksum of the request body. Two loops make the same
calls for the same episodes of the published design (cut to --tasks tasks per arm, one attempt):

  bare    the official client's `post()` of the runner's request bytes (orjson, the same fields and
          headers), the engine's answers appended, nothing else; bundles generated before the clock
  runner  poisson_tasks.runner.run_plan, the whole runner (generation, verify, records, writes)

The server takes a made-up API key, which both loops send, so the runner redacts its records as in
any keyed run.

From the server's log, per loop: wall time per call = (last answer - first request) / calls (at
concurrency 1 the time each call takes end to end, at 32 the inverse of the call rate; preflight
and closing are outside it); the median time between episodes at concurrency 1; and the
gap, the median time between the server sending an answer and receiving the episode's next
request (the client's turnaround). Levels: concurrency 1 and 32; the loops alternate, --repeats
times each, and the median is reported. The request bodies of both loops are compared (the same
multiset of (episode, body checksum)), so the anchor really is the same bytes. Each loop starts
right after a full garbage collection. Reference-policy numbers measure the instrument, never a
model.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections import Counter, defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx2
import openai
import orjson
from common import report  # the one table format, and the driver's JSON rows

from poisson_tasks.domain.engine import apply, initial_state
from poisson_tasks.generator import generate
from poisson_tasks.prereg import Plan, load_preregistration, validate_preregistration
from poisson_tasks.reference import app as reference_app
from poisson_tasks.reference import start_reference_server
from poisson_tasks.runner import run_plan
from poisson_tasks.runner.endpoint import Endpoint

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT / "preregistrations" / "published-reference-oracle.yaml"
LEVELS = (1, 32)
TARGET_MS = 0.5
LOG_PATH = "/bench/log"
# A made-up key for the loopback server, so the runner redacts its records as it does against a
# real provider (every keyed run scrubs each transcript for pieces of the key).
KEY = "sk-perf-runner-0c5e2a91b7d84f36a0e1c9b2d7f45e18"
KEY_ENV = "POISSON_PERF_RUNNER_KEY"
_USER = re.compile(rb'"user":"([^"]*)"')

# --------------------------------------------------------------------------- the server (child)


def serve() -> None:
    """The reference endpoint with a timing log; prints its port, serves until stdin closes."""
    log: list[tuple[bytes, float, float, int]] = []
    lock = threading.Lock()
    handle = reference_app.ReferenceApp.handle

    def timed(
        self: Any, method: str, path: str, headers: Mapping[str, str], body: bytes
    ) -> reference_app.Response:
        if path == LOG_PATH:
            with lock:
                rows = [[user.decode(), t_in, t_out, crc] for user, t_in, t_out, crc in log]
                log.clear()
            return reference_app.Response(200, orjson.dumps(rows))
        t_in = time.perf_counter()
        response = handle(self, method, path, headers, body)
        t_out = time.perf_counter()
        if path.endswith("/chat/completions"):
            found = _USER.search(body)
            with lock:
                log.append((found.group(1) if found else b"", t_in, t_out, zlib.crc32(body)))
        return response

    reference_app.ReferenceApp.handle = timed  # type: ignore[method-assign]
    server = start_reference_server("127.0.0.1", 0, api_key=KEY)
    print(server.base_url, flush=True)
    sys.stdin.read()  # the parent closes stdin (or dies) to stop it
    server.close()


def start_server() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    base_url = proc.stdout.readline().strip()
    if not base_url.startswith("http://127.0.0.1:"):
        proc.kill()
        raise SystemExit("the reference server did not start")
    return proc, base_url


def take_log(base_url: str) -> list[tuple[str, float, float, int]]:
    root = base_url.removesuffix("/v1")
    rows = httpx2.get(root + LOG_PATH, timeout=30).json()
    return [(str(u), float(a), float(b), int(c)) for u, a, b, c in rows]


# --------------------------------------------------------------------------- the loops

# The client's CPU time at its first model call and after its latest one (this process only).
_CPU: dict[str, float] = {}
_endpoint_post = Endpoint._post


def _mark(start: bool) -> None:
    now = time.process_time()
    if start:
        _CPU.setdefault("first", now)
    else:
        _CPU["last"] = now


async def _timed_post(self: Endpoint, payload: bytes, attempt: int, *rest: Any) -> httpx2.Response:
    _mark(True)
    try:
        return await _endpoint_post(self, payload, attempt, *rest)
    finally:
        _mark(False)


Endpoint._post = _timed_post  # type: ignore[method-assign]


def take_cpu() -> float:
    spent = _CPU["last"] - _CPU["first"]
    _CPU.clear()
    return spent


def plan_for(base_url: str, tasks: int, concurrency: int) -> Plan:
    doc = load_preregistration(PUBLISHED).preregistration.model_dump(mode="json")
    doc["model"]["base_url"] = base_url
    doc["model"]["api_key_env"] = KEY_ENV
    doc["design"].update(tasks=tasks, attempts=1)
    doc["design"].pop("seed_list_hash", None)
    doc["execution"]["concurrency"] = concurrency
    return validate_preregistration(doc)


def _client(base_url: str, concurrency: int) -> openai.AsyncOpenAI:
    limits = httpx2.Limits(
        max_connections=max(100, concurrency * 2),
        max_keepalive_connections=max(20, concurrency * 2),
    )
    return openai.AsyncOpenAI(
        api_key=KEY,
        base_url=base_url,
        max_retries=0,
        http_client=openai.DefaultAsyncHttpxClient(limits=limits),
    )


async def bare_loop(plan: Plan) -> None:
    """The floor: the runner's request bytes posted, the engine's answers, nothing else."""
    pr = plan.preregistration
    decoding = pr.decoding
    fixed: dict[str, Any] = {
        **decoding.extra_body,
        "model": pr.model.model,
        "temperature": decoding.temperature,
        "top_p": decoding.top_p,
        "max_completion_tokens": decoding.max_completion_tokens,
    }
    if decoding.reasoning_effort is not None:
        fixed["reasoning_effort"] = decoding.reasoning_effort
    bundles = {(a, s): generate(a, s) for a in plan.arms for s in plan.seeds}  # not timed
    client = _client(pr.model.resolved_base_url or "", pr.execution.concurrency)
    options: Any = {"headers": {"Content-Type": "application/json", "X-Poisson-Attempt": "0.0"}}
    slots = iter(plan.slots())

    async def worker() -> None:
        for arm, seed, attempt in slots:
            bundle = bundles[(arm, seed)]
            user = f"{arm}|{seed}|{attempt}"
            messages = bundle.messages()
            state = initial_state(bundle.engine)
            for _ in range(pr.design.turn_limit):
                body = orjson.dumps(
                    {**fixed, "messages": messages, "tools": bundle.tools, "user": user}
                )
                _mark(True)
                raw = await client.post(
                    "/chat/completions", content=body, cast_to=httpx2.Response, options=options
                )
                _mark(False)
                message = orjson.loads(raw.content)["choices"][0]["message"]
                calls = message.get("tool_calls") or []
                if not calls:
                    messages.append({"role": "assistant", "content": message.get("content")})
                    break
                messages.append(
                    {"role": "assistant", "content": message.get("content"), "tool_calls": calls}
                )
                for call in calls:
                    function = call["function"]
                    arguments = orjson.loads(function["arguments"])
                    state, line = apply(bundle.engine, state, function["name"], arguments)
                    messages.append({"role": "tool", "tool_call_id": call["id"], "content": line})

    await asyncio.gather(*(worker() for _ in range(pr.execution.concurrency)))
    await client.close()


async def runner_loop(plan: Plan) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        summary = await run_plan(plan, Path(tmp) / "run", show_progress=False)
    if not (summary.complete and summary.passed == plan.episodes):
        raise SystemExit(f"the runner did not pass every oracle episode: {summary}")


# --------------------------------------------------------------------------- figures


def figures(
    log: list[tuple[str, float, float, int]], concurrency: int, cpu: float
) -> dict[str, Any]:
    """Wall time per call and the median client turnaround, from the server's log, and the
    client's CPU time per call (seconds)."""
    calls = len(log)
    span = max(t_out for _, _, t_out, _ in log) - min(t_in for _, t_in, _, _ in log)
    by_episode: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for user, t_in, t_out, _ in log:
        by_episode[user].append((t_in, t_out))
    gaps = []
    for times in by_episode.values():
        times.sort()
        gaps += [nxt[0] - prev[1] for prev, nxt in itertools.pairwise(times)]
    firsts = sorted((times[0][0], times[-1][1]) for times in by_episode.values())
    between = [nxt[0] - prev[1] for prev, nxt in itertools.pairwise(firsts)]
    return {
        "calls": calls,
        "between": statistics.median(between) if concurrency == 1 and between else None,
        "per_call": span / calls,
        "cpu": cpu / calls,
        "gap": statistics.median(gaps),
        "bodies": Counter((user, crc) for user, _, _, crc in log),
    }


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def measure(tasks: int, repeats: int) -> list[dict[str, Any]]:
    proc, base_url = start_server()
    rows: list[dict[str, Any]] = []
    os.environ[KEY_ENV] = KEY
    try:
        asyncio.run(runner_loop(plan_for(base_url, 1, 1)))  # warm: imports, tokenizer, caches
        take_log(base_url)
        take_cpu()
        for level in LEVELS:
            plan = plan_for(base_url, tasks, level)
            runs: dict[str, list[dict[str, Any]]] = {"bare": [], "runner": []}
            for repeat in range(repeats):
                order = ("bare", "runner") if repeat % 2 == 0 else ("runner", "bare")
                for loop in order:
                    # Each loop starts with the collector's counts at zero, so a full collection
                    # (a quarter of a second here) does not fall on one loop by chance.
                    gc.collect()
                    asyncio.run(bare_loop(plan) if loop == "bare" else runner_loop(plan))
                    runs[loop].append(figures(take_log(base_url), level, take_cpu()))
            same = all(
                r["bodies"] == runs["bare"][0]["bodies"] for r in runs["bare"] + runs["runner"]
            )
            bare = statistics.median(r["per_call"] for r in runs["bare"])
            runner = statistics.median(r["per_call"] for r in runs["runner"])
            bare_cpu = statistics.median(r["cpu"] for r in runs["bare"])
            runner_cpu = statistics.median(r["cpu"] for r in runs["runner"])
            bare_gap = statistics.median(r["gap"] for r in runs["bare"])
            runner_gap = statistics.median(r["gap"] for r in runs["runner"])
            over = runner - bare
            between = ""
            if level == 1:
                bare_between = statistics.median(r["between"] for r in runs["bare"])
                runner_between = statistics.median(r["between"] for r in runs["runner"])
                between = (
                    f"; between episodes (last answer->next episode's first request): runner "
                    f"{_ms(runner_between)}, bare {_ms(bare_between)}"
                )
            rows.append(
                {
                    "stage": f"runner wall time per model call over a bare post(), concurrency {level}",
                    "now": f"{over * 1000:+.2f} ms ({_ms(runner)} per call)",
                    "anchor": f"bare post() {_ms(bare)} per call",
                    "target": f"<= +{TARGET_MS:g} ms",
                    "ratio": f"{runner / bare:.2f}x",
                    "met": over * 1000 <= TARGET_MS,
                    "note": (
                        f"server-side gap answer->next request: runner {_ms(runner_gap)}, bare "
                        f"{_ms(bare_gap)} ({(runner_gap - bare_gap) * 1000:+.2f} ms){between}; client CPU per call "
                        f"between first and last call: runner {_ms(runner_cpu)}, bare "
                        f"{_ms(bare_cpu)} ({(runner_cpu - bare_cpu) * 1000:+.2f} ms); "
                        f"{runs['runner'][0]['calls']} calls, {plan.episodes} oracle episodes, "
                        f"median of {repeats}; same request bodies: {'yes' if same else 'NO'}"
                    ),
                }
            )
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--json", action="store_true", help="print one JSON list of rows")
    parser.add_argument("--tasks", type=int, default=8, help="tasks per arm (14 arms)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each loop per level")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve()
        return
    rows = measure(args.tasks, max(1, args.repeats))
    report(rows, args.json)


if __name__ == "__main__":
    main()
