"""Requests per second of the reference oracle over loopback, with the official openai client.

Plays oracle episodes (send the task, apply the tool calls through the engine, send the lines
back) at concurrency 1 (the sync client) and 16 (AsyncOpenAI, 16 episodes in flight), against the
server started in a thread of this process (one interpreter lock for client and server) and in its
own process (start_reference_server(process=True)). A raw keep-alive socket row shows the server's
own cost without any client library. The "bypass" rows hand messages and tools to the client
through `extra_body`, which skips the client's own per-request transform of its typed parameters
(the largest cost on this path). Reference-policy figures measure the instrument, never a model.

    PYTHONPATH=src python benchmarks/bench_reference.py [--episodes 120 --arm depth:d3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import openai
import orjson
from common import command_line, markdown_table  # the one table format

from poisson_tasks.bundle import TaskBundle
from poisson_tasks.domain.engine import apply, initial_state
from poisson_tasks.generator import generate
from poisson_tasks.reference import start_reference_server

Message = dict[str, Any]


def _params(messages: list[Message], b: TaskBundle, bypass: bool) -> dict[str, Any]:
    if bypass:
        return {"messages": [], "extra_body": {"messages": messages, "tools": b.tools}}
    return {"messages": messages, "tools": b.tools}


def _apply_calls(b: TaskBundle, state: Any, messages: list[Message], msg: Any) -> Any:
    calls = msg.tool_calls or []
    messages.append(
        {
            "role": "assistant",
            "content": msg.content,
            "tool_calls": [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.function.name, "arguments": c.function.arguments},
                }
                for c in calls
            ],
        }
    )
    for c in calls:
        state, line = apply(b.engine, state, c.function.name, json.loads(c.function.arguments))
        messages.append({"role": "tool", "tool_call_id": c.id, "content": line})
    return state


def episode_sync(client: openai.OpenAI, b: TaskBundle, bypass: bool = False) -> int:
    messages, state, requests = b.messages(), initial_state(b.engine), 0
    while True:
        r = client.chat.completions.create(model="oracle", **_params(messages, b, bypass))
        requests += 1
        msg = r.choices[0].message
        if not msg.tool_calls:
            return requests
        state = _apply_calls(b, state, messages, msg)


async def episode_async(client: openai.AsyncOpenAI, b: TaskBundle, bypass: bool = False) -> int:
    messages, state, requests = b.messages(), initial_state(b.engine), 0
    while True:
        r = await client.chat.completions.create(model="oracle", **_params(messages, b, bypass))
        requests += 1
        msg = r.choices[0].message
        if not msg.tool_calls:
            return requests
        state = _apply_calls(b, state, messages, msg)


def run_sync(base_url: str, bundles: list[TaskBundle], bypass: bool = False) -> tuple[int, float]:
    client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0)
    episode_sync(client, bundles[0])  # warm the connection and the caches
    t = time.perf_counter()
    n = sum(episode_sync(client, b, bypass) for b in bundles)
    return n, time.perf_counter() - t


def run_async(
    base_url: str, bundles: list[TaskBundle], concurrency: int, bypass: bool = False
) -> tuple[int, float]:
    async def play_all() -> tuple[int, float]:
        async with openai.AsyncOpenAI(base_url=base_url, api_key="unused", max_retries=0) as client:
            await episode_async(client, bundles[0])
            queue = list(bundles)
            total = 0

            async def worker() -> None:
                nonlocal total
                while queue:
                    n = await episode_async(client, queue.pop(), bypass)
                    total += n

            t = time.perf_counter()
            await asyncio.gather(*[worker() for _ in range(concurrency)])
            return total, time.perf_counter() - t

    return asyncio.run(play_all())


def run_raw(host: str, port: int, b: TaskBundle, n: int) -> tuple[int, float]:
    """One keep-alive socket, one request at a time: the server's cost plus loopback, no client."""
    body = orjson.dumps({"model": "oracle", "messages": b.messages(), "tools": b.tools})
    head = f"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: {len(body)}\r\n\r\n"
    req = head.encode() + body
    with socket.create_connection((host, port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        t = time.perf_counter()
        for _ in range(n):
            sock.sendall(req)
            data = b""
            while not data.endswith(b"}"):
                data += sock.recv(1 << 16)
        return n, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--episodes", type=int, default=120)
    ap.add_argument("--arm", default="depth:d3")
    args = ap.parse_args()
    bundles = [generate(args.arm, s) for s in range(args.episodes)]
    rows: list[tuple[str, str, int, float]] = []

    def record(where: str, how: str, fn: Callable[[], tuple[int, float]]) -> None:
        n, dt = fn()
        rows.append((where, how, n, dt))

    def suite(where: str, url: str, host: str, port: int) -> None:
        for bypass in (False, True):
            tag = " bypass" if bypass else ""
            record(where, f"openai sync{tag}, conc 1", partial(run_sync, url, bundles, bypass))
            record(
                where, f"openai async{tag}, conc 16", partial(run_async, url, bundles, 16, bypass)
            )
        record(where, "raw socket, conc 1", partial(run_raw, host, port, bundles[0], 2000))

    with start_reference_server() as s:
        suite("in-thread", s.base_url, s.host, s.port)
    with start_reference_server(process=True) as s:
        suite("own process", s.base_url, s.host, s.port)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"reference oracle over loopback, arm {args.arm}, {args.episodes} episodes "
        f"(a baseline of the instrument, not a model); cpus {os.cpu_count()}, load {load:.1f}"
    )
    print(
        markdown_table(
            ("server", "client", "requests", "seconds", "req/s", "ms/req"),
            (
                (where, how, n, f"{dt:.2f}", f"{n / dt:.0f}", f"{1000 * dt / n:.2f}")
                for where, how, n, dt in rows
            ),
        )
    )
    print(command_line())


if __name__ == "__main__":
    main()
