"""The per-rollout tool server process (`python -m poisson_tasks.export.toolserver`).

The null harness starts one tool server per rollout. verifiers' own server entry point imports the
whole verifiers package (about 8 CPU-seconds and 140 MB more per rollout on a 2-core machine), so
`export.tools.LedgerTools` names this module as its program instead: it speaks the same launch
protocol (the port file or fixed port, the rollout's `/task` channel, MCP over streamable HTTP,
stateless JSON) with only `mcp`, `uvicorn` and `httpx`, and serves the bundle's block through
`tools.register_engine_tools`, the one place the tools are defined.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import signal
import socket
import time
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings

from poisson_tasks.domain.engine import apply, initial_state
from poisson_tasks.export.engine_tools import EngineSession, register_engine_tools
from poisson_tasks.generator import generate

_FETCH_ATTEMPTS = 5


def task_url(state_url: str) -> str:
    """The rollout's `/task` channel beside its `/state` channel."""
    return state_url[: -len("/state")] + "/task" if state_url.endswith("/state") else state_url


def fetch_task(state_url: str, secret: str) -> dict[str, Any]:
    """The rollout's task data (arm_id, seed, task_id ...) from the interception server."""
    last: Exception | None = None
    for attempt in range(_FETCH_ATTEMPTS):
        try:
            resp = httpx.get(
                task_url(state_url), headers={"Authorization": f"Bearer {secret}"}, timeout=30
            )
            resp.raise_for_status()
            data = json.loads(resp.json()["task"])
            if not isinstance(data, dict):
                raise ValueError("the task channel answered no task object")
            return data
        except (httpx.HTTPError, KeyError, ValueError) as exc:
            last = exc
            time.sleep(0.5 * 2**attempt)
    raise RuntimeError(f"cannot fetch the rollout's task from {task_url(state_url)}: {last}")


def session_for(task: dict[str, Any]) -> EngineSession:
    bundle = generate(str(task["arm_id"]), int(task["seed"]))
    if bundle.task_id != task.get("task_id"):
        raise RuntimeError(
            f"task {task['arm_id']} seed {task['seed']} regenerates as {bundle.task_id}, not "
            f"{task.get('task_id')}: the tool server runs another build of poisson-tasks"
        )
    return EngineSession(bundle, initial_state(bundle.engine), apply)


def main() -> None:
    with contextlib.suppress(Exception):  # Linux: never outlive the harness that started us
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)
    host = os.environ.get("MCP_HOST", "127.0.0.1")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, int(os.environ.get("MCP_PORT", "0"))))
    port_file = os.environ.get("MCP_PORT_FILE")
    if port_file:
        Path(port_file).write_text(str(sock.getsockname()[1]))
    state_url = os.environ.get("VF_STATE_URL", "")
    if not state_url:
        raise SystemExit("VF_STATE_URL is not set: this server is started by the null harness")
    session = session_for(fetch_task(state_url, os.environ.get("VF_STATE_SECRET", "")))
    mcp = MCPServer("poisson-tasks")
    register_engine_tools(mcp, session)
    app = mcp.streamable_http_app(
        json_response=True,
        stateless_http=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    server = uvicorn.Server(uvicorn.Config(app, log_level="critical"))
    asyncio.run(server.serve(sockets=[sock]))


if __name__ == "__main__":
    main()
