"""serve-local: llama.cpp's own HTTP server (through xllamacpp) for one GGUF file, on loopback.

Order of work, each refusal before the next step costs anything:

1. before the model loads: check the file; with `--template auto` (the default) read the GGUF's
   metadata first and choose the template from it (local.choice, with the reason); load the chat
   template and refuse one that renders no tool section or writes no tool call into an assistant
   turn; with a template given, read the metadata (local.gguf) after, and warn in one line when
   it points to another shipped template, or names another family than the template is written
   for; refuse `embedded` when the GGUF has no template;
2. start the server (model load; the absolute path, so the path /props reports names the file
   wherever a runner starts) and wait for `/health`;
3. through the server: render the probe conversation (`/apply-template`) and refuse if the tool is
   not in it; then hand it the template's own text for one probe call as a finished reply
   (verify_parsed_call: one completion request, no token generated) and refuse unless
   llama.cpp parses it back into that tool call, reading the chat format it reports (`/slots`);
   then ask the loaded model itself, once, at temperature 0, for one call to the probe tool
   (probe_tool_call) and report whether it came back as a native call: a study's first sign
   that the template and the model agree, or do not (never a refusal: a model that calls no
   tool is a result);
4. print the base URL and serve until SIGINT or SIGTERM.

The server is llama.cpp's: `/health`, `/v1/models`, `/v1/chat/completions` with `tools`, `/props`
(on, so a run can record what is served), `/slots` and `/apply-template`. Its log (llama.cpp's, on
stderr) has one `launch_slot_` line per completion request it processes, serve-local's own check
included.
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

from poisson_tasks.errors import LocalServeError, MissingExtraError, NotARegularFile
from poisson_tasks.files import open_regular, os_problem
from poisson_tasks.local.choice import TemplateChoice, choose_template
from poisson_tasks.local.defaults import (
    AUTO,
    EMBEDDED,
    N_CTX,
    PORT,
    TEMPLATE,
    THREADS,
    shipped_templates,
)
from poisson_tasks.local.facts import TAG_PREFIX
from poisson_tasks.local.gguf import GgufMetadata, read_gguf_metadata
from poisson_tasks.local.templates import (
    PROBE_ARGUMENTS,
    PROBE_TOOL,
    ChatTemplate,
    call_conversations,
    call_text,
    check_applied,
    check_call_format,
    check_tool_section,
    family_warning,
    load_template,
    no_call_format,
    probe_conversation,
)

HOST = "127.0.0.1"
# Completion requests serve-local itself sends: the parse check (verify_parsed_call) and the
# start-up tool call (probe_tool_call).
STARTUP_REQUESTS = 2
_HEALTH_WAIT_S = 120.0
_PARSE_WAIT_S = 600.0  # one prompt of a few hundred tokens, on the slowest CPU a model may use
PROBE_MAX_TOKENS = 128  # the start-up tool call's reply: one call is a few dozen tokens
_QUOTE = 80  # characters of what the model wrote that a report quotes


@dataclass(frozen=True, slots=True)
class ToolCallProbe:
    """What the loaded model did when asked, at start-up, for one call to the probe tool:
    `outcome` is `native` (llama.cpp returned a tool call), `text` (the model wrote something
    naming the tool that llama.cpp did not read as a call), `prose` (no call at all) or `error`
    (the server failed the request, e.g. HTTP 500 for arguments it could not parse)."""

    outcome: str
    said: str
    seconds: float

    @property
    def native(self) -> bool:
        return self.outcome == "native"

    def report(self, template: str) -> str:
        """One line for the start-up announcement (`template`: the one served)."""
        head = (
            "asked the loaded model once, at temperature 0, for one call to a probe tool: it came "
            "back as "
        )
        if self.native:
            return (
                f"{head}a native tool call ({self.said}; {self.seconds:.1f} s): the template and "
                "the model agree on how a call is written"
            )
        others = [name for name in shipped_templates() if name != template] or ["FILE"]
        what = {
            "text": "text that names the tool, not a native call",
            "prose": "prose with no call",
            "error": "an error",
        }[self.outcome]
        return (
            f"{head}{what} ({self.said}; {self.seconds:.1f} s): the template and this model do "
            "not agree, so a study would score such replies as malformed calls or as no tool call; "
            f"another template may suit it (--template {' or '.join(others)}, or a file)"
        )


@dataclass(slots=True)
class LocalServer:
    """A started server: where it listens, what it serves, why that template, and what the model
    did with its start-up tool call."""

    base_url: str
    alias: str
    model_path: Path
    template: ChatTemplate | None
    threads: int
    n_ctx: int
    chat_format: str | None
    handle: Any
    template_note: str = ""
    probe: ToolCallProbe | None = None

    def close(self) -> None:
        """Stop the server: xllamacpp's Server stops (and joins its loop) when it is released."""
        self.handle = None

    def announcement(self) -> list[str]:
        """What `serve-local` prints once the server answers: the template and why, the start-up
        tool call when it came back native (otherwise a warning said so), and the base URL."""
        tpl = self.template
        name = tpl.name if tpl else "embedded"
        what = f"{tpl.name} ({tpl.family or 'family not stated'})" if tpl else "embedded"
        lines = [f"template {name}, {self.template_note}"]
        if self.probe is not None and self.probe.native:
            lines.append(f"start-up tool call: {self.probe.report(name)}")
        threads = f"{self.threads} thread{'' if self.threads == 1 else 's'}"
        lines.append(
            f"serving {self.alias} at {self.base_url} (llama.cpp, {threads}, n_ctx {self.n_ctx}, "
            f"template {what}; tool calls parsed by llama.cpp, chat format "
            f"{self.chat_format or 'not reported'}); Ctrl-C stops"
        )
        return lines


