"""Credentials: what a key looks like, how the run's key is redacted, and how a message shows a value.

Three uses, one set of definitions (docs/commands.md, "Keys: what is redacted and what is refused"):

- `redact` and `scrub` remove the run's API key, every 8-character piece of it, and anything shaped
  like a credential from text and JSON-like values, also where JSON escapes spell them (\u0041,
  at any depth of JSON inside JSON: a tool call's arguments). The runner applies them where
  server data enters (every response body and header, every serving-facts answer, every message
  built from them), so nothing a server sends can carry the key into a file or onto the terminal.
- `credential_shaped` says whether a string holds something shaped like a credential (the common
  key prefixes, AWS key ids, bearer tokens, JWTs); a pre-registration holding one anywhere is
  refused at validate time, naming the field and never the value.
- `shown` is how an error message quotes a value a user wrote: a string that could be a
  credential, or anything that is not a plain scalar, is described rather than repeated; and
  `masked` hides every credential-shaped run inside a message already built (the CLI passes every
  `error:` line through it). Whatever their shape, the values of the environment's secrets
  (`environment_secrets`: variables named KEY, TOKEN, ...) are described by `shown` and redacted
  from every line the CLI prints about an error (`without_environment_secrets`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

import orjson

__all__ = [
    "HIDDEN",
    "REDACTED",
    "REDACTED_SHAPE",
    "SECRET_PIECE",
    "could_be_credential",
    "credential_shaped",
    "environment_secrets",
    "fields_where",
    "holds_secret",
    "masked",
    "redact",
    "scrub",
    "secret_pieces",
    "shown",
    "unescaped",
    "without_environment_secrets",
]

SECRET_PIECE = 8  # any run of this many characters of the key is redacted
REDACTED = "[redacted]"
HIDDEN = "[hidden]"

# The shapes of credentials as their issuers print them; each starts with a fixed prefix (listed
# in _PREFIXES, which the fast path looks for before any regex runs).
_SHAPES = (
    r"\b(?:sk|rk)-[A-Za-z0-9_\-]{16,}",  # OpenAI (sk-, sk-proj-, sk-svcacct-), Anthropic (sk-ant-)
    r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{8,}",  # Stripe
    r"\bhf_[A-Za-z0-9]{16,}",  # Hugging Face
    r"\bAIza[0-9A-Za-z_\-]{20,}",  # Google API keys
    r"\bgh[pousr]_[A-Za-z0-9]{20,}",  # GitHub tokens
    r"\bgithub_pat_[A-Za-z0-9_]{20,}",
    r"\bglpat-[A-Za-z0-9_\-]{16,}",  # GitLab
    r"\bxox[abposr]-[A-Za-z0-9\-]{8,}",  # Slack
    r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",  # AWS access key ids
    r"\bnpm_[A-Za-z0-9]{30,}",
    r"\bpypi-[A-Za-z0-9_\-]{30,}",
    r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*",  # a JWT
    r"\b[Bb]earer\s+(?=[A-Za-z0-9._~+/\-]*[0-9])[A-Za-z0-9._~+/\-]{8,}=*",  # an Authorization value
)
_PREFIXES = (
    "sk-",
    "rk-",
    "sk_",
    "rk_",
    "pk_",
    "hf_",
    "AIza",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "xox",
    "AKIA",
    "ASIA",
    "npm_",
    "pypi-",
    "eyJ",
    "earer",
)
_SHAPE = re.compile("|".join(_SHAPES))
# Redaction also takes the short forms a provider's error message prints (sk-abc***xyz1, key-...).
REDACTED_SHAPE = re.compile(r"\b(?:sk|key|rk)-[A-Za-z0-9_\-*]{4,}|" + "|".join(_SHAPES))
_REDACTED_PREFIXES = (*_PREFIXES, "key-")
_REDACTED_PREFIX_BYTES = tuple(prefix.encode() for prefix in _REDACTED_PREFIXES)
_JSON_ESCAPED = re.compile(r'["\\\x00-\x1f]')  # what a JSON string writes as an escape
# A bare token a key could be: 20 or more letters, digits and - _ . ~ + =, with a letter and a
# digit, wherever it stands in a longer text (user:TOKEN@host, a path segment, a list's repr).
_TOKEN_RUN = re.compile(r"[A-Za-z0-9_\-.~+=]{20,}")
_TOKEN = re.compile(r"(?=.*[A-Za-z])(?=.*[0-9])")
_SHOWN_WIDTH = 60


def credential_shaped(text: str) -> bool:
    """Whether `text` holds something shaped like a credential (a known key prefix, an AWS key id,
    a JWT, a bearer token)."""
    return any(prefix in text for prefix in _PREFIXES) and _SHAPE.search(text) is not None


def masked(text: str) -> str:
    """`text` with every credential-shaped run replaced by [hidden] (for messages)."""
    if not any(prefix in text for prefix in _PREFIXES):
        return text
    return _SHAPE.sub(HIDDEN, text)


def could_be_credential(text: str) -> bool:
    """Whether a message should not repeat `text`: credential-shaped, or a bare token of 20 or
    more characters mixing letters and digits (a key without a known prefix)."""
    return credential_shaped(text) or any(
        _TOKEN.match(run) is not None for run in _TOKEN_RUN.findall(text)
    )


def _shown_url(text: str) -> str:
    """A URL with its user name and password, query values and fragment hidden."""
    try:
        parts = urlsplit(text)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:
        return f"a URL of {len(text)} characters (not shown)"
    userinfo = "***@" if "@" in parts.netloc else ""
    query = "&".join(
        f"{pair.split('=', 1)[0]}=***" if "=" in pair else "***"
        for pair in parts.query.split("&")
        if pair
    )
    path = "/".join(
        "***" if could_be_credential(segment) else segment for segment in parts.path.split("/")
    )
    out = f"{parts.scheme}://{userinfo}{host}{port}{path}"
    out += f"?{query}" if query else ""
    out += "#***" if parts.fragment else ""
    return repr(masked(out))


def shown(value: Any) -> str:
    """`value` as an error message may quote it: a plain scalar as its repr (clipped); a string that
    could be a credential, and any list or mapping, described without its contents; a URL with
    its credentials' places hidden."""
    if value is None or isinstance(value, bool | int | float):
        return repr(value)
    if isinstance(value, str):
        if "://" in value:
            return _shown_url(value)
        if could_be_credential(value) or any(
            holds_secret(value, secret) or secret in value for secret in environment_secrets()
        ):
            return f"a value of {len(value)} characters that could be a credential (not shown)"
        text = repr(value)
        return text if len(text) <= _SHOWN_WIDTH else text[: _SHOWN_WIDTH - 1] + "…"
    if isinstance(value, list | tuple):
        return f"a list of {len(value)} item(s) (not shown)"
    if isinstance(value, dict):
        return f"a mapping of {len(value)} key(s) (not shown)"
    return f"a {type(value).__name__} (not shown)"


