"""verifiers' null harness with its chat program run by this interpreter (the `verifiers` extra).

verifiers' null harness prepares its chat program, a PEP 723 script, with `uv sync --script`: the
script's packages are resolved from an index at run time, outside uv.lock, and uv itself is
downloaded with curl when none is on PATH. `LockedNullHarness` runs the same program, byte for
byte, with `sys.executable` (the environment vf-eval runs in, installed from uv.lock), the way
verifiers already starts each tool server. Its packages are the `verifiers` extra's, so the lock
pins them and the card's environment hash covers them; nothing is fetched. See
docs/verifiers-export.md.
"""

from __future__ import annotations

import copy
import hashlib
import re
import sys
import tomllib
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from packaging.requirements import Requirement
from verifiers.v1.harnesses.null import NullHarness
from verifiers.v1.harnesses.utils.launch import CHAT_PROGRAM_SOURCE
from verifiers.v1.runtimes import Runtime, SubprocessRuntime

# PEP 723's reference expression for a `# /// script` block.
_METADATA_BLOCK = re.compile(
    r"(?m)^# /// (?P<type>[a-zA-Z0-9-]+)$\s(?P<content>(^#(| .*)$\s)+)^# ///$"
)


def program_requirements(source: str) -> list[Requirement]:
    """The packages a PEP 723 program declares in its `# /// script` block."""
    for match in _METADATA_BLOCK.finditer(source):
        if match.group("type") == "script":
            lines = match.group("content").splitlines(keepends=True)
            text = "".join(line[2:] if line.startswith("# ") else line[1:] for line in lines)
            return [Requirement(dep) for dep in tomllib.loads(text).get("dependencies", [])]
    return []


def missing_requirements(requirements: list[Requirement]) -> list[str]:
    """Each requirement this environment does not satisfy, as `name spec (installed: …)`."""
    problems = []
    for req in requirements:
        try:
            have = version(req.name)
        except PackageNotFoundError:
            problems.append(f"{req} (not installed)")
            continue
        if not req.specifier.contains(have, prereleases=True):
            problems.append(f"{req} (installed: {have})")
    return problems


@cache
def _check_chat_program() -> None:
    missing = missing_requirements(program_requirements(CHAT_PROGRAM_SOURCE))
    if missing:
        raise RuntimeError(
            "the null harness's chat program needs packages this environment "
            f"({sys.executable}) lacks: {', '.join(missing)}; install poisson-tasks[verifiers] "
            "from uv.lock (uv sync --locked --extra verifiers)"
        )


class _ThisInterpreter(SubprocessRuntime):
    """A subprocess runtime whose PEP 723 programs run on sys.executable, not uv's own venv."""

    async def prepare_uv_script(
        self, script: str | bytes, env: dict[str, str] | None = None, *, activate: bool = True
    ) -> list[str]:
        data = script.encode() if isinstance(script, str) else script
        path = f".vf-program-{hashlib.sha256(data).hexdigest()[:16]}.py"
        await self.write(path, data)  # into the rollout's workdir, the program's cwd
        return [sys.executable, path]


def on_this_interpreter(runtime: Runtime) -> Runtime:
    """A view of `runtime` (shared state, as Runtime.with_env makes one) that runs PEP 723
    programs on this interpreter; only the local subprocess runtime shares it."""
    if not isinstance(runtime, SubprocessRuntime):
        raise ValueError(
            f"the {runtime.type} runtime: poisson-tasks' null harness runs its chat program on "
            "this interpreter, so it needs the subprocess runtime"
        )
    view = copy.copy(runtime)
    view.__dict__ = runtime.__dict__
    view.__class__ = _ThisInterpreter
    return view


class LockedNullHarness(NullHarness):
    """The null harness (same program, prompt and tools), its program run from this environment."""

    async def setup(self, runtime: Runtime) -> None:
        _check_chat_program()

    async def launch(
        self,
        ctx: Any,
        trace: Any,
        runtime: Runtime,
        endpoint: str,
        secret: str,
        mcp_urls: dict[str, str],
        data: Any,
        tool_interception_url: str | None = None,
    ) -> Any:
        return await super().launch(
            ctx,
            trace,
            on_this_interpreter(runtime),
            endpoint,
            secret,
            mcp_urls,
            data,
            tool_interception_url=tool_interception_url,
        )


__all__ = ["LockedNullHarness", "missing_requirements", "program_requirements"]
