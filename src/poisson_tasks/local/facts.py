"""What a llama.cpp server says about what it serves, as a run records it and a card prints it.

Read from the server's `GET /props` (build, model path, quantisation, context size, chat template,
template capabilities) and `GET /v1/models` (parameters, and the tags `serve-local` sets: threads,
template name and its file's sha256, xllamacpp version). The model file's sha256 is computed by the
runner when the file is on this machine: the server is on loopback and reports an absolute path
that exists here (serve-local hands llama.cpp an absolute path; a relative one is relative to the
server's own working directory, which the runner cannot know). llama.cpp does not report a hash,
so otherwise it is not recorded, with the reason. Nothing here is taken from the
pre-registration: a declared revision is compared with the measured hash, never copied.

Two template hashes, because they differ: `template_sha256` is of the text llama.cpp reports at
/props (its template engine drops one trailing newline of the file), `template_file_sha256` of the
file serve-local loaded, what `sha256sum FILE` prints.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict

TAG_PREFIX = "poisson-tasks."
_SHA256 = re.compile(r"[0-9a-f]{64}")
_CHUNK = 1 << 20


class LlamaCppFacts(BaseModel):
    """The serving facts of a llama.cpp server (`provider: llamacpp`); None where not reported."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    build: str | None = None
    server: str | None = None
    model_file: str | None = None
    model_bytes: int | None = None
    model_sha256: str | None = None
    sha256_from: str = "not recorded"
    quantization: str | None = None
    parameters: int | None = None
    n_ctx: int | None = None
    slots: int | None = None
    threads: int | None = None
    template: str | None = None
    template_sha256: str | None = None
    template_file_sha256: str | None = None
    template_tools: bool | None = None
    started_by: str | None = None


def is_loopback(base_url: str) -> bool:
    """Whether a base URL's host is this machine (localhost or a loopback address)."""
    host = urlsplit(base_url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def file_sha256(path: Path) -> str:
    """sha256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _hex64(value: str | None) -> str | None:
    """A sha256 in hex as a tag carries it; anything else is not a hash and is not recorded."""
    return value if value is not None and _SHA256.fullmatch(value) else None


def _tags(models: Any) -> dict[str, str]:
    """serve-local's `poisson-tasks.<key>=<value>` tags on the served model, as a mapping."""
    data = models.get("data") if isinstance(models, dict) else None
    out: dict[str, str] = {}
    for entry in data if isinstance(data, list) else []:
        for tag in entry.get("tags") or [] if isinstance(entry, dict) else []:
            if isinstance(tag, str) and tag.startswith(TAG_PREFIX) and "=" in tag:
                key, value = tag[len(TAG_PREFIX) :].split("=", 1)
                out[key] = value
    return out


def _meta(models: Any) -> dict[str, Any]:
    data = models.get("data") if isinstance(models, dict) else None
    if isinstance(data, list) and data and isinstance(data[0], dict):
        meta = data[0].get("meta")
        return meta if isinstance(meta, dict) else {}
    return {}


def _model_hash(path_text: str | None, base_url: str) -> tuple[int | None, str | None, str]:
    """The served file's size and sha256 when the runner can read that very file, and why not."""
    if path_text is None:
        return None, None, "not recorded: the server reports no model path"
    if not is_loopback(base_url):
        return None, None, "not recorded: the server is not on this machine"
    if not (PurePosixPath(path_text).is_absolute() or PureWindowsPath(path_text).is_absolute()):
        return (
            None,
            None,
            f"not recorded: the server reports a path relative to its own working directory "
            f"({path_text}), which the runner cannot know; start it with an absolute model path",
        )
    local = Path(path_text)
    if not local.is_file():
        return None, None, f"not recorded: {path_text} is not a file on this machine"
    return local.stat().st_size, file_sha256(local), "computed by the runner from the served file"


def llamacpp_facts(props: dict[str, Any], models: Any, base_url: str) -> LlamaCppFacts:
    """The facts a run records from a llama.cpp server's /props and /v1/models answers."""
    tags = _tags(models)
    meta = _meta(models)
    path_text = props.get("model_path")
    path_text = path_text if isinstance(path_text, str) and path_text else None
    name = None
    if path_text is not None:
        win = PureWindowsPath(path_text).name
        name = win if "\\" in path_text else PurePosixPath(path_text).name
    size, sha, sha_from = _model_hash(path_text, base_url)
    gen = props.get("default_generation_settings")
    n_ctx = _int(gen.get("n_ctx")) if isinstance(gen, dict) else None
    template = props.get("chat_template")
    caps = props.get("chat_template_caps")
    threads = tags.get("threads")
    server = tags.get("server")
    return LlamaCppFacts(
        build=str(props["build_info"]) if props.get("build_info") is not None else None,
        server=server,
        model_file=name,
        model_bytes=size,
        model_sha256=sha,
        sha256_from=sha_from,
        quantization=str(props["model_ftype"]) if props.get("model_ftype") else None,
        parameters=_int(meta.get("n_params")),
        n_ctx=n_ctx if n_ctx is not None else _int(meta.get("n_ctx")),
        slots=_int(props.get("total_slots")),
        threads=int(threads) if threads is not None and threads.isdigit() else None,
        template=tags.get("template"),
        template_sha256=hashlib.sha256(template.encode("utf-8")).hexdigest()
        if isinstance(template, str)
        else None,
        template_file_sha256=_hex64(tags.get("template-file-sha256")),
        template_tools=caps.get("supports_tools")
        if isinstance(caps, dict) and isinstance(caps.get("supports_tools"), bool)
        else None,
        started_by=tags.get("started-by"),
    )
