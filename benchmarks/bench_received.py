"""What reading a server's answer within bounds costs the runner per call (issue 33, item 3).

Side by side in one run, alternating over rounds, CPU time in this process: a completion read by
orjson alone against boundedjson.loads (the depth check), and one post through the official client
over an in-memory transport (no socket, no server) without and with received.limit_body, the
response hook that counts a body's bytes as they arrive. The completion is an oracle-shaped
answer with one tool call; nothing here is a model's.

    python benchmarks/bench_received.py [--rounds 10 --calls 3000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time

import httpx2
import openai
import orjson
from common import command_line, markdown_table  # the one table format

from poisson_tasks import boundedjson
from poisson_tasks.runner.received import limit_body

CALL = {"record_id": "harbor-aster", "entry_code": "4821"}
BODY = json.dumps(
    {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_0",
                            "type": "function",
                            "function": {"name": "advance_invoice", "arguments": json.dumps(CALL)},
                        }
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 1500, "completion_tokens": 40},
    }
).encode()


def reads_us(read: object, n: int) -> float:
    assert callable(read)
    t = time.process_time()
    for _ in range(n):
        read(BODY)
    return 1e6 * (time.process_time() - t) / n


def posts_us(hook: bool, n: int) -> float:
    """CPU microseconds per post of the runner's kind over an in-memory transport."""

    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=BODY, headers={"content-type": "application/json"})

    async def main() -> float:
        hooks = {"response": [limit_body]} if hook else {}
        http = openai.DefaultAsyncHttpxClient(
            transport=httpx2.MockTransport(answer), event_hooks=hooks
        )
        client = openai.AsyncOpenAI(
            api_key="unused", base_url="http://memory/v1", max_retries=0, http_client=http
        )
        for _ in range(100):  # warm
            await (
                await client.post("/chat/completions", content=b"{}", cast_to=httpx2.Response)
            ).aread()
        t = time.process_time()
        for _ in range(n):
            resp = await client.post("/chat/completions", content=b"{}", cast_to=httpx2.Response)
            await resp.aread()
        return 1e6 * (time.process_time() - t) / n

    return asyncio.run(main())


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--calls", type=int, default=3000)
    args = ap.parse_args()
    pairs = {
        "read a completion": (
            lambda: reads_us(orjson.loads, args.calls * 10),
            lambda: reads_us(boundedjson.loads, args.calls * 10),
            "orjson.loads",
            "boundedjson.loads",
        ),
        "one post, in memory": (
            lambda: posts_us(False, args.calls),
            lambda: posts_us(True, args.calls),
            "no hook",
            "received.limit_body",
        ),
    }
    rows = []
    for label, (before, after, a_name, b_name) in pairs.items():
        a_runs: list[float] = []
        b_runs: list[float] = []
        for round_ in range(args.rounds):
            order = [(a_runs, before), (b_runs, after)]
            for runs, measure in order if round_ % 2 == 0 else order[::-1]:
                runs.append(measure())
        a, b = statistics.median(a_runs), statistics.median(b_runs)
        rows.append((label, a_name, f"{a:.1f}", b_name, f"{b:.1f}", f"{b - a:+.1f}"))
    print(
        f"the runner's CPU per call to read an answer within bounds; median of {args.rounds} "
        f"alternating rounds; cpus {os.cpu_count()}, load {os.getloadavg()[0]:.1f}"
    )
    print(markdown_table(("what", "before", "us", "after", "us", "after - before (us)"), rows))
    print(command_line())


if __name__ == "__main__":
    main()