def _request(url: str, body: dict[str, Any] | None = None, timeout: float = 30.0) -> Any:
    data = None if body is None else json.dumps(body).encode("utf-8")
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:  # loopback only
        return json.loads(resp.read())


def _answer(url: str, body: dict[str, Any], timeout: float) -> tuple[int, Any]:
    """POST and return (HTTP status, JSON body), an error status included; raise when no answer."""
    try:
        return 200, _request(url, body, timeout)
    except urllib.error.HTTPError as exc:
        try:
            return exc.code, json.loads(exc.read())
        except ValueError:
            return exc.code, None


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


def _applied(root: str, conversation: dict[str, Any]) -> str:
    """The prompt the server's own template engine makes for a conversation (/apply-template)."""
    try:
        answer = _request(f"{root}/apply-template", conversation)
    except (OSError, urllib.error.URLError, ValueError) as exc:
        raise LocalServeError(f"{root}/apply-template did not answer ({exc})") from None
    prompt = answer.get("prompt") if isinstance(answer, dict) else None
    return prompt if isinstance(prompt, str) else ""


def verify_applied_template(root: str, name: str) -> None:
    """Ask the server to render the probe conversation and refuse when the tool is not in it."""
    check_applied(_applied(root, probe_conversation()), name)


def _parsed_calls(answer: Any) -> list[tuple[str, Any]] | str:
    """The (name, arguments) of each tool call in a chat answer, or what it held instead."""
    try:
        message = answer["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        error = answer.get("error") if isinstance(answer, dict) else None
        text = error.get("message") if isinstance(error, dict) else None
        return f"an error ({str(text or answer)[:160]})"
    if not isinstance(message, dict):
        return f"no message ({str(answer)[:160]})"
    calls = message.get("tool_calls")
    if not isinstance(calls, list) or not calls:
        return f"the text {str(message.get('content') or '')[:80]!r} and no tool call"
    out: list[tuple[str, Any]] = []
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        function = function if isinstance(function, dict) else {}
        try:
            arguments = json.loads(function.get("arguments") or "null")
        except (TypeError, ValueError):
            arguments = function.get("arguments")
        out.append((str(function.get("name")), arguments))
    return out


def chat_format(root: str) -> str | None:
    """The chat format llama.cpp chose for the last request, as GET /slots reports it."""
    try:
        slots = _request(f"{root}/slots", timeout=10.0)
    except (OSError, urllib.error.URLError, ValueError):
        return None
    first = slots[0] if isinstance(slots, list) and slots else None
    params = first.get("params") if isinstance(first, dict) else None
    value = params.get("chat_format") if isinstance(params, dict) else None
    return value if isinstance(value, str) else None


def verify_parsed_call(root: str, name: str) -> str | None:
    """Refuse unless llama.cpp parses the template's own text for one tool call into that call.

    The text is what the server's template writes for the probe call in an assistant turn (the
    form llama.cpp learns its parser from). It goes back as a finished assistant reply with
    `max_tokens` 0: the server reads it as the start of its reply, generates nothing, and parses
    it with the parser it built for this template and these tools. Returns the chat format the
    server reports for that request. (A study's first prompt shares only the template's opening
    tokens with it, all llama.cpp can reuse from its cache.)
    """
    replied, called = call_conversations()
    prompts = [_applied(root, c) for c in (probe_conversation(), replied, called)]
    text = call_text(*prompts)
    if text is None:
        raise no_call_format("the server's /apply-template", name)
    conversation = probe_conversation()
    conversation["messages"].append({"role": "assistant", "content": text})
    body = {**conversation, "max_tokens": 0, "temperature": 0.0}
    try:
        status, answer = _answer(f"{root}/v1/chat/completions", body, _PARSE_WAIT_S)
    except (OSError, urllib.error.URLError, ValueError) as exc:
        raise LocalServeError(
            f"{root}/v1/chat/completions did not answer the tool-call check ({exc})"
        ) from None
    found = chat_format(root)
    calls = _parsed_calls(answer)
    if calls != [(PROBE_TOOL, PROBE_ARGUMENTS)]:
        held = calls if isinstance(calls, str) else f"{len(calls)} other tool call(s) {calls!r}"
        raise LocalServeError(
            f"chat template {name}: llama.cpp does not parse the template's own tool-call text "
            f"back into that call (HTTP {status}, chat format {found or 'not reported'}; it "
            f"answered {held}), so every call the model makes would arrive as text; use "
            f"--template {' or '.join(shipped_templates())} or a template whose calls llama.cpp "
            "reads"
        )
    return found


def _quote(text: str) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= _QUOTE else flat[: _QUOTE - 1] + "…")


