"""What a base URL may hold: a form an HTTP client can use, and no credential (no user:password@,
no key-shaped part or credential-named query parameter); no message echoes the URL."""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import parse_qsl, unquote, urlsplit

from poisson_tasks.credentials import (
    credential_shaped,
)

# Names that carry a credential, in a query string, a request body or a header.
_CREDENTIAL_NAME = re.compile(
    r"(^|[_\-.])(api[_\-]?keys?|apikeys?|key|token|access[_\-]?tokens?|secrets?|passwords?"
    r"|passwd|pass|pwd|auth|authorization|bearer|credentials?|sig|signature|cookies?"
    r"|session[_\-]?(id|token|key))$",
    re.IGNORECASE,
)


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


def check_base_url(url: str) -> list[str]:
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
