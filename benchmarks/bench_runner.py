"""The runner against a bare loop of the official openai client, on the reference endpoint.

Prints, for concurrency 1, 16, 64 and 256: episodes per second, the harness's own time per model
call (time outside the HTTP call) at p50 and p90, and the ratio to the floor, for three loops making
the same calls for the same episodes:

  runner       poisson_tasks.runner.run_plan: the whole runner (verify, replay, run folder, fsync)
  bare-create  client.chat.completions.create(...) and the engine's answers, no more (the floor)
  bare-post    the runner's transport alone: client.post of orjson bytes, the engine's answers

Then the published design (4,200 oracle episodes) end to end, and the runner's peak RSS at 1x and 4x
episodes (each in its own process). The reference endpoint is served by its own process, so on a
2-core machine the runner and the server each have a core. Reference-policy numbers measure the
instrument, never a model.

    .venv/bin/python benchmarks/bench_runner.py            # a few minutes on 2 cores
    .venv/bin/python benchmarks/bench_runner.py --quick    # smaller, for a smoke check
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx2
import numpy as np
import openai
import orjson
from common import markdown_table

from poisson_tasks.bundle import TaskBundle
from poisson_tasks.domain.engine import apply, initial_state
from poisson_tasks.generator import generate
from poisson_tasks.prereg import Plan, load_preregistration, validate_preregistration
from poisson_tasks.runfolder import iter_episodes
from poisson_tasks.runner import run_plan

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT / "preregistrations" / "published-reference-oracle.yaml"
LEVELS = (1, 16, 64, 256)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server() -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "poisson_tasks.cli", "serve-reference", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            if httpx2.get(f"{url}/health", timeout=1).status_code == 200:
                return proc, f"{url}/v1"
        except httpx2.HTTPError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("the reference server did not start")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def plan_for(base_url: str, tasks: int, attempts: int, concurrency: int) -> Plan:
    """The published design's arms against the oracle, at a given size and concurrency."""
    doc = load_preregistration(PUBLISHED).preregistration.model_dump(mode="json")
    doc["model"]["base_url"] = base_url
    doc["design"].update(tasks=tasks, attempts=attempts)
    doc["design"].pop("seed_list_hash", None)
    doc["execution"]["concurrency"] = concurrency
    return validate_preregistration(doc)


# --------------------------------------------------------------------------- the runner


async def runner_level(plan: Plan) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        t0 = time.perf_counter()
        summary = await run_plan(plan, out, show_progress=False)
        wall = time.perf_counter() - t0
        per_call: list[float] = []
        for ln in iter_episodes(out):
            t = ln.timing
            assert t.episode_s is not None and t.model_s is not None
            per_call.append((t.episode_s - t.model_s) / ln.model_calls)
    assert summary.complete and summary.passed == plan.episodes, summary
    return {"episodes": plan.episodes, "wall": wall, "per_call": per_call}


# --------------------------------------------------------------------------- the floors


def _client(base_url: str, concurrency: int) -> openai.AsyncOpenAI:
    limits = httpx2.Limits(
        max_connections=max(100, concurrency * 2),
        max_keepalive_connections=max(20, concurrency * 2),
    )
    return openai.AsyncOpenAI(
        api_key="bench",
        base_url=base_url,
        max_retries=0,
        http_client=openai.DefaultAsyncHttpxClient(limits=limits),
    )


async def _bare_episode(
    client: openai.AsyncOpenAI,
    mode: str,
    plan: Plan,
    bundle: TaskBundle,
    user: str,
    out: list[float],
) -> None:
    d = plan.preregistration.decoding
    model = plan.preregistration.model.model
    messages = bundle.messages()
    state = initial_state(bundle.engine)
    inside = 0.0
    calls = 0
    start = time.perf_counter()
    for _ in range(plan.preregistration.design.turn_limit):
        if mode == "create":
            t0 = time.perf_counter()
            resp = await client.chat.completions.create(
                model=model,
                messages=messages,
                tools=bundle.tools,  # type: ignore[arg-type]
                temperature=d.temperature,
                top_p=d.top_p,
                user=user,
                max_completion_tokens=d.max_completion_tokens,
                reasoning_effort=d.reasoning_effort,
            )
            inside += time.perf_counter() - t0
            msg = resp.choices[0].message
            content = msg.content
            calls_raw = [tc.model_dump() for tc in (msg.tool_calls or [])]
        else:
            body = orjson.dumps(
                {
                    "model": model,
                    "messages": messages,
                    "tools": bundle.tools,
                    "temperature": d.temperature,
                    "top_p": d.top_p,
                    "user": user,
                    "max_completion_tokens": d.max_completion_tokens,
                    "reasoning_effort": d.reasoning_effort,
                }
            )
            t0 = time.perf_counter()
            raw = await client.post(
                "/chat/completions",
                content=body,
                cast_to=httpx2.Response,
                options={"headers": {"Content-Type": "application/json"}},
            )
            inside += time.perf_counter() - t0
            msg_d = orjson.loads(raw.content)["choices"][0]["message"]
            content = msg_d.get("content")
            calls_raw = msg_d.get("tool_calls") or []
        calls += 1
        if not calls_raw:
            messages.append({"role": "assistant", "content": content})
            break
        messages.append({"role": "assistant", "content": content, "tool_calls": calls_raw})
        for tc in calls_raw:
            fn = tc["function"]
            state, line = apply(bundle.engine, state, fn["name"], json.loads(fn["arguments"]))
            messages.append({"role": "tool", "tool_call_id": tc["id"], "content": line})
    out.append((time.perf_counter() - start - inside) / calls)


