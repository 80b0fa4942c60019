"""The reference endpoint's routes: what each request gets back, independent of the HTTP server.

POST /v1/chat/completions runs the policy the `model` names; GET /v1/models lists the policies;
GET /health and GET /version report the package version and the policies (open without a key, as
vLLM's are). With an API key set, every /v1/ route needs `Authorization: Bearer <key>`.
"""

from __future__ import annotations

import hmac
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from poisson_tasks import __version__
from poisson_tasks.errors import PolicyError
from poisson_tasks.policycatalogue import (
    POLICIES,
    POLICY_NAMES,
    PolicySpec,
    param_table,
    parse_model,
)
from poisson_tasks.reference.flaky import AttemptCounter, flaky_fault
from poisson_tasks.reference.policies import ChatRequest, draw, respond, top_arm_request
from poisson_tasks.reference.ratelimit import Limiter, RateLimit
from poisson_tasks.reference.wire import (
    CREATED,
    SERVER_NAME,
    body_digest,
    completion,
    error_body,
    stream_body,
)

CHAT_PATH = "/v1/chat/completions"
_SSE = (("content-type", "text/event-stream"), ("cache-control", "no-cache"))
ATTEMPT_HEADER = "x-poisson-attempt"


@dataclass(frozen=True, slots=True)
class Response:
    """An HTTP answer: status, JSON body, extra headers, and a delay before it is sent."""

    status: int
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()
    delay: float = 0.0


def _error(
    status: int,
    message: str,
    kind: str,
    code: str | None = None,
    param: str | None = None,
    headers: tuple[tuple[str, str], ...] = (),
) -> Response:
    return Response(status, error_body(message, kind, code, param), headers)


def _bad(message: str, param: str | None = None) -> Response:
    return _error(400, message, "invalid_request_error", None, param)


def model_card(name: str, defaults: Mapping[str, float]) -> dict[str, Any]:
    """A /v1/models entry: the policy as a model, with its parameters' effective defaults."""
    return {
        "id": name,
        "object": "model",
        "created": CREATED,
        "owned_by": SERVER_NAME,
        "description": POLICIES[name][0],
        "parameters": {k: defaults.get(k, p.default) for k, p in sorted(param_table(name).items())},
    }


