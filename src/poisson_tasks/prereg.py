"""The pre-registration: a YAML file that declares a study in full, and the Plan it validates to.

A pre-registration names the model and how it is served, the decoding, the arms, tasks and attempts,
the string the seeds are derived from, the turn limit and horizon, the budget, the concurrency and
every threshold the card uses, before anything runs. `validate_preregistration` refuses a document
with one message per problem, each naming the field; a document that passes becomes a `Plan`.

Seeds. The seed list is derived, never typed in: seed i is the first 8 bytes of
sha256("<seed_string>|<i>") read big-endian, modulo 2**31, taken for i = 0, 1, 2, ... and skipping
any repeat until `tasks` distinct seeds are drawn, kept in that order. The one reserved string
"range" gives 0, 1, ..., tasks-1 instead. `seed_list_hash` is sha256 of the list's canonical JSON
(sorted keys, no spaces). A document may state `seeds` and `seed_list_hash` to publish them; both
are then checked against the derivation.

The API key never enters the file: `model.api_key_env` names the environment variable holding it.

Build pins. An optional `build` section pins the hashes of the instrument (`generator_hash`,
`engine_hash`, as `poisson-tasks validate` prints them): on a build whose hash differs the document
is refused, since it would be measured by a different instrument (other tasks, other
observations). Without the section any build may run it, and the run records the build's hashes.

Ignored keys. `thresholds.bootstrap_resamples` and `thresholds.bootstrap_seed` were read by the
bootstrap intervals the cards no longer use (the intervals are closed-form; nothing resamples). A
document that still has them validates with one note saying they are ignored, and they are left
out of the plan, its hash and the measurement a resumed folder is compared on.
"""

from __future__ import annotations

import hashlib
import ipaddress
import math
import re
import shlex
from collections.abc import Mapping, Sequence
from datetime import date
from pathlib import Path
from typing import Any, Literal, NamedTuple
from urllib.parse import parse_qsl, unquote, urlsplit

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)

from poisson_tasks.arms import CONTROL_ARMS, ArmSpec, Split, Strictness, arm_id, parse_arm_id
from poisson_tasks.bundle import canonical_json, digest
from poisson_tasks.credentials import (
    could_be_credential,
    credential_shaped,
    fields_where,
    shown,
)
from poisson_tasks.errors import ArmError, PolicyError, PreregistrationError, ToolFileError
from poisson_tasks.files import NotARegularFile, TooLarge, read_limited
from poisson_tasks.hashes import engine_hash, generator_hash
from poisson_tasks.nouns import counted
from poisson_tasks.owntools import ToolSet, load_tool_file
from poisson_tasks.policycatalogue import parse_model
from poisson_tasks.providers import PROVIDERS as REGISTRY
from poisson_tasks.providers import Provider
from poisson_tasks.resolution import (
    Resolution,
    power_warning,
    reads_line,
    resolution_line,
    resolution_of,
)
from poisson_tasks.seeding import validate_seed_line
from poisson_tasks.supplied import terminal
from poisson_tasks.yamlfile import YamlLimits, YamlRefused, load_json_yaml

FORMAT = "poisson-tasks/preregistration@1"
PROBE_FORMAT = "poisson-tasks/probe@1"  # a knob-probe registration (probe/design.py reads it)
RANGE_SEEDS = "range"
SEED_MODULUS = 2**31
PROVIDERS: tuple[str, ...] = tuple(REGISTRY)
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")  # a study's name: a safe folder name
# Names that carry a credential, in a query string, a request body or a header.
_CREDENTIAL_NAME = re.compile(
    r"(^|[_\-.])(api[_\-]?keys?|apikeys?|key|token|access[_\-]?tokens?|secrets?|passwords?"
    r"|passwd|pass|pwd|auth|authorization|bearer|credentials?|sig|signature|cookies?"
    r"|session[_\-]?(id|token|key))$",
    re.IGNORECASE,
)
_KEYLIKE = re.compile(r"^(sk-|sk_|Bearer )|^(?=.*[a-z])(?=.*[0-9])[A-Za-z0-9]{24,}$")
_STRICT = ConfigDict(extra="forbid", frozen=True, strict=True)

# Bounds on every size a user can write (checked at validate time, the limit in the message).
MAX_FILE_BYTES = 1 << 20  # a pre-registration is a page of YAML; 1 MiB is far beyond any real one
MAX_DEPTH = 32  # nesting of mappings and lists
MAX_INT = 2**53  # every integer fits a JSON number exactly
MAX_TASKS = 100_000
MAX_SEED_STRING = 1_000  # characters
MAX_ATTEMPTS = 1_000
MAX_ARMS = 500
MAX_EPISODES = 1_000_000  # arms x tasks x attempts: the plan's slots are held in memory
MAX_TURNS = 1_000  # turn_limit, slack and horizon
MAX_COMPLETION_TOKENS = 10_000_000
MAX_CONCURRENCY = 1_024
MAX_RETRIES = 100
MAX_SECONDS = 10_000_000.0  # about 116 days: any wall-clock, timeout or backoff
MIN_RESOLUTION = 0.01  # a finer declared resolution needs more tasks than MAX_TASKS allows
MAX_ITEMS = MAX_TASKS  # entries in any one list or mapping (the longest list: design.seeds)
MAX_VALUES = MAX_ITEMS + 10_000  # values in the whole document: its longest list and a page more
# Checked while the YAML is read, before anything is built from it (yamlfile.py), so a file of
# 100,000 arms is refused at its 501st, not parsed whole first.
YAML_LIMITS = YamlLimits(
    values=MAX_VALUES, items=MAX_ITEMS, paths={"design.arms": (MAX_ARMS, "arms")}
)


IGNORED_THRESHOLDS: tuple[str, ...] = ("bootstrap_resamples", "bootstrap_seed")


class Thresholds(BaseModel):
    """Every threshold a card uses, declared before the run (IGNORED_THRESHOLDS are dropped on
    reading: older documents, run headers and cards carry them, nothing reads them)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    saturation_low: float = 0.05
    saturation_high: float = 0.95
    resolution: float = 0.15
    no_call_max: float = 0.10
    instrument_max: float = 0.02
    confidence: float = 0.95

    @model_validator(mode="before")
    @classmethod
    def _drop_ignored(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and any(k in data for k in IGNORED_THRESHOLDS):
            return {k: v for k, v in data.items() if k not in IGNORED_THRESHOLDS}
        return data


BUILD_HASHES: tuple[str, ...] = ("generator_hash", "engine_hash")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


class Build(BaseModel):
    """The instrument a pre-registration pins (optional): hashes `poisson-tasks validate` prints."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    generator_hash: str | None = None
    engine_hash: str | None = None