async def bare_level(plan: Plan, mode: str) -> dict[str, Any]:
    concurrency = plan.preregistration.execution.concurrency
    bundles = {(a, s): generate(a, s) for a in plan.arms for s in plan.seeds}  # not timed
    client = _client(plan.preregistration.model.resolved_base_url or "", concurrency)
    per_call: list[float] = []
    slots = iter(plan.slots())

    async def worker() -> None:
        for a, s, k in slots:
            await _bare_episode(client, mode, plan, bundles[(a, s)], f"{a}|{s}|{k}", per_call)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall = time.perf_counter() - t0
    await client.close()
    return {"episodes": plan.episodes, "wall": wall, "per_call": per_call}


# --------------------------------------------------------------------------- the child (RSS)


def child(base_url: str, tasks: int, concurrency: int) -> None:
    """Run the published design at `tasks` tasks per arm; print wall time and peak RSS."""
    plan = plan_for(base_url, tasks, 5, concurrency)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        summary = asyncio.run(run_plan(plan, Path(tmp) / "run", show_progress=False))
        wall = time.perf_counter() - t0
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        json.dumps(
            {
                "episodes": plan.episodes,
                "wall": wall,
                "rss_mib": rss_mib,
                "passed": summary.passed,
                "complete": summary.complete,
            }
        )
    )


def run_child(base_url: str, tasks: int, concurrency: int) -> dict[str, Any]:
    res = subprocess.run(
        [sys.executable, __file__, "--child", base_url, str(tasks), str(concurrency)],
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(res.stdout.strip().splitlines()[-1]))


# --------------------------------------------------------------------------- main


def _ms(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer episodes (a smoke check)")
    ap.add_argument(
        "--child", nargs=3, metavar=("BASE_URL", "TASKS", "CONCURRENCY"), help=argparse.SUPPRESS
    )
    args = ap.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), int(args.child[2]))
        return
    proc, base_url = start_server()
    try:
        tasks = 10 if args.quick else 20  # x 14 arms x 1 attempt
        print(f"reference endpoint {base_url} (own process); cpu count {os.cpu_count()}")
        print(
            f"sweep: the published design's 14 arms x {tasks} tasks x 1 attempt = "
            f"{14 * tasks} oracle episodes per loop and level\n"
        )
        table: list[tuple[object, ...]] = []
        asyncio.run(run_bare_warmup(base_url))
        for level in LEVELS:
            plan = plan_for(base_url, tasks, 1, level)
            rows = {
                "bare-create": asyncio.run(bare_level(plan, "create")),
                "bare-post": asyncio.run(bare_level(plan, "post")),
                "runner": asyncio.run(runner_level(plan)),
            }
            floor = rows["bare-create"]
            f_eps = floor["episodes"] / floor["wall"]
            f_p50 = _ms(floor["per_call"], 50)
            for name, r in rows.items():
                eps = r["episodes"] / r["wall"]
                p50, p90 = _ms(r["per_call"], 50), _ms(r["per_call"], 90)
                table.append(
                    (
                        level,
                        name,
                        f"{eps:.1f}",
                        f"{eps / f_eps:.2f}",
                        f"{p50:.3f}",
                        f"{p90:.3f}",
                        f"{p50 - f_p50:+.3f}",
                    )
                )
        columns = ("concurrency", "loop", "episodes/s", "× floor", "own ms/call p50", "p90")
        print(markdown_table((*columns, "vs floor p50"), table))
        print()
        s0 = cpu_seconds(proc.pid)
        full = run_child(base_url, 60 if not args.quick else 8, 64)
        server_cpu = cpu_seconds(proc.pid) - s0
        print(
            f"published design, oracle, concurrency 64: {full['episodes']} episodes in "
            f"{full['wall']:.1f} s ({full['episodes'] / full['wall']:.1f} ep/s; all passed: "
            f"{full['passed'] == full['episodes']}); the server used {server_cpu:.1f} CPU s"
        )
        quarter = run_child(base_url, 15 if not args.quick else 2, 64)
        print(
            f"peak RSS of the runner: {quarter['rss_mib']:.0f} MiB at {quarter['episodes']} "
            f"episodes (1x), {full['rss_mib']:.0f} MiB at {full['episodes']} episodes (4x)"
        )
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def run_bare_warmup(base_url: str) -> None:
    """One request first, so no loop pays the server's first-request start-up."""
    client = _client(base_url, 1)
    await client.post(
        "/chat/completions",
        cast_to=httpx2.Response,
        body={"model": "oracle", "messages": [{"role": "user", "content": "hi"}]},
    )
    await client.close()


if __name__ == "__main__":
    main()