def fields_where(value: Any, holds: Callable[[str], bool], where: str = "") -> list[str]:
    """The path of every string under `value` (mapping keys included, percent-decoded as well as
    written) for which `holds` is true; a mapping key that holds is named by its parent, so the
    path never repeats it."""
    out: list[str] = []
    if isinstance(value, str):
        if holds(value) or ("%" in value and holds(unquote(value))):
            out.append(where or "(document)")
    elif isinstance(value, dict):
        for key, nested in value.items():
            if isinstance(key, str) and (holds(key) or ("%" in key and holds(unquote(key)))):
                out.append(f"{where or '(document)'} (one of its keys)")
                continue
            out += fields_where(nested, holds, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list | tuple):
        for index, nested in enumerate(value):
            out += fields_where(nested, holds, f"{where}[{index}]")
    return out


def secret_pieces(secret: str) -> frozenset[str]:
    """Every run of SECRET_PIECE characters of the key (the whole key when it is shorter)."""
    piece_length = min(SECRET_PIECE, len(secret))
    return frozenset(secret[i : i + piece_length] for i in range(len(secret) - piece_length + 1))


def holds_secret(text: str, secret: str | None) -> bool:
    """Whether `text` holds the key or any 8-character piece of it."""
    return bool(secret) and any(piece in text for piece in secret_pieces(secret or ""))