def build_hashes() -> dict[str, str]:
    """This install's hashes a pre-registration can pin under `build`."""
    return {"generator_hash": generator_hash(), "engine_hash": engine_hash()}


class Slot(NamedTuple):
    """One planned episode of a run: an arm at a seed, and the attempt (numbered from 0)."""

    arm_id: str
    seed: int
    attempt: int


class Rates(BaseModel):
    """What the provider bills, in USD per million tokens, with the date the rates were read."""

    model_config = _STRICT

    input: float
    cached_input: float
    output: float
    as_of: date = Field(strict=False, description="the date the rates were read (YYYY-MM-DD)")
    source: str | None = None


class Serving(BaseModel):
    """The model and where it is served; the API key is named by its variable, never written."""

    model_config = _STRICT

    provider: Provider
    model: str
    base_url: str | None = None
    revision: str | None = None
    api_key_env: str | None = None
    rates: Rates | None = None

    @property
    def resolved_base_url(self) -> str | None:
        """The base URL the client talks to (the provider's default when none is given: OpenAI's
        own for `openai`)."""
        if self.base_url:
            return self.base_url.rstrip("/")
        return REGISTRY[self.provider].default_base_url


def _drop_unset(
    model: BaseModel, handler: SerializerFunctionWrapHandler, optional: tuple[str, ...]
) -> dict[str, Any]:
    """The model's fields less the optional ones left unset: a document written before those
    fields existed keeps its hash."""
    out: dict[str, Any] = handler(model)
    for name in optional:
        if out.get(name) is None:
            out.pop(name, None)
    return out