def probe_tool_call(root: str) -> ToolCallProbe:
    """Ask the loaded model for one call to the probe tool (temperature 0, seed 0, at most
    PROBE_MAX_TOKENS tokens) and say what came back; one completion request, which the server's
    log counts like a study's."""
    conversation = probe_conversation()
    conversation["messages"][-1]["content"] = (
        f'Call the tool {PROBE_TOOL} once, with q set to "probe".'
    )
    body = {**conversation, "max_tokens": PROBE_MAX_TOKENS, "temperature": 0.0, "seed": 0}
    started = time.monotonic()
    try:
        status, answer = _answer(f"{root}/v1/chat/completions", body, _PARSE_WAIT_S)
    except (OSError, urllib.error.URLError, ValueError) as exc:
        return ToolCallProbe("error", f"no answer: {exc}"[:_QUOTE], time.monotonic() - started)
    seconds = time.monotonic() - started
    calls = _parsed_calls(answer)
    if isinstance(calls, list):
        names = sorted({name for name, _ in calls})
        said = f"{len(calls)} call{'' if len(calls) == 1 else 's'} to {', '.join(names)}"
        return ToolCallProbe("native", said, seconds)
    try:
        message = answer["choices"][0]["message"]
        content = str(message.get("content") or "")
    except (KeyError, IndexError, TypeError, AttributeError):
        return ToolCallProbe("error", f"HTTP {status}: {calls}"[: _QUOTE * 2], seconds)
    outcome = "text" if PROBE_TOOL in content or '"name"' in content else "prose"
    return ToolCallProbe(outcome, _quote(content), seconds)


def _choice_note(choice: TemplateChoice) -> str:
    return f"chosen from the GGUF's metadata: {choice.reason}"


def _suggested(model: Path, meta: GgufMetadata) -> TemplateChoice | None:
    """The template the metadata points to, or None where no shipped one fits."""
    try:
        return choose_template(meta, model.name)
    except LocalServeError:
        return None


def _xllamacpp() -> Any:
    try:  # xllamacpp (llama.cpp's server, a 34 MB wheel) comes with the optional `local` extra
        import xllamacpp  # noqa: PLC0415 (the `local` extra)
    except ImportError:
        raise MissingExtraError(
            'serve-local needs the `local` extra: pip install "poisson-tasks[local]"'
        ) from None
    return xllamacpp


def _refuse_embedded_without_template(model: Path, has_template: bool) -> None:
    if not has_template:
        raise LocalServeError(
            f"--template {EMBEDDED}: {model.name} has no chat template of its own (its GGUF "
            "metadata has no tokenizer.chat_template), so llama.cpp would fall back to its "
            "built-in ChatML template, which lists no tools; give --template "
            f"{' or '.join(shipped_templates())} or a template file"
        )


def _check_model_file(model: Path) -> None:
    """A model file is a regular file: a FIFO, a device or a folder is named for what it is,
    before anything reads it."""
    try:
        open_regular(model).close()
    except FileNotFoundError:
        raise LocalServeError(
            f"{model}: no such model file; give the path of a .gguf file"
        ) from None
    except NotARegularFile as exc:
        raise LocalServeError(
            f"{model}: {exc.strerror}; a model is a regular GGUF file: give the path of a .gguf "
            "file"
        ) from None
    except OSError as exc:
        raise LocalServeError(
            f"{model}: cannot be read ({os_problem(exc)}); give the path of a .gguf file"
        ) from None