# Environment variables whose names say they hold a secret: OPENAI_API_KEY, HF_TOKEN, the
# variable a pre-registration's model.api_key_env names when it is named so, ...
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)


def environment_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """The values of the environment's variables whose names say they hold a secret (KEY, TOKEN,
    SECRET, PASSWORD, CREDENTIAL), each of at least SECRET_PIECE characters with no whitespace
    and not a path: what a message must never repeat, whatever its shape."""
    env = os.environ if environ is None else environ
    return [
        value
        for name, value in env.items()
        if _SECRET_NAME.search(name)
        and len(value) >= SECRET_PIECE
        and not value.startswith(("/", "~"))
        and not any(char.isspace() for char in value)
    ]


def without_environment_secrets(text: str, environ: Mapping[str, str] | None = None) -> str:
    """`text` with the value of every environment secret, and every 8-character piece of it,
    redacted (the CLI passes every line it prints about an error through this)."""
    for secret in environment_secrets(environ):
        if holds_secret(text, secret):
            text = redact(text, secret)
    return text


def redact(text: str, secret: str | None) -> str:
    """Remove the API key, every 8-character piece of it, and anything shaped like a key."""
    return _redact(text, secret, secret_pieces(secret) if secret else frozenset())


def _redact(text: str, secret: str | None, pieces: frozenset[str]) -> str:
    """redact() with the key's pieces made once by the caller."""
    if secret:
        text = text.replace(secret, REDACTED)
        # Whether any piece occurs, by the string search in C: on a text without one (nearly
        # every text) the position-by-position pass below would change nothing.
        if any(piece in text for piece in pieces):
            text = _cut(text, _piece_spans(text, pieces, min(SECRET_PIECE, len(secret))))
    if _ESCAPED_CHAR_HINT.search(text):
        text = _redact_escaped(text, pieces, min(SECRET_PIECE, len(secret or "")))
    if not any(prefix in text for prefix in _REDACTED_PREFIXES):
        return text
    return REDACTED_SHAPE.sub(REDACTED, text)


def _piece_spans(text: str, pieces: frozenset[str], length: int) -> list[tuple[int, int]]:
    """Where a piece of the key stands in `text`: (start, end) of each occurrence."""
    return [
        (position, position + length)
        for position in range(len(text) - length + 1)
        if text[position : position + length] in pieces
    ]


def _cut(text: str, spans: list[tuple[int, int]]) -> str:
    """`text` with every run that the spans cover replaced by one [redacted]."""
    if not spans:
        return text
    covered = [False] * len(text)
    for start, end in spans:
        covered[start:end] = [True] * (end - start)
    out: list[str] = []
    position = 0
    while position < len(text):
        if covered[position]:
            while position < len(text) and covered[position]:
                position += 1
            out.append(REDACTED)
        else:
            out.append(text[position])
            position += 1
    return "".join(out)


# A character written as a JSON escape (\u0041, or \/), at any depth of JSON inside JSON (so any
# number of backslashes): a server can spell the key so inside a string that is itself JSON (a
# tool call's arguments), where a reader who parses it gets the key back.
_ESCAPED_CHAR = re.compile(r"\\+(?:u([0-9a-fA-F]{4})|(/))")
_ESCAPED_CHAR_HINT = re.compile(r"\\+[u/]")


