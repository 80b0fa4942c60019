"""The test command of a mutation session: pytest, hypothesis derandomized, run by a fork server.

A mutant's verdict depends on that mutant alone: hypothesis draws the same examples for every
mutant and in every run, and keeps no example database, so no failure saved for one mutant is
replayed against the next.

Each run is a fork of one server process that has already imported pytest, hypothesis and the
third-party libraries the package uses, but nothing of poisson_tasks: the child imports the
package and the test files from disk, so it sees the mutant cosmic-ray wrote there, and a mutant's
run pays for its own tests rather than for Python's start and those imports each time. The client
cosmic-ray runs exits with pytest's exit code; when it cannot reach the server, or pytest found no
test to run or was used wrongly, it prints a line that benchmarks/mutation.py counts as an
incompetent mutant, never as a killed one.

    python mutation_pytest.py serve SOCKET          # the server: one test run at a time
    python mutation_pytest.py run SOCKET ARGS...    # a test run through it (cosmic-ray's command)
    python mutation_pytest.py stop SOCKET           # end the server
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import sys

# Imported once by the server; what the package and the chosen test files use beyond the standard
# library (each child imports poisson_tasks and the tests itself).
PRELOAD = (
    "pytest",
    "hypothesis",
    "hypothesis.strategies",
    "numpy",
    "scipy.stats",
    "pydantic",
    "orjson",
    "yaml",
    "typer",
    "typer.testing",
)
UNREACHABLE = "mutation-server: unreachable"
NOT_RUN = "mutation-server: pytest ran no test"  # exit 4 (usage) or 5 (no tests collected)


def _run_pytest(arguments: list[str]) -> int:
    """pytest.main with the session's hypothesis profile loaded once pytest is configured."""
    import pytest

    class Derandomized:
        @staticmethod
        def pytest_configure(config: pytest.Config) -> None:
            from hypothesis import settings

            settings.register_profile("mutation", derandomize=True, database=None, deadline=None)
            settings.load_profile("mutation")

    return int(pytest.main(arguments, plugins=[Derandomized()]))


def _child(request: dict[str, object]) -> None:
    """In the forked child: quiet, in the request's folder, run pytest and exit with its code."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.chdir(str(request["cwd"]))
    code = 3
    try:
        arguments = request["arguments"]
        assert isinstance(arguments, list)
        code = _run_pytest([str(a) for a in arguments])
    finally:
        os._exit(code)


def _wait(pid: int, conn: socket.socket) -> int | None:
    """The child's exit code; None (and the child killed) if the client went away first, as it does
    when cosmic-ray's timeout kills it."""
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        ready, _, _ = select.select([conn], [], [], 0.02)
        if ready and not conn.recv(1):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None


def serve(path: str) -> None:
    """Import PRELOAD, then answer one request at a time, each in a forked child."""
    for name in PRELOAD:
        with contextlib.suppress(ImportError):  # a library the tests do not need here
            __import__(name)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    print("ready", flush=True)
    while True:
        conn, _ = server.accept()
        with conn:
            line = conn.makefile("rb").readline()
            request = json.loads(line)
            if request.get("stop"):
                break
            pid = os.fork()
            if pid == 0:
                server.close()
                _child(request)
            code = _wait(pid, conn)
            if code is not None:
                with contextlib.suppress(OSError):  # the client is gone
                    conn.sendall(f"{code}\n".encode())
    server.close()
    os.unlink(path)


def _ask(path: str, request: dict[str, object]) -> str:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.connect(path)
        client.sendall(json.dumps(request).encode() + b"\n")
        return client.makefile("r").readline().strip()


def run(path: str, arguments: list[str]) -> int:
    """One test run through the server, as cosmic-ray's test command."""
    try:
        reply = _ask(path, {"cwd": os.getcwd(), "arguments": arguments})
        code = int(reply)
    except (OSError, ValueError):
        print(UNREACHABLE, flush=True)
        return 3
    if code in (4, 5):
        print(f"{NOT_RUN} (exit {code})", flush=True)
    return code if code >= 0 else 128 - code


def main() -> int:
    verb, path, *rest = sys.argv[1:]
    if verb == "serve":
        serve(path)
        return 0
    if verb == "stop":
        _ask(path, {"stop": True})
        return 0
    return run(path, rest)


if __name__ == "__main__":
    sys.exit(main())