def _chosen_template(
    model: Path, template: str, warn: Callable[[str], None] | None
) -> tuple[ChatTemplate | None, str]:
    """The template to serve (None: the GGUF's own) and how it was chosen, checked before loading."""
    meta: GgufMetadata | None = None
    spec, note = template, "as given (--template)"
    if template == AUTO:  # the metadata decides, so it is read first
        meta = read_gguf_metadata(model)
        choice = choose_template(meta, model.name)
        spec, note = choice.name, _choice_note(choice)
    chat = load_template(spec)
    if chat is not None:  # before the model loads
        check_tool_section(chat)
        check_call_format(chat)
    warnings: list[str] = []
    if meta is None:
        meta = read_gguf_metadata(model)
        suggested = _suggested(model, meta)
        if suggested is not None and suggested.name != spec:
            warnings.append(
                f"--template {spec}: the GGUF's metadata points to {suggested.name} "
                f"({suggested.reason}); serving {spec} as given"
            )
    if chat is None:
        _refuse_embedded_without_template(model, meta.chat_template is not None)
    else:
        line = family_warning(chat, meta, model.name)
        if line is not None:
            warnings.append(line)
    if warn is not None:
        for line in warnings:
            warn(line)
    return chat, note


def _server_params(
    xllamacpp: Any,
    model: Path,
    name: str,
    *,
    port: int,
    ctx: int,
    threads: int,
    chat: ChatTemplate | None,
) -> Any:
    """llama.cpp's server parameters, with the tags that let /props say who started it and how."""
    params = xllamacpp.CommonParams()
    params.model.path = str(model.resolve())  # /props reports it: absolute, wherever a runner is
    params.hostnames = [HOST]
    params.port = port
    params.n_ctx = ctx
    params.n_parallel = 1
    params.use_jinja = True
    params.endpoint_props = True
    params.endpoint_slots = True
    tags = {
        f"{TAG_PREFIX}started-by=serve-local",
        f"{TAG_PREFIX}threads={threads}",
        f"{TAG_PREFIX}template={chat.name if chat else EMBEDDED}",
        f"{TAG_PREFIX}server=xllamacpp {metadata.version('xllamacpp')}",
    }
    if chat is not None:
        params.chat_template = chat.text
        tags.add(f"{TAG_PREFIX}template-file-sha256={chat.file_sha256}")
    params.model_alias = {name}
    params.model_tags = tags
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    return params


def start_local_server(
    model: Path,
    *,
    port: int = PORT,
    threads: int = THREADS,
    ctx: int = N_CTX,
    template: str = TEMPLATE,
    alias: str | None = None,
    warn: Callable[[str], None] | None = None,
) -> LocalServer:
    """Check, start and verify a llama.cpp server for `model`; raise LocalServeError if refused.

    `template` is `auto` (chosen from the GGUF's metadata, local.choice), a shipped template, a
    file or `embedded`. `warn` receives the one line of each warning that does not refuse: a
    template written for another family than the GGUF names, a given template other than the one
    the metadata points to, and a start-up tool call that did not come back as a native call.
    """
    _check_model_file(model)
    if threads < 1 or ctx < 256 or not 0 <= port <= 65535:
        raise LocalServeError(
            f"--threads {threads}, --ctx {ctx}, --port {port}: need threads >= 1, ctx >= 256 and "
            "a port in 0-65535 (0 picks a free one)"
        )
    chat, note = _chosen_template(model, template, warn)
    xllamacpp = _xllamacpp()
    name = alias or model.name.removesuffix(".gguf")
    params = _server_params(xllamacpp, model, name, port=port, ctx=ctx, threads=threads, chat=chat)
    handle = xllamacpp.Server(params)
    root = str(handle.listening_address).rstrip("/")
    server = LocalServer(
        base_url=f"{root}/v1",
        alias=name,
        model_path=model,
        template=chat,
        threads=threads,
        n_ctx=ctx,
        chat_format=None,
        handle=handle,
        template_note=note,
    )
    label = chat.name if chat else f"{EMBEDDED} (the GGUF's own)"
    try:
        wait_healthy(root)
        verify_applied_template(root, label)
        server.chat_format = verify_parsed_call(root, label)
        server.probe = probe_tool_call(root)
        if not server.probe.native and warn is not None:
            warn(f"start-up tool call: {server.probe.report(label)}")
    except BaseException:
        del handle
        server.close()
        raise
    return server


def serve_local(
    model: Path,
    *,
    port: int = PORT,
    threads: int = THREADS,
    ctx: int = N_CTX,
    template: str = TEMPLATE,
    alias: str | None = None,
    announce: Callable[[LocalServer], None] | None = None,
    warn: Callable[[str], None] | None = None,
) -> None:
    """Start the server and serve until SIGINT or SIGTERM, then stop it cleanly."""
    stop = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, _on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        server = start_local_server(
            model, port=port, threads=threads, ctx=ctx, template=template, alias=alias, warn=warn
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