def unescaped(text: str) -> tuple[str, list[tuple[int, int]]]:
    """`text` with each JSON-escaped character read as that character, and for each character of
    the result the (start, end) it came from in `text`."""
    out: list[str] = []
    spans: list[tuple[int, int]] = []
    position = 0
    for match in _ESCAPED_CHAR.finditer(text):
        for offset in range(position, match.start()):
            out.append(text[offset])
            spans.append((offset, offset + 1))
        out.append(chr(int(match[1], 16)) if match[1] is not None else "/")
        spans.append((match.start(), match.end()))
        position = match.end()
    for offset in range(position, len(text)):
        out.append(text[offset])
        spans.append((offset, offset + 1))
    return "".join(out), spans


def _redact_escaped(text: str, pieces: frozenset[str], length: int) -> str:
    """`text` with the key, a piece of it, or a credential's shape redacted where JSON escapes
    spell it (read as characters, then cut where they stood)."""
    decoded, origin = unescaped(text)
    found = _piece_spans(decoded, pieces, length) if pieces else []
    if any(prefix in decoded for prefix in _REDACTED_PREFIXES):
        found += [m.span() for m in REDACTED_SHAPE.finditer(decoded)]
    spans = [(origin[start][0], origin[end - 1][1]) for start, end in found if end > start]
    # only what an escape spelled: a run read literally was handled by the literal pass
    return _cut(text, [span for span in spans if _ESCAPED_CHAR.search(text, *span)])


def scrub(obj: Any, secret: str | None) -> Any:
    """A JSON-like value with every string (and key) redacted; the same object when no key is set,
    or when no string holds a piece of the key or anything shaped like one (nothing to redact)."""
    if not secret:
        return obj
    pieces = secret_pieces(secret)
    if not _may_hold_key(obj, secret, pieces):
        return obj
    return _scrub(obj, secret, pieces)


def _may_hold_key(obj: Any, secret: str, pieces: frozenset[str]) -> bool:
    """Whether some string of `obj` holds a piece of the key or a key-shaped prefix, searched
    once over all of them; a hit that spans two strings only sends a clean value down the exact
    path. A key with no character JSON escapes appears verbatim in the JSON text, and so does
    each prefix; otherwise (or when orjson refuses the value) the strings are joined by NUL,
    which the key pattern never matches."""
    if not _JSON_ESCAPED.search(secret):
        try:
            text = orjson.dumps(obj)
        except TypeError:  # orjson's JSONEncodeError: a value it cannot write
            pass
        else:
            if b"\\\\u" not in text and b"\\\\/" not in text:  # no string spells a character
                return any(piece.encode() in text for piece in pieces) or any(
                    prefix in text for prefix in _REDACTED_PREFIX_BYTES
                )
    texts: list[str] = []
    _strings(obj, texts)
    joined = "\0".join(texts)
    if _ESCAPED_CHAR_HINT.search(joined):
        joined += "\0" + unescaped(joined)[0]
    return any(piece in joined for piece in pieces) or _keyish(joined)


def _keyish(text: str) -> bool:
    """Whether the redacted shapes match: their prefixes looked for first (the regex is slower)."""
    return (
        any(prefix in text for prefix in _REDACTED_PREFIXES)
        and REDACTED_SHAPE.search(text) is not None
    )


def _strings(obj: Any, out: list[str]) -> None:
    """Every string of a JSON-like value, keys included, in the order scrub visits them."""
    if isinstance(obj, str):
        out.append(obj)
    elif isinstance(obj, dict):
        for key, value in obj.items():
            _strings(key, out)
            _strings(value, out)
    elif isinstance(obj, (list, tuple)):
        for value in obj:
            _strings(value, out)


def _scrub(obj: Any, secret: str, pieces: frozenset[str]) -> Any:
    if isinstance(obj, str):
        return _redact(obj, secret, pieces)
    if isinstance(obj, dict):
        return {_scrub(k, secret, pieces): _scrub(v, secret, pieces) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_scrub(v, secret, pieces) for v in obj]
    return obj