class ReferenceApp:
    """Routes requests to the reference policies; holds the API key, the policy defaults, the
    flaky attempt counter (so a retried request gets a fresh fault draw) and, when started with a
    rate limit, its buckets (reference/ratelimit.py): the only state."""

    def __init__(
        self,
        api_key: str | None = None,
        policy_defaults: Mapping[str, Mapping[str, float]] | None = None,
        rate_limit: RateLimit | None = None,
    ) -> None:
        self._key = api_key.encode() if api_key else None
        self._defaults = {k: dict(v) for k, v in (policy_defaults or {}).items()}
        self._attempts = AttemptCounter()
        self._limiter = Limiter(rate_limit) if rate_limit is not None else None
        self._about = orjson.dumps(
            {
                "status": "ok",
                "server": SERVER_NAME,
                "version": __version__,
                "policies": list(POLICY_NAMES),
            }
        )
        self._models = orjson.dumps(
            {
                "object": "list",
                "data": [model_card(n, self._defaults.get(n, {})) for n in POLICY_NAMES],
            }
        )

    def _authorized(self, headers: Mapping[str, str]) -> bool:
        if self._key is None:
            return True
        given = headers.get("authorization", "")
        scheme, _, token = given.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), self._key)

    def handle(self, method: str, path: str, headers: Mapping[str, str], body: bytes) -> Response:
        """The response to one request (headers' names lower-case)."""
        if path in ("/health", "/version"):
            return Response(200, self._about) if method == "GET" else _not_allowed(method, path)
        if not path.startswith("/v1/"):
            return _error(
                404, f"no route {path}; the API is under /v1/", "invalid_request_error", "not_found"
            )
        if not self._authorized(headers):
            return _error(
                401,
                "Incorrect API key provided: the reference endpoint was started "
                "with an API key; send it as 'Authorization: Bearer <key>'.",
                "invalid_request_error",
                "invalid_api_key",
            )
        if path == CHAT_PATH:
            if method != "POST":
                return _not_allowed(method, path)
            return self._chat(body, headers.get(ATTEMPT_HEADER))
        if path == "/v1/models":
            return Response(200, self._models) if method == "GET" else _not_allowed(method, path)
        if path.startswith("/v1/models/") and method == "GET":
            name = path.removeprefix("/v1/models/")
            if name in POLICIES:
                return Response(200, orjson.dumps(model_card(name, self._defaults.get(name, {}))))
            return _error(
                404,
                f"model {name!r} does not exist; policies: {', '.join(POLICY_NAMES)}",
                "invalid_request_error",
                "model_not_found",
                "model",
            )
        return _error(404, f"no route {method} {path}", "invalid_request_error", "not_found")

    def _chat(self, body: bytes, attempt_tag: str | None = None) -> Response:
        request = _chat_request(body)
        if isinstance(request, Response):
            return request
        model = request["model"]
        try:
            spec = parse_model(model, self._defaults)
        except PolicyError as exc:
            known = model.partition("?")[0] in POLICIES
            return _error(
                400 if known else 404,
                str(exc),
                "invalid_request_error",
                "invalid_parameter" if known else "model_not_found",
                "model",
            )
        digest = body_digest(body)
        fault = self._injected_fault(spec, request, digest, attempt_tag)
        if isinstance(fault, Response):
            return fault
        return self._answer(spec, request, digest, delay=fault)

    def _injected_fault(
        self, spec: PolicySpec, request: dict[str, Any], digest: str, attempt_tag: str | None
    ) -> Response | float:
        """The error a faulty policy deals this request, or the delay it adds (0.0 for none)."""
        if spec.name == "graded" and spec.get("p_top_500") > 0:
            user_tag = request.get("user")
            if (
                isinstance(user_tag, str)
                and top_arm_request(user_tag)
                and draw("graded-500", digest, self._attempts.next(digest)) < spec.get("p_top_500")
            ):
                return _error(
                    500, "injected server error (reference policy graded)", "server_error"
                )
        if spec.name != "flaky":
            return 0.0
        # A client that numbers its attempts (the runner's X-Poisson-Attempt: session.retry)
        # gets one draw per numbered attempt, so a resumed session is not dealt the faults the
        # failed one met; without the header, arrivals of the same bytes are counted.
        key = digest if attempt_tag is None else f"{digest}|{attempt_tag}"
        fault = flaky_fault(key, self._attempts.next(key), spec)
        if fault == "http_500":
            return _error(500, "injected server error (reference policy flaky)", "server_error")
        if fault == "http_429":
            wait = spec.get("retry_after")
            headers = (
                ("retry-after", str(math.ceil(wait))),
                ("retry-after-ms", f"{wait * 1000:g}"),
            )
            return _error(
                429,
                "injected rate limit (reference policy flaky)",
                "requests",
                "rate_limit_exceeded",
                headers=headers,
            )
        return spec.get("slow_s") if fault == "slow" else 0.0

    def _answer(
        self, spec: PolicySpec, request: dict[str, Any], digest: str, delay: float
    ) -> Response:
        """The policy's completion, charged against the rate limit, as JSON or a stream."""
        tools = request.get("tools")
        seed, user = request.get("seed"), request.get("user")
        tools_json = orjson.dumps(tools, option=orjson.OPT_SORT_KEYS).decode() if tools else ""
        chat = ChatRequest(
            messages=request["messages"],
            tools_json=tools_json,
            seed=seed if isinstance(seed, int) and not isinstance(seed, bool) else None,
            user=user if isinstance(user, str) else None,
        )
        try:
            reply = respond(spec, chat)
            out = completion(spec, request, reply, digest, tools_json)
        except (
            Exception
        ) as exc:  # a policy bug must answer as a server error, not drop the connection
            return _error(
                500,
                f"reference policy {spec.name} failed: {type(exc).__name__}: {exc}",
                "server_error",
            )
        limited: tuple[tuple[str, str], ...] = ()
        if self._limiter is not None:  # charged the tokens the answer reports, or refused
            admission = self._limiter.admit(out["usage"]["total_tokens"])
            if not admission.admitted:
                return _error(
                    429,
                    admission.message,
                    admission.short or "requests",
                    "rate_limit_exceeded",
                    headers=admission.headers,
                )
            limited = admission.headers
        if request.get("stream"):
            options = request.get("stream_options")
            usage = isinstance(options, dict) and options.get("include_usage") is True
            return Response(200, stream_body(out, usage), _SSE + limited, delay=delay)
        return Response(200, orjson.dumps(out), limited, delay=delay)


def _chat_request(body: bytes) -> dict[str, Any] | Response:
    """The request body as a JSON object of the shape the endpoint answers, or the 400 saying why not."""
    try:
        request = orjson.loads(body)
    except orjson.JSONDecodeError:
        return _bad("the request body is not valid JSON")
    if not isinstance(request, dict):
        return _bad("the request body must be a JSON object")
    model, messages, tools = request.get("model"), request.get("messages"), request.get("tools")
    if not isinstance(model, str):
        return _bad("'model' is required: a reference policy name", "model")
    if (
        not isinstance(messages, list)
        or not messages
        or not all(isinstance(m, dict) for m in messages)
    ):
        return _bad("'messages' must be a non-empty list of message objects", "messages")
    if tools is not None and not isinstance(tools, list):
        return _bad("'tools' must be a list of tool objects", "tools")
    if request.get("stream") not in (None, False, True):
        return _bad("'stream' must be true or false", "stream")
    if request.get("n") not in (None, 1):
        return _bad("the reference endpoint returns one choice; send n=1", "n")
    return request


def _not_allowed(method: str, path: str) -> Response:
    return _error(
        405,
        f"method {method} is not allowed on {path}",
        "invalid_request_error",
        "method_not_allowed",
    )