class Decoding(BaseModel):
    """The decoding, declared in full; `extra_body` carries provider-specific fields verbatim.

    `seed: derived` sends each attempt its own seed, derived from (task id, attempt) (see
    runner.endpoint.derived_seed); left out, no seed is sent.
    """

    model_config = _STRICT

    temperature: float
    top_p: float
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high"] | None
    max_completion_tokens: int
    extra_body: dict[str, Any] = Field(default_factory=dict)
    seed: Literal["derived"] | None = None

    @model_serializer(mode="wrap")
    def _serialize(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _drop_unset(self, handler, ("seed",))


class ReplayDesign(BaseModel):
    """`design.replay`: after the main run, replay a seeded sample of its scored slots
    (`poisson-tasks replay`, runner/replay.py) into RUN_DIR/replay/, so the card can say how much of
    the run comes out the same when it is run again on the same serving."""

    model_config = _STRICT

    sample: int = Field(description="how many scored slots to run again, drawn across arms")
    seed: int = Field(default=0, description="the seed the sample is drawn with")


class Design(BaseModel):
    """What is measured: arms x seeds x attempts, the split, strictness, turn limit and horizon,
    and the harness that runs each episode: `native` (the runner's own loop, the fast default) or
    `verifiers-null` (the verifiers taskset on the null harness, the `verifiers` extra)."""

    model_config = _STRICT

    arms: list[str]
    tasks: int
    attempts: int
    seed_string: str
    seeds: list[int] | None = None
    seed_list_hash: str | None = None
    split: Literal["eval", "train"] = "eval"
    strictness: Literal["strict", "leaky"] = "strict"
    turn_limit: int = 32
    slack: int
    horizon: int
    harness: Literal["native", "verifiers-null"] = "native"
    own_tools: str | None = Field(
        default=None,
        description="a file of the user's own tools (OpenAI function schemas) in place of the "
        "read tools; relative to the pre-registration file",
    )
    own_tools_sha256: str | None = Field(
        default=None, description="the tool file's SHA-256; filled in when not stated"
    )
    replay: ReplayDesign | None = None

    @model_serializer(mode="wrap")
    def _omit_defaults(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # The default harness, absent own tools and no replay are left out of the document's JSON,
        # so the hashes of every pre-registration written before those options existed stay.
        out = _drop_unset(self, handler, ("own_tools", "own_tools_sha256", "replay"))
        if out.get("harness") == "native":
            del out["harness"]
        return out


class Budget(BaseModel):
    """When the run stops: tokens and dollars over the whole folder, wall-clock per session."""

    model_config = _STRICT

    tokens: int
    wall_clock_s: float
    dollars: float | None = None


class Execution(BaseModel):
    """How the runner drives the endpoint; none of it changes what is measured.

    `pace`: `headers` (the default) paces new requests by the rate-limit headers the endpoint
    sends, where it sends them (runner/pacing.py); `off` sends at the concurrency alone. YAML reads
    an unquoted `off` as false, which is taken as `off`.
    """

    model_config = _STRICT

    concurrency: int = 8
    max_retries: int = 6
    backoff_s: float = 1.0
    backoff_max_s: float = 60.0
    request_timeout_s: float = 300.0
    episode_timeout_s: float = 1800.0
    retry_after_max_s: float | None = None
    pace: Literal["headers", "off"] = "headers"

    @model_validator(mode="before")
    @classmethod
    def _off_as_written(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and data.get("pace") is False:
            return {**data, "pace": "off"}
        return data

    @model_serializer(mode="wrap")
    def _serialize(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # The default pace is left out, so every document written before it keeps its hash.
        out = _drop_unset(self, handler, ("retry_after_max_s",))
        if out.get("pace") == "headers":
            del out["pace"]
        return out


class Preregistration(BaseModel):
    """The whole document; only `budget` and `execution` may change when a run is resumed."""

    model_config = _STRICT

    format: Literal["poisson-tasks/preregistration@1"]
    name: str
    description: str = ""
    model: Serving
    decoding: Decoding
    design: Design
    budget: Budget
    execution: Execution = Field(default_factory=Execution)
    thresholds: Thresholds = Field(default_factory=Thresholds)
    build: Build | None = None

    @model_serializer(mode="wrap")
    def _serialize(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Left out when not pinned: a document without it keeps the hash it had before.
        out: dict[str, Any] = handler(self)
        if out.get("build") is None:
            out.pop("build", None)
        return out

    def measurement(self) -> dict[str, Any]:
        """The part that defines the measurement: what must match for a folder to be resumed."""
        return measurement_of(self.model_dump(mode="json"))


RESUMABLE_SECTIONS: tuple[str, ...] = ("budget", "execution", "description")


def measurement_of(document: Mapping[str, Any]) -> dict[str, Any]:
    """A pre-registration's JSON form less the sections a resumed session may change (and less
    the ignored thresholds, so a folder whose document still has them resumes)."""
    out = {k: v for k, v in document.items() if k not in RESUMABLE_SECTIONS}
    thresholds = out.get("thresholds")
    if isinstance(thresholds, Mapping):
        out["thresholds"] = {k: v for k, v in thresholds.items() if k not in IGNORED_THRESHOLDS}
    return out


class Plan(BaseModel):
    """A validated pre-registration: arms x seeds x attempts, its hashes, horizon and resolution."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    preregistration: Preregistration
    preregistration_hash: str
    measurement_hash: str
    arms: tuple[str, ...]
    seeds: tuple[int, ...]
    seed_list_hash: str
    attempts: int
    episodes: int
    horizon: int
    resolution: Resolution
    source: str | None = None
    own_tools: ToolSet | None = None
    notes: tuple[str, ...] = ()

    @property
    def specs(self) -> tuple[ArmSpec, ...]:
        return tuple(parse_arm_id(a) for a in self.arms)

    def slots(self) -> list[Slot]:
        """Every planned (arm_id, seed, attempt), attempts numbered from 0, in run order."""
        return [Slot(a, s, k) for a in self.arms for s in self.seeds for k in range(self.attempts)]


# --------------------------------------------------------------------------- seeds


def derive_seeds(seed_string: str, tasks: int) -> list[int]:
    """The seed list a seed string gives (see the module docstring for the rule)."""
    if seed_string == RANGE_SEEDS:
        return list(range(tasks))
    out: list[int] = []
    seen: set[int] = set()
    index = 0
    while len(out) < tasks:
        hashed = hashlib.sha256(f"{seed_string}|{index}".encode()).digest()
        seed = int.from_bytes(hashed[:8], "big") % SEED_MODULUS
        if seed not in seen:
            seen.add(seed)
            out.append(seed)
        index += 1
    return out


def seed_list_hash(seeds: Sequence[int]) -> str:
    """sha256 of the seed list's canonical JSON."""
    return hashlib.sha256(canonical_json(list(seeds))).hexdigest()


# --------------------------------------------------------------------------- validation


def _where(loc: tuple[int | str, ...], section: str = "") -> str:
    parts = [section] if section else []
    for part in loc:
        if isinstance(part, str) and could_be_credential(part):
            part = "(a key not shown)"
        if isinstance(part, int):
            parts[-1:] = [f"{parts[-1]}[{part}]"] if parts else [f"[{part}]"]
        else:
            parts.append(part)
    return ".".join(parts) or "(document)"


def _pydantic_problems(exc: ValidationError, section: str) -> list[str]:
    out: list[str] = []
    for err in exc.errors():
        where = _where(tuple(err["loc"]), section)
        if err["type"] == "extra_forbidden":
            key = str(err["loc"][-1])
            if "key" in key.lower() and key != "api_key_env":
                out.append(
                    f"{where}: unknown key; an API key never goes in the file, name its "
                    "environment variable in model.api_key_env instead"
                )
            else:
                out.append(f"{where}: unknown key; remove it or check its spelling")
        elif err["type"] == "missing":
            out.append(f"{where}: required field is missing")
        else:
            out.append(f"{where}: {err['msg']} (got {shown(err.get('input'))})")
    return out


_SECTIONS: dict[str, type[BaseModel]] = {
    "model": Serving,
    "decoding": Decoding,
    "design": Design,
    "budget": Budget,
    "execution": Execution,
    "thresholds": Thresholds,
    "build": Build,
}
_OPTIONAL_SECTIONS = ("execution", "thresholds", "build")


def _parse_sections(doc: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Validate each section on its own, so one broken section does not hide another's problems."""
    problems: list[str] = []
    parsed: dict[str, Any] = {}
    known = {"format", "name", "description", *_SECTIONS}
    for key in doc:
        if key not in known:
            hint = (
                "an API key never goes in the file, name its variable in model.api_key_env"
                if "key" in str(key).lower()
                else f"known keys: {', '.join(sorted(known))}"
            )
            named = (
                f"(document): unknown key {shown(key)}"
                if not isinstance(key, str) or could_be_credential(key)
                else f"{key}: unknown key"
            )
            problems.append(f"{named}; {hint}")
    if doc.get("format") != FORMAT:
        problems.append(f"format: must be {FORMAT!r}, got {shown(doc.get('format'))}")
    name = doc.get("name")
    if not isinstance(name, str) or not name.strip():
        problems.append("name: required, a non-empty string naming the study")
    elif not _NAME.match(name) or ".." in name:
        problems.append(
            "name: not a safe name: it names the run folder runs/<name>-<time>, "
            "so use 1-100 letters, digits, '.', '_' and '-', starting with a letter or digit "
            "(no '/', '..', spaces or control characters), e.g. qwen3-8b-depth"
        )
    if "description" in doc and not isinstance(doc["description"], str):
        problems.append("description: must be a string")
    for section, model in _SECTIONS.items():
        raw = doc.get(section)
        if raw is None:
            if section in _OPTIONAL_SECTIONS:
                parsed[section] = None if section == "build" else model()
                continue
            problems.append(f"{section}: required section is missing")
            continue
        if not isinstance(raw, Mapping):
            problems.append(f"{section}: must be a mapping of fields, got {type(raw).__name__}")
            continue
        try:
            parsed[section] = model.model_validate(dict(raw))
        except ValidationError as exc:
            problems.extend(_pydantic_problems(exc, section))
    return parsed, problems


def _check_serving(serving: Serving) -> list[str]:
    problems: list[str] = []
    if not serving.model.strip():
        problems.append("model.model: required, the model id the endpoint serves")
    provider = REGISTRY[serving.provider]
    if provider.base_url_required and not serving.base_url:
        problems.append(
            f"model.base_url: required for provider {serving.provider}, "
            "e.g. http://127.0.0.1:8000/v1"
        )
    if provider.revision_required and not serving.revision:
        problems.append(
            f"model.revision: required for a self-served model ({serving.provider}): the weights' "
            "exact revision (a Hugging Face commit, or the Ollama model digest)"
        )
    if provider.key_required and not serving.api_key_env:
        problems.append(
            f"model.api_key_env: required for provider {serving.provider}, "
            f"e.g. {provider.key_example}"
        )
    if serving.provider == "reference":
        try:
            parse_model(serving.model)
        except PolicyError as exc:
            problems.append(f"model.model: {exc}")
    if serving.base_url is not None:
        problems.extend(_check_base_url(serving.base_url))
    if serving.base_url is not None and not serving.base_url.startswith(("http://", "https://")):
        problems.append(
            f"model.base_url: must start with http:// or https://, got {shown(serving.base_url)}"
        )
    elif serving.base_url is not None:
        problems.extend(url_form_problems(serving.base_url))
    if serving.api_key_env is not None:
        if _KEYLIKE.search(serving.api_key_env) or credential_shaped(serving.api_key_env):
            problems.append(
                "model.api_key_env: looks like a key, not a variable name; put the key in an "
                "environment variable and name the variable here (e.g. OPENAI_API_KEY)"
            )
        elif not _ENV_NAME.match(serving.api_key_env):
            problems.append(
                f"model.api_key_env: {shown(serving.api_key_env)} is not an environment "
                "variable name (letters, digits and _, not starting with a digit)"
            )
    if serving.rates is not None:
        for field in ("input", "cached_input", "output"):
            if getattr(serving.rates, field) < 0:
                problems.append(f"model.rates.{field}: a rate cannot be negative")
    return problems


def is_credential_name(name: str) -> bool:
    """A query, body or header name that carries a credential (api_key, token, authorization...)."""
    return bool(_CREDENTIAL_NAME.search(name.strip()))


MAX_URL_CHARS = 2048
_HOST_ASCII = re.compile(r"^[A-Za-z0-9._-]+$")
_HOST_NUMERIC = re.compile(r"^[0-9.]+$")


def _is_ipv4(host: str) -> bool:
    try:
        ipaddress.IPv4Address(host)
    except ValueError:
        return False
    return True


def url_form_problems(url: str, where: str = "model.base_url") -> list[str]:
    """Whether an HTTP client can use `url` (http or https, checked by the caller): one line, no
    whitespace or control character, a host, a port from 1 to 65535, an IPv6 host in brackets that
    is an IPv6 address. The problem names the part, never the URL (it may hold a key)."""
    if len(url) > MAX_URL_CHARS:
        return [f"{where}: {len(url):,} characters; a URL has at most {MAX_URL_CHARS:,}"]
    if not url.isprintable() or any(char.isspace() for char in url):
        return [
            f"{where}: holds whitespace or a control character (a line break, a tab, a NUL); "
            "write the URL on one line, without spaces"
        ]
    try:
        parts = urlsplit(url)
    except ValueError:  # an unclosed or misplaced bracket
        return [f"{where}: the host is not a valid [IPv6] address; write e.g. http://[::1]:8000/v1"]
    netloc = parts.netloc.rpartition("@")[2]  # userinfo is _check_base_url's to refuse
    bracketed = netloc.startswith("[")
    host, _, port_text = (
        (netloc[1:].partition("]")[0], "", netloc.partition("]")[2].removeprefix(":"))
        if bracketed
        else netloc.partition(":")
    )
    has_port = netloc.partition("]")[2] != "" if bracketed else ":" in netloc
    if not host:
        return [
            f"{where}: has no host; write it as http://HOST:PORT/v1, e.g. http://127.0.0.1:8000/v1"
        ]
    if bracketed:
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return [
                f"{where}: the host in brackets is not an IPv6 address; write e.g. "
                "http://[::1]:8000/v1"
            ]
    else:
        numeric = _HOST_NUMERIC.match(host) is not None
        if numeric and not _is_ipv4(host):
            return [
                f"{where}: the host is not an IPv4 address (four numbers 0-255, e.g. 127.0.0.1)"
            ]
        if not _HOST_ASCII.match(host) or ":" in port_text or "]" in netloc:
            return [
                f"{where}: the host is not a host name or an address; write it as "
                "http://HOST:PORT/v1 in ASCII (a name in another script as its xn-- form, an "
                "IPv6 address in brackets: http://[::1]:8000/v1)"
            ]
    if has_port:
        if not (port_text.isascii() and port_text.isdigit()) or (
            bracketed and not netloc.partition("]")[2].startswith(":")
        ):
            return [f"{where}: the port is not a number; give one from 1 to 65535, or none"]
        if len(port_text) > 5 or not 1 <= int(port_text) <= 65535:
            shown = f" {port_text}" if len(port_text) <= 6 else ""
            return [
                f"{where}: port{shown} is outside 1..65535; give the port the server listens on"
            ]
    return []


def _check_base_url(url: str) -> list[str]:
    """A base URL carries no credential: no user:password@ and no key-like query parameter. The
    problem names neither the key nor the URL as written, so the key is never echoed."""
    try:
        parts = urlsplit(url)
    except ValueError:  # not a URL at all (the URL checks say so): only a credential is named
        if credential_shaped(url) or credential_shaped(unquote(url)) or "@" in url:
            return [
                "model.base_url: holds a user name, password or a value shaped like a "
                "credential; remove it and put the key in an environment variable named by "
                "model.api_key_env"
            ]
        return []
    problems: list[str] = []
    shaped = [
        name
        for name, part in (
            ("host", parts.netloc.rpartition("@")[2]),
            ("path", parts.path),
            ("query", parts.query),
            ("fragment", parts.fragment),
        )
        if part and (credential_shaped(part) or credential_shaped(unquote(part)))
    ]
    if shaped:
        problems.append(
            f"model.base_url: its {' and '.join(shaped)} holds a value shaped like a credential "
            "(an API key or a token); remove it and put the key in an environment variable named "
            "by model.api_key_env"
        )
    if "@" in parts.netloc:
        problems.append(
            "model.base_url: holds a user name or password (user:key@host); remove it and put "
            "the key in an environment variable named by model.api_key_env"
        )
    names = sorted({k for k, _ in parse_qsl(parts.query, keep_blank_values=True)})
    bad = [k for k in names if is_credential_name(k)]
    if bad:
        problems.append(
            f"model.base_url: query parameter {', '.join(bad)} carries a credential; remove it "
            "and put the key in an environment variable named by model.api_key_env"
        )
    return problems


# model.api_key_env and model.base_url have their own checks, which say more about what is wrong
_OWN_CREDENTIAL_CHECKS = frozenset({"model.api_key_env", "model.base_url"})


def _credentials_in(doc: Mapping[str, Any]) -> list[str]:
    """A problem for every field of the document (any section, any depth, keys included) that
    holds a value shaped like a credential; the field is named, the value never."""
    return [
        f"{field}: holds a value shaped like a credential (an API key or a bearer token), which "
        "would be written into the run folder and the card; remove it and put the key in an "
        "environment variable named by model.api_key_env"
        for field in fields_where(dict(doc), credential_shaped)
        if field not in _OWN_CREDENTIAL_CHECKS
    ]


def _credential_keys(value: Any, where: str) -> list[str]:
    """Every key under `value` (nested mappings included) that names a credential."""
    out: list[str] = []
    if isinstance(value, Mapping):
        for key, nested in value.items():
            here = f"{where}.{key}"
            if is_credential_name(str(key)):
                out.append(here)
            else:
                out.extend(_credential_keys(nested, here))
    elif isinstance(value, list):
        for index, nested in enumerate(value):
            out.extend(_credential_keys(nested, f"{where}[{index}]"))
    return out


def _check_decoding(decoding: Decoding) -> list[str]:
    problems: list[str] = []
    for where in _credential_keys(decoding.extra_body, "decoding.extra_body"):
        problems.append(
            f"{where}: carries a credential, which would be written into the run folder and "
            "the card; remove it and name the key's environment variable in model.api_key_env"
        )
    if not 0.0 <= decoding.temperature <= 2.0:
        problems.append(f"decoding.temperature: must be in [0, 2], got {decoding.temperature}")
    if not 0.0 < decoding.top_p <= 1.0:
        problems.append(f"decoding.top_p: must be in (0, 1], got {decoding.top_p}")
    if decoding.max_completion_tokens < 1:
        problems.append(
            "decoding.max_completion_tokens: must be 1 or more, "
            f"got {decoding.max_completion_tokens}"
        )
    reserved = {
        "model",
        "messages",
        "tools",
        "temperature",
        "top_p",
        "reasoning_effort",
        "max_completion_tokens",
        "user",
        "stream",
    }
    for key in sorted(set(decoding.extra_body) & reserved):
        problems.append(f"decoding.extra_body.{key}: the runner sets it from the declared fields")
    if "seed" in decoding.extra_body:
        problems.append(
            "decoding.extra_body.seed: one seed would be sent on every attempt of every task; "
            "write decoding.seed: derived for a seed per attempt, or leave it out"
        )
    return problems


def planned_spec(spec: ArmSpec, split: Split, strictness: Strictness) -> ArmSpec:
    """An arm of design.arms as the plan holds it: under the design's split and strictness."""
    return ArmSpec(
        knob=spec.knob, level=spec.level, control=spec.control, split=split, strictness=strictness
    )


def _arm_specs(design: Design) -> tuple[list[ArmSpec], list[str]]:
    """Parse the arms, applying the design's split and strictness; one problem per bad arm."""
    problems: list[str] = []
    specs: list[ArmSpec] = []
    seen: dict[str, int] = {}
    if not design.arms:
        problems.append("design.arms: empty; list at least one arm id, e.g. depth:d3")
    for index, text in enumerate(design.arms):
        try:
            spec = parse_arm_id(text)
        except ArmError as exc:
            problems.append(f"design.arms[{index}]: {exc}")
            continue
        if "/" in text:
            if spec.split != design.split:
                problems.append(
                    f"design.arms[{index}]: {text} is split {spec.split} but design.split is "
                    f"{design.split}; drop the suffix, the split is declared once"
                )
                continue
            if spec.strictness != design.strictness:
                problems.append(
                    f"design.arms[{index}]: {text} is {spec.strictness} but design.strictness is "
                    f"{design.strictness}; drop the suffix, strictness is declared once"
                )
                continue
        spec = planned_spec(spec, design.split, design.strictness)
        aid = arm_id(spec)
        if aid in seen:
            problems.append(
                f"design.arms[{index}]: {text} repeats design.arms[{seen[aid]}]; list it once"
            )
            continue
        seen[aid] = index
        specs.append(spec)
    return specs, problems


def _key(spec: ArmSpec) -> tuple[str, int, int | None]:
    """An arm's identity apart from its split and strictness."""
    return (spec.knob, spec.level, spec.control)


def _check_controls(specs: Sequence[ArmSpec]) -> list[str]:
    """A knob swept over two or more levels needs every control arm of that knob."""
    problems: list[str] = []
    knobs: dict[str, set[int]] = {}
    present: set[tuple[str, int, int | None]] = set()
    for spec in specs:
        present.add(_key(spec))
        if spec.control is None:
            knobs.setdefault(spec.knob, set()).add(spec.level)
    for knob, lvls in knobs.items():
        if len(lvls) < 2:
            continue
        need = CONTROL_ARMS[knob]  # type: ignore[index]
        missing = [c for c in need if _key(parse_arm_id(c)) not in present]
        if missing:
            problems.append(
                f"design.arms: a sweep of {knob} needs its control arm(s) {', '.join(need)}; "
                f"missing {', '.join(missing)} (a knob swept without its control cannot be read)"
            )
    return problems


def _horizon(specs: Sequence[ArmSpec], slack: int) -> tuple[int, str]:
    deepest = max(specs, key=lambda spec: (spec.max_turns(slack), arm_id(spec)))
    return deepest.max_turns(slack), arm_id(deepest)


def _check_design(
    design: Design, specs: Sequence[ArmSpec], arms_ok: bool
) -> tuple[list[int] | None, list[str]]:
    problems: list[str] = []
    if design.tasks < 1:
        problems.append(f"design.tasks: must be 1 or more, got {design.tasks}")
    if design.attempts < 1:
        problems.append(f"design.attempts: must be 1 or more, got {design.attempts}")
    if design.turn_limit < 1:
        problems.append(f"design.turn_limit: must be 1 or more, got {design.turn_limit}")
    if design.replay is not None and design.replay.sample < 1:
        problems.append(
            f"design.replay.sample: must be 1 or more, got {design.replay.sample} (the slots "
            "replayed after the run); remove design.replay for no replay"
        )
    if design.replay is not None and design.tasks >= 1 and design.attempts >= 1:
        planned = len(design.arms) * design.tasks * design.attempts
        if design.replay.sample > planned:
            problems.append(
                f"design.replay.sample: {design.replay.sample} is more than the {planned} slots "
                "the design plans; replay at most that many"
            )
    seeds: list[int] | None = None
    if not design.seed_string.strip():
        problems.append(
            'design.seed_string: empty; the seeds are derived from it (or write "range")'
        )
    elif design.tasks >= 1:
        seeds = derive_seeds(design.seed_string, design.tasks)
        if design.seeds is not None and design.seeds != seeds:
            first = next(
                (i for i, (a, b) in enumerate(zip(design.seeds, seeds, strict=False)) if a != b),
                min(len(design.seeds), len(seeds)),
            )
            problems.append(
                f"design.seeds: not derivable from seed_string {shown(design.seed_string)} with tasks "
                f"{design.tasks} (first difference at index {first}); remove the list or fix it"
            )
        derived_hash = seed_list_hash(seeds)
        if design.seed_list_hash is not None and design.seed_list_hash != derived_hash:
            problems.append(
                f"design.seed_list_hash: {design.seed_list_hash} is not the hash of the derived "
                f"seed list ({derived_hash}); remove it or fix seed_string/tasks"
            )
    if design.slack < 0:
        problems.append(f"design.slack: must be 0 or more, got {design.slack}")
    elif specs and arms_ok:  # a horizon over a partial arm list would mislead
        horizon, deepest = _horizon(specs, design.slack)
        if design.horizon != horizon:
            problems.append(
                f"design.horizon: states {design.horizon} but the arms give {horizon} "
                f"({deepest}'s max_turns with slack {design.slack}); write horizon: {horizon}"
            )
        if design.turn_limit >= 1 and design.turn_limit < horizon:
            problems.append(
                f"design.turn_limit: {design.turn_limit} is below the horizon {horizon}: it would "
                f"cut {deepest} short of its turn budget; raise turn_limit or lower slack"
            )
    return seeds, problems


def _check_budget(budget: Budget, serving: Serving | None) -> list[str]:
    problems: list[str] = []
    if budget.tokens <= 0:
        problems.append(
            f"budget.tokens: {budget.tokens} stops the run before it starts; give a positive cap"
        )
    if budget.wall_clock_s <= 0:
        problems.append(
            f"budget.wall_clock_s: {budget.wall_clock_s:g} stops the run before it starts; "
            "give a positive number of seconds"
        )
    if budget.dollars is not None:
        if budget.dollars <= 0:
            problems.append(
                f"budget.dollars: {budget.dollars:g} stops the run before it starts; give a "
                "positive cap or leave it out"
            )
        elif serving is not None and serving.rates is None:
            problems.append(
                "budget.dollars: needs model.rates to compute spend; declare the rates or "
                "leave the dollar cap out"
            )
    return problems


def _check_execution(execution: Execution) -> list[str]:
    problems: list[str] = []
    if execution.concurrency < 1:
        problems.append(f"execution.concurrency: must be 1 or more, got {execution.concurrency}")
    if execution.max_retries < 0:
        problems.append(f"execution.max_retries: must be 0 or more, got {execution.max_retries}")
    for field in ("backoff_s", "backoff_max_s"):
        if getattr(execution, field) < 0:
            problems.append(f"execution.{field}: must be 0 or more")
    for field in ("request_timeout_s", "episode_timeout_s"):
        if getattr(execution, field) <= 0:
            problems.append(f"execution.{field}: must be positive")
    if execution.retry_after_max_s is not None and execution.retry_after_max_s < 0:
        problems.append("execution.retry_after_max_s: must be 0 or more (seconds)")
    return problems


def _check_thresholds(thresholds: Thresholds) -> list[str]:
    problems: list[str] = []
    if not 0.0 <= thresholds.saturation_low < thresholds.saturation_high <= 1.0:
        problems.append("thresholds: need 0 <= saturation_low < saturation_high <= 1")
    for field in ("resolution", "no_call_max", "instrument_max", "confidence"):
        if not 0.0 < getattr(thresholds, field) < 1.0:
            problems.append(
                f"thresholds.{field}: must be in (0, 1), got {getattr(thresholds, field)}"
            )
    return problems


def _ignored_notes(doc: Mapping[str, Any]) -> tuple[str, ...]:
    """One note naming the ignored thresholds a document still has (none when it has none)."""
    raw = doc.get("thresholds")
    found = [k for k in IGNORED_THRESHOLDS if isinstance(raw, Mapping) and k in raw]
    if not found:
        return ()
    return (
        ", ".join(f"thresholds.{k}" for k in found)
        + ": ignored (the intervals are closed-form and nothing resamples); left out of the "
        "plan and its hash, so the lines can be deleted",
    )


def _check_build(build: Build | None) -> list[str]:
    """A pinned hash must be well formed and this install's: another build is another
    instrument."""
    if build is None:
        return []
    problems = []
    ours = build_hashes()
    for name in BUILD_HASHES:
        pinned = getattr(build, name)
        if pinned is None:
            continue
        if not _HEX64.match(pinned):
            problems.append(f"build.{name}: {shown(pinned)} is not a 64-digit lowercase hex hash")
        elif pinned != ours[name]:
            problems.append(
                f"build.{name}: the pre-registration pins {pinned[:12]}, this install's is "
                f"{ours[name][:12]}: another build is a different instrument; run it with the "
                "build it pins, or pin this build's hashes (`poisson-tasks validate` prints them)"
            )
    if build.generator_hash is None and build.engine_hash is None:
        problems.append(
            "build: pins nothing; give generator_hash and/or engine_hash, or leave the section out"
        )
    return problems


def _own_tools(design: Design, source: str | None) -> tuple[ToolSet | None, list[str]]:
    """The tool file a design names, validated; one problem per line, each naming the field."""
    if design.own_tools is not None and design.harness != "native":
        return None, [
            f"design.own_tools: the {design.harness} harness builds its own tool blocks and does "
            "not take your tools; use harness native (the default) for a card on your own tools"
        ]
    if design.own_tools is None:
        if design.own_tools_sha256 is not None:
            return None, ["design.own_tools_sha256: given without design.own_tools; remove it"]
        return None, []
    base = Path(source).parent if source else Path.cwd()
    path = Path(design.own_tools)
    try:
        tools = load_tool_file(
            path if path.is_absolute() else base / path, shown_as=design.own_tools
        )
    except ToolFileError as exc:
        return None, [f"design.own_tools: {x}" for x in exc.problems]
    if design.own_tools_sha256 is not None and design.own_tools_sha256 != tools.sha256:
        return None, [
            f"design.own_tools_sha256: {design.own_tools_sha256} is not the SHA-256 of "
            f"{design.own_tools} ({tools.sha256}); the file changed: fix the hash or restore it"
        ]
    return tools, []


def _reads(plan: Plan) -> list[str]:
    """What the design can and cannot resolve, in words, from the resolution figures above."""
    resolution = plan.resolution
    levels: dict[str, set[str]] = {}
    for arm in plan.arms:
        spec = parse_arm_id(arm)
        if not spec.is_control:
            levels.setdefault(spec.knob, set()).add(arm)
    out = []
    if not any(len(arms) > 1 for arms in levels.values()):
        out.append(
            "no knob has two levels here: nothing is compared, and the card gives each arm's rates "
            "with their intervals only"
        )
    else:
        out.append(reads_line(resolution))
    if plan.attempts == 1:
        out.append(
            "one attempt per task: pass@k and pass^k beyond k = 1 read n/a, and whether a task's "
            "attempts agree with each other is not seen"
        )
    return out


# The fields whose schema type is a date: a Python caller may give a datetime.date there (its JSON
# form is the ISO string the schema reads back); anywhere else a date is not a JSON value.
DATE_FIELDS = frozenset({"model.rates.as_of"})


def _walk(value: Any, where: str, depth: int = 0) -> list[str]:
    """Problems anywhere in the raw document: a value JSON cannot hold (bytes, a set, a date outside
    DATE_FIELDS: what is registered is what is stored, hashed and sent, as JSON), non-finite floats, over-wide
    integers, deep nesting, oversized lists and mappings, non-string keys (extra_body included,
    since it is sent and hashed verbatim)."""
    if depth > MAX_DEPTH:
        return [f"{where}: nested more than {MAX_DEPTH} levels deep"]
    if value is None or isinstance(value, bool | str):
        return []
    if isinstance(value, int):
        if abs(value) > MAX_INT:
            return [
                f"{where}: an integer of {value.bit_length()} bits is too wide; integers are "
                f"at most 2^53 ({MAX_INT:,}) in size"
            ]
        return []
    if isinstance(value, float):
        return [] if math.isfinite(value) else [f"{where}: {value} is not a finite number"]
    if isinstance(value, Mapping | list | tuple) and len(value) > MAX_ITEMS:
        return [f"{where or '(document)'}: {len(value):,} items; at most {MAX_ITEMS:,}"]
    if isinstance(value, Mapping):
        out: list[str] = []
        for key, item in value.items():
            if not isinstance(key, str):
                out.append(f"{where}.{key!s:.40}: keys must be strings")
                continue
            out += _walk(item, f"{where}.{key}" if where else key, depth + 1)
        return out
    if isinstance(value, list | tuple):
        out = []
        for index, item in enumerate(value):
            out += _walk(item, f"{where}[{index}]", depth + 1)
            if len(out) > 20:
                break
        return out
    if where in DATE_FIELDS and type(value) is date:  # e.g. yaml.safe_load's as_of, from Python
        return []
    return [
        f"{where or '(document)'}: a {type(value).__name__} is not a JSON value; a "
        "pre-registration holds plain JSON values only (strings, numbers, true, false, null, "
        "lists and mappings): write it as a string or a number"
    ]


def _too_big(where: str, value: float, limit: float, what: str = "") -> list[str]:
    if value > limit:
        return [f"{where}: {value:,} is above the limit of {limit:,}{what}"]
    return []


def _check_bounds(parsed: Mapping[str, Any]) -> list[str]:
    """Upper bounds on every size; the limit is in each message."""
    problems: list[str] = []
    design: Design | None = parsed.get("design")
    if design is not None:
        problems += _too_big("design.tasks", design.tasks, MAX_TASKS)
        problems += _too_big("design.attempts", design.attempts, MAX_ATTEMPTS)
        problems += _too_big("design.arms", len(design.arms), MAX_ARMS, " arms")
        for field in ("turn_limit", "slack", "horizon"):
            problems += _too_big(f"design.{field}", getattr(design, field), MAX_TURNS)
        if design.seeds is not None:
            problems += _too_big("design.seeds", len(design.seeds), MAX_TASKS, " seeds")
            bad = [x for x in design.seeds if not 0 <= x < SEED_MODULUS]
            if bad:
                problems.append(f"design.seeds: {bad[0]} is outside 0 to {SEED_MODULUS - 1}")
        if len(design.seed_string) > MAX_SEED_STRING:
            problems.append(
                f"design.seed_string: {len(design.seed_string):,} characters; at most "
                f"{MAX_SEED_STRING:,}"
            )
        if not problems and design.tasks >= 1 and design.attempts >= 1:
            episodes = len(design.arms) * design.tasks * design.attempts
            problems += _too_big(
                "design", episodes, MAX_EPISODES, " episodes (arms x tasks x attempts)"
            )
    decoding: Decoding | None = parsed.get("decoding")
    if decoding is not None:
        problems += _too_big(
            "decoding.max_completion_tokens", decoding.max_completion_tokens, MAX_COMPLETION_TOKENS
        )
    execution: Execution | None = parsed.get("execution")
    if execution is not None:
        problems += _too_big("execution.concurrency", execution.concurrency, MAX_CONCURRENCY)
        problems += _too_big("execution.max_retries", execution.max_retries, MAX_RETRIES)
        for field in ("backoff_s", "backoff_max_s", "request_timeout_s", "episode_timeout_s"):
            problems += _too_big(
                f"execution.{field}", getattr(execution, field), MAX_SECONDS, " seconds"
            )
    budget: Budget | None = parsed.get("budget")
    if budget is not None:
        problems += _too_big("budget.wall_clock_s", budget.wall_clock_s, MAX_SECONDS, " seconds")
    thresholds: Thresholds | None = parsed.get("thresholds")
    if thresholds is not None and 0.0 < thresholds.resolution < MIN_RESOLUTION:
        problems.append(
            f"thresholds.resolution: {thresholds.resolution:g} is below the finest resolution "
            f"{MIN_RESOLUTION} (it would need more than {MAX_TASKS:,} tasks)"
        )
    return problems


def validate_preregistration(
    doc: Mapping[str, Any] | Preregistration, *, source: str | None = None
) -> Plan:
    """Validate a pre-registration; raise PreregistrationError with one message per problem."""
    if isinstance(doc, Preregistration):
        doc = doc.model_dump(mode="json")  # the form it is stored, hashed and sent in
    if not isinstance(doc, Mapping):
        raise PreregistrationError(
            [f"(document): must be a mapping of sections, got {type(doc).__name__}"]
        )
    if doc.get("format") == PROBE_FORMAT:  # the other kind of file: say so, not what it lacks
        file = shlex.quote(source) if source else "FILE"
        raise PreregistrationError(
            [
                f"{source or '(document)'}: a probe registration (format: {PROBE_FORMAT}), not a "
                f"pre-registration: run it with poisson-tasks probe {file} --out DIR"
            ]
        )
    problems = _walk(doc, "")
    if problems:  # nothing below can be trusted with NaN, 2^64 or a nesting bomb in it
        raise PreregistrationError(problems[:20])
    shaped = _credentials_in(doc)
    parsed, problems = _parse_sections(doc)
    problems = shaped + problems
    too_big = _check_bounds(parsed)
    if too_big:  # sizes first: the checks below derive seeds and horizons from them
        raise PreregistrationError(problems + too_big)
    serving: Serving | None = parsed.get("model")
    if serving is not None:
        problems += _check_serving(serving)
    if "decoding" in parsed:
        problems += _check_decoding(parsed["decoding"])
    specs: list[ArmSpec] = []
    seeds: list[int] | None = None
    own_tools: ToolSet | None = None
    if "design" in parsed:
        design: Design = parsed["design"]
        specs, arm_problems = _arm_specs(design)
        problems += arm_problems
        problems += _check_controls(specs)
        seeds, design_problems = _check_design(design, specs, not arm_problems)
        problems += design_problems
        own_tools, tool_problems = _own_tools(design, source)
        problems += tool_problems
    if "budget" in parsed:
        problems += _check_budget(parsed["budget"], serving)
    if "execution" in parsed:
        problems += _check_execution(parsed["execution"])
    if "thresholds" in parsed:
        problems += _check_thresholds(parsed["thresholds"])
    problems += _check_build(parsed.get("build"))
    if problems:
        raise PreregistrationError(problems)
    assert seeds is not None
    if own_tools is not None:  # the file's hash is part of the measurement
        parsed["design"] = parsed["design"].model_copy(
            update={"own_tools_sha256": own_tools.sha256}
        )
    prereg = Preregistration.model_validate(
        {**{k: doc[k] for k in ("format", "name", "description") if k in doc}, **parsed}
    )
    design = prereg.design
    horizon, _ = _horizon(specs, design.slack)
    arms = tuple(arm_id(s) for s in specs)
    return Plan(
        preregistration=prereg,
        preregistration_hash=digest(prereg.model_dump(mode="json")),
        measurement_hash=digest(prereg.measurement()),
        arms=arms,
        seeds=tuple(seeds),
        seed_list_hash=seed_list_hash(seeds),
        attempts=design.attempts,
        episodes=len(arms) * len(seeds) * design.attempts,
        horizon=horizon,
        resolution=resolution_of(design.tasks, design.attempts, prereg.thresholds.resolution),
        source=source,
        own_tools=own_tools,
        notes=_ignored_notes(doc),
    )


def read_yaml(text: str, where: str) -> Any:
    """Parse YAML into plain JSON values, within YAML_LIMITS (yamlfile.load_json_yaml); any
    failure is one PreregistrationError line."""
    try:
        return load_json_yaml(text, YAML_LIMITS)
    except YamlRefused as exc:
        raise PreregistrationError([f"{where}: {exc.line()}"]) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        what = " ".join(str(exc.problem or exc.context or "unreadable").split())
        raise PreregistrationError([f"{where}: not valid YAML: {what[:300]}{at}"]) from None
    except yaml.YAMLError as exc:
        first = " ".join(str(exc).split())
        raise PreregistrationError([f"{where}: not valid YAML: {first[:300]}"]) from None
    except RecursionError:
        raise PreregistrationError(
            [f"{where}: nested too deeply to read (at most {MAX_DEPTH} levels are allowed)"]
        ) from None
    except ValueError as exc:  # e.g. an integer of more than 4,300 digits
        first = " ".join(str(exc).split())
        raise PreregistrationError([f"{where}: a value cannot be read: {first[:200]}"]) from None


def read_yaml_file(file_path: Path, what: str) -> bytes:
    """The bytes of a YAML file a user names: a regular file (a directory, a FIFO or a device is
    refused at once) of at most MAX_FILE_BYTES; else one PreregistrationError line."""
    try:
        return read_limited(file_path, MAX_FILE_BYTES)
    except TooLarge:
        raise PreregistrationError(
            [f"{file_path}: larger than {MAX_FILE_BYTES:,} bytes (1 MiB); {what} is one page"]
        ) from None
    except NotARegularFile as exc:
        raise PreregistrationError(
            [f"{file_path}: {exc.strerror}; give the path of {what}'s YAML file"]
        ) from None
    except OSError as exc:
        problem = f"{file_path}: cannot be read ({exc.strerror}); check the path"
        raise PreregistrationError([problem]) from None


def load_preregistration(path: str | Path, *, base_url: str | None = None) -> Plan:
    """Read a pre-registration file (UTF-8, at most 1 MiB, strict YAML) and validate it.

    `base_url` (run --base-url) sets model.base_url before validation, for a server whose port is
    only known when it starts; the run records the document with the address it used.
    """
    file_path = Path(path)
    data = read_yaml_file(file_path, "a pre-registration")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PreregistrationError(
            [
                f"{file_path}: not UTF-8 text "
                f"(byte {exc.start} is {data[exc.start : exc.start + 1]!r}); save the file as UTF-8"
            ]
        ) from None
    if "\x00" in text:
        raise PreregistrationError(
            [f"{file_path}: holds NUL bytes; a pre-registration is YAML text"]
        )
    doc = read_yaml(text, str(file_path))
    if not isinstance(doc, Mapping):
        raise PreregistrationError(
            [f"{file_path}: must be a YAML mapping of sections (format, model ...)"]
        )
    if base_url is not None:
        model = doc.get("model")
        doc = {
            **doc,
            "model": {**model, "base_url": base_url} if isinstance(model, dict) else model,
        }
    return validate_preregistration(doc, source=str(file_path))


def describe_plan(plan: Plan) -> str:
    """The plan as validate prints it: arms, seeds and hash, episodes, horizon, resolution."""
    pr = plan.preregistration
    resolution = plan.resolution
    lines = [
        f"pre-registration {pr.name} ({terminal(plan.source or 'in memory')}): valid",
        f"  model        {pr.model.provider} {terminal(pr.model.model)}"
        + (f" @ {terminal(pr.model.revision)}" if pr.model.revision else ""),
        f"  arms         {len(plan.arms)}: {', '.join(plan.arms)}",
        f"  seeds        {len(plan.seeds)} from {terminal(repr(pr.design.seed_string))}, "
        f"seed_list_hash {plan.seed_list_hash}",
        f"  episodes     {plan.episodes} ({counted(len(plan.arms), 'arm')} x "
        f"{counted(len(plan.seeds), 'task')} x {counted(plan.attempts, 'attempt')})",
        f"  horizon      {plan.horizon} (slack {pr.design.slack}); turn limit "
        f"{pr.design.turn_limit}",
        f"  resolution   {resolution_line(resolution)}",
    ]
    warning = power_warning(resolution)
    if warning is not None:
        lines.append(f"  warning: {warning}")
    lines += [f"  reads        {line}" for line in _reads(plan)]
    lines.append(
        f"  seed         {validate_seed_line(pr.model.provider, pr.decoding.seed == 'derived')}"
    )
    budget = pr.budget
    lines.append(
        f"  budget       {budget.tokens:,} tokens, {budget.wall_clock_s:g} s per session, "
        + (f"${budget.dollars:g}" if budget.dollars is not None else "no dollar cap")
        + ("" if pr.model.rates else " (no rates declared: dollars are not computed)")
    )
    if plan.own_tools is not None:
        lines.append(
            f"  own tools    {len(plan.own_tools.tools)} from {terminal(plan.own_tools.source)} "
            "(sha256 "
            f"{plan.own_tools.sha256[:16]}), in place of the read tools"
        )
    lines.append(f"  concurrency  {pr.execution.concurrency}")
    lines.append(f"  hash         {plan.preregistration_hash}")
    pinned = pr.build is not None
    lines.append(
        "  build        "
        + ", ".join(f"{k} {v}" for k, v in build_hashes().items())
        + (
            " (pinned by this pre-registration)"
            if pinned
            else " (this install's; pin them under `build:` to refuse another build)"
        )
    )
    lines += [f"  note         {note}" for note in plan.notes]
    return "\n".join(lines)
