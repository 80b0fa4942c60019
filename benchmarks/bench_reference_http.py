"""The reference endpoint's cost per call before and after its HTTP parsing moved to httptools (issue 33).

Both servers run side by side in one run, each in its own process (so client and server each have
a core): the hand-written HTTP/1.1 parser as it stood at --before (read from git, default the
commit issue 33 was found on) and this checkout's server, which reads requests with httptools
(llhttp). Many short rounds alternate the two (A B, then B A), so a busy machine's slow moments
fall on both alike; each figure is the median over rounds, and the fastest round beside it. Three loops make the same request, the first turn
of an oracle depth:d3 task (a reference baseline, not a model):

- raw socket: one keep-alive connection, one request at a time, no client library: the server's
  cost plus loopback;
- post, concurrency 1 and 16: the runner's transport (the official client's post() of
  pre-encoded bytes, as runner/endpoint.py sends), the per-call figure benchmarks/RESULTS.md's
  "bare post()" rows stand on.

Server CPU per request is the server process's user + system time (/proc) over every round. A
last row feeds each server's connection code the same request in this process, with no socket and
an app that answers at once: the CPU the parsing and the answer's framing cost, without the noise
of a shared machine.

    python benchmarks/bench_reference_http.py [--before 23d48c7 --requests 200 --rounds 20]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import statistics
import subprocess
import time
import types
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

import httpx2
import openai
import orjson
from bench_reference import run_raw  # the raw keep-alive socket loop
from common import ROOT, command_line, markdown_table  # the one table format

from poisson_tasks.bundle import TaskBundle
from poisson_tasks.generator import generate
from poisson_tasks.reference import server as current_server
from poisson_tasks.reference.app import ReferenceApp, Response

SERVER_PATH = "src/poisson_tasks/reference/server.py"
TICK = os.sysconf("SC_CLK_TCK")


def _module(source: str | None) -> types.ModuleType:
    """The server module `source` holds (this checkout's when None)."""
    if source is None:
        return current_server
    module = types.ModuleType("poisson_tasks.reference.server_before")
    exec(compile(source, f"<{SERVER_PATH} before>", "exec"), module.__dict__)
    return module


class _Transport(asyncio.Transport):
    """A transport that takes what is written and drops it."""

    def write(self, data: Any) -> None:
        pass

    def close(self) -> None:
        pass


class _AnswerAtOnce:
    def handle(self, *request: object) -> Response:
        return Response(200, b'{"ok": true}')


def parse_cpu_us(source: str | None, body: bytes, n: int) -> float:
    """CPU microseconds per request for the server's connection code to read `body`'s request
    and frame an answer, in this process."""
    head = f"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: {len(body)}\r\n\r\n"
    request = head.encode() + body
    connection = _module(source)._Connection(_AnswerAtOnce(), set())
    connection.connection_made(_Transport())
    t = time.process_time()
    for _ in range(n):
        connection.data_received(request)
    return 1e6 * (time.process_time() - t) / n


def _serve(source: str | None, conn: Connection) -> None:
    """The child: the server `source` holds (this checkout's when None) on a free loopback port,
    in a thread of this process, until the parent says stop."""
    handle = _module(source)._in_thread(ReferenceApp(), "127.0.0.1", 0)
    conn.send(handle.port)
    conn.recv()
    handle.close()


class Server:
    """One implementation running in its own process."""

    def __init__(self, name: str, source: str | None) -> None:
        self.name = name
        ours, theirs = multiprocessing.get_context("fork").Pipe()
        self.process = multiprocessing.get_context("fork").Process(
            target=_serve, args=(source, theirs), daemon=True
        )
        self.process.start()
        self.conn = ours
        self.port: int = ours.recv()

    def cpu(self) -> float:
        """The server process's CPU seconds so far (user + system)."""
        with open(f"/proc/{self.process.pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK

    def stop(self) -> None:
        self.conn.send("stop")
        self.process.join(10)


def request_body(bundle: TaskBundle) -> bytes:
    """The oracle's first request of `bundle`, as bench_reference.run_raw sends it."""
    return orjson.dumps({"model": "oracle", "messages": bundle.messages(), "tools": bundle.tools})


def post_loop(port: int, body: bytes, n: int, concurrency: int) -> float:
    """Seconds for `n` posts of pre-encoded bytes through the official client, `concurrency` at
    a time (runner/endpoint.py's transport)."""

    async def main() -> float:
        base = f"http://127.0.0.1:{port}/v1"
        async with openai.AsyncOpenAI(base_url=base, api_key="unused", max_retries=0) as client:
            options: Any = {"headers": {"Content-Type": "application/json"}}

            async def one() -> None:
                resp = await client.post(
                    "/chat/completions", content=body, cast_to=httpx2.Response, options=options
                )
                await resp.aread()

            await one()  # the connection made before the clock starts
            left = [n]

            async def worker() -> None:
                while left[0] > 0:
                    left[0] -= 1
                    await one()

            t = time.perf_counter()
            await asyncio.gather(*[worker() for _ in range(concurrency)])
            return time.perf_counter() - t

    return asyncio.run(main())


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--before", default="23d48c7", help="the commit of the hand-written parser")
    ap.add_argument("--requests", type=int, default=200, help="raw requests per round")
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    source = subprocess.run(
        ["git", "show", f"{args.before}:{SERVER_PATH}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "httptools" not in source, f"{args.before}'s server already reads HTTP with httptools"
    bundle = generate("depth:d3", 0)
    body = request_body(bundle)
    servers = [
        Server(f"hand-written ({args.before})", source),
        Server("httptools (this checkout)", None),
    ]
    n = args.requests
    loops: list[tuple[str, Callable[[int], float], int]] = [
        ("raw socket, one at a time", lambda port: run_raw("127.0.0.1", port, bundle, n)[1], n),
        ("post(), concurrency 1", lambda port: post_loop(port, body, n // 2, 1), n // 2),
        ("post(), concurrency 16", lambda port: post_loop(port, body, n // 2, 16), n // 2),
    ]
    wall: dict[tuple[str, str], list[float]] = {}
    cpu: dict[tuple[str, str], list[float]] = {}
    try:
        for round_ in range(args.rounds):
            order = servers if round_ % 2 == 0 else servers[::-1]
            for label, loop, count in loops:
                for server in order:
                    before = server.cpu()
                    seconds = loop(server.port)
                    key = (label, server.name)
                    wall.setdefault(key, []).append(1000 * seconds / count)
                    cpu.setdefault(key, []).append(server.cpu() - before)
    finally:
        for server in servers:
            server.stop()
    rows = []
    old, new = (s.name for s in servers)
    for label, _, count in loops:
        a, b = statistics.median(wall[label, old]), statistics.median(wall[label, new])
        total = count * args.rounds
        ca, cb = 1e6 * sum(cpu[label, old]) / total, 1e6 * sum(cpu[label, new]) / total
        rows.append(
            (
                label,
                f"{count} x {args.rounds}",
                f"{a:.3f} (fastest {min(wall[label, old]):.3f})",
                f"{b:.3f} (fastest {min(wall[label, new]):.3f})",
                f"{b - a:+.3f}",
                f"{b / a:.2f}x",
                f"{ca:.0f}",
                f"{cb:.0f}",
            )
        )
    parsed = {name: [] for name in (old, new)}
    for round_ in range(args.rounds):
        for name, src in ((old, source), (new, None))[:: 1 if round_ % 2 == 0 else -1]:
            parsed[name].append(parse_cpu_us(src, body, 2000))
    a, b = statistics.median(parsed[old]), statistics.median(parsed[new])
    rows.append(
        (
            "in process: read the request, frame the answer (CPU us)",
            f"2000 x {args.rounds}",
            f"{a:.1f} us",
            f"{b:.1f} us",
            f"{b - a:+.1f} us",
            f"{b / a:.2f}x",
            "",
            "",
        )
    )
    load = os.getloadavg()[0]
    print(
        f"reference endpoint per call, hand-written parser against httptools, side by side; median of "
        f"{args.rounds} alternating rounds; cpus {os.cpu_count()}, load {load:.1f}"
    )
    print(
        markdown_table(
            (
                "loop",
                "calls x rounds",
                "before ms/call",
                "after ms/call",
                "after - before",
                "ratio",
                "server CPU us/call before",
                "after",
            ),
            rows,
        )
    )
    print(command_line())


if __name__ == "__main__":
    main()
