"""serve-local: llama.cpp's own HTTP server (through xllamacpp) for one GGUF file, on loopback.

Order of work: check the model file, load the chat template and refuse one without a tool section
(before the model loads), start the server (model load), wait for `/health`, ask the server to
render the probe conversation (`/apply-template`) and refuse if the tool is not in it, then print
the base URL and serve until SIGINT or SIGTERM. The server is llama.cpp's: `/health`,
`/v1/models`, `/v1/chat/completions` with `tools`, `/props` (on, so a run can record what is
served) and `/apply-template`. Its log (llama.cpp's, on stderr) has one `launch_slot_` line per
completion request it processes.
"""

from __future__ import annotations

import json
import signal
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from types import FrameType
from typing import Any

from poisson_tasks.errors import LocalServeError, MissingExtraError
from poisson_tasks.local.facts import TAG_PREFIX
from poisson_tasks.local.templates import (
    ChatTemplate,
    check_applied,
    check_tool_section,
    load_template,
    probe_conversation,
)

HOST = "127.0.0.1"
_HEALTH_WAIT_S = 120.0


@dataclass(slots=True)
class LocalServer:
    """A started server: where it listens and what it serves."""

    base_url: str
    alias: str
    model_path: Path
    template: ChatTemplate | None
    threads: int
    n_ctx: int
    handle: Any

    def close(self) -> None:
        """Stop the server: xllamacpp's Server stops (and joins its loop) when it is released."""
        self.handle = None


def _request(url: str, body: dict[str, Any] | None = None, timeout: float = 30.0) -> Any:
    data = None if body is None else json.dumps(body).encode("utf-8")
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:  # loopback only
        return json.loads(resp.read())


def wait_healthy(root: str, timeout_s: float = _HEALTH_WAIT_S) -> None:
    """Poll GET /health until it answers ok; one line naming the URL when it never does."""
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            if _request(f"{root}/health", timeout=5.0).get("status") == "ok":
                return
        except (OSError, urllib.error.URLError, ValueError) as exc:
            last = str(exc)
        time.sleep(0.2)
    raise LocalServeError(f"{root}/health did not answer ok within {timeout_s:g} s ({last})")


def verify_applied_template(root: str, name: str) -> None:
    """Ask the server to render the probe conversation and refuse when the tool is not in it."""
    try:
        answer = _request(f"{root}/apply-template", probe_conversation())
    except (OSError, urllib.error.URLError, ValueError) as exc:
        raise LocalServeError(f"{root}/apply-template did not answer ({exc})") from None
    prompt = answer.get("prompt") if isinstance(answer, dict) else None
    check_applied(prompt if isinstance(prompt, str) else "", name)


def _xllamacpp() -> Any:
    try:  # xllamacpp (llama.cpp's server, a 34 MB wheel) comes with the optional `local` extra
        import xllamacpp  # noqa: PLC0415 (the `local` extra)
    except ImportError:
        raise MissingExtraError(
            'serve-local needs the `local` extra: pip install "poisson-tasks[local]"'
        ) from None
    return xllamacpp


def start_local_server(
    model: Path,
    *,
    port: int = 0,
    threads: int = 1,
    ctx: int = 8192,
    template: str = "chatml-tools",
    alias: str | None = None,
) -> LocalServer:
    """Check, start and verify a llama.cpp server for `model`; raise LocalServeError if refused."""
    if not model.is_file():
        raise LocalServeError(f"{model}: no such model file; give the path of a .gguf file")
    if threads < 1 or ctx < 256 or not 0 <= port <= 65535:
        raise LocalServeError(
            f"--threads {threads}, --ctx {ctx}, --port {port}: need threads >= 1, ctx >= 256 and "
            "a port in 0-65535 (0 picks a free one)"
        )
    chat = load_template(template)
    if chat is not None:
        check_tool_section(chat)  # before the model loads
    xllamacpp = _xllamacpp()
    name = alias or model.name.removesuffix(".gguf")
    params = xllamacpp.CommonParams()
    params.model.path = str(model)
    params.hostnames = [HOST]
    params.port = port
    params.n_ctx = ctx
    params.n_parallel = 1
    params.use_jinja = True
    params.endpoint_props = True
    if chat is not None:
        params.chat_template = chat.text
    params.model_alias = {name}
    params.model_tags = {
        f"{TAG_PREFIX}started-by=serve-local",
        f"{TAG_PREFIX}threads={threads}",
        f"{TAG_PREFIX}template={chat.name if chat else 'embedded'}",
        f"{TAG_PREFIX}server=xllamacpp {metadata.version('xllamacpp')}",
    }
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    handle = xllamacpp.Server(params)
    root = str(handle.listening_address).rstrip("/")
    server = LocalServer(
        base_url=f"{root}/v1",
        alias=name,
        model_path=model,
        template=chat,
        threads=threads,
        n_ctx=ctx,
        handle=handle,
    )
    try:
        wait_healthy(root)
        verify_applied_template(root, chat.name if chat else "embedded (the GGUF's own)")
    except BaseException:
        del handle
        server.close()
        raise
    return server


def serve_local(
    model: Path,
    *,
    port: int = 0,
    threads: int = 1,
    ctx: int = 8192,
    template: str = "chatml-tools",
    alias: str | None = None,
    announce: Callable[[LocalServer], None] | None = None,
) -> None:
    """Start the server and serve until SIGINT or SIGTERM, then stop it cleanly."""
    stop = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, _on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        server = start_local_server(
            model, port=port, threads=threads, ctx=ctx, template=template, alias=alias
        )
        try:
            if announce is not None:
                announce(server)
            while not stop.wait(0.5):
                pass
        finally:
            server.close()
    finally:
        for signal_number, handler in previous.items():
            signal.signal(signal_number, handler)
