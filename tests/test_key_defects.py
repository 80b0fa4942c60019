"""Issue 21's key defects, one test each (1, 2, 3 and 12), through the CLI as a user meets them.

Each fails on 3efa931, where they were found; they use only the CLI and the loopback double, so
they run unchanged on that commit. The placement table (test_key_placements.py) covers every
other place a key can be put.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from endpoint_double import MODEL, Answer, Seen, serve
from typer.testing import CliRunner

from poisson_tasks.arms import parse_arm_id
from poisson_tasks.cli import app

cli = CliRunner()
ARM = "depth:d2"
ENV = "DEFECT_TEST_KEY"
KEY = "Qm4xT8vR2nK7pW3zY6hB9cJ5dL1fG0sE"  # the env key: shaped like nothing, found by value
SHAPED = {  # credential-shaped values a user might paste (made up, never real)
    "openai": "sk-proj-Xa1Bc2De3Fg4Hi5Jk6Lm7No8Pq9Rs0Tu",
    "huggingface": "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "google": "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
    "github": "ghp_1a2B3c4D5e6F7g8H9i0J1k2L3m4N5o6P7q8R",
    "slack": "xoxb-1234567890-abcdefghijklmnop",
    "aws": "AKIAIOSFODNN7EXAMPLE",
    "gitlab": "glpat-AbCdEfGhIjKlMnOpQrSt",
    "bearer": "Bearer 9f8e7d6c5b4a39281706abcd",
}
SNAPSHOT = "0123456789abcdef0123456789abcdef01234567"


def leaks(blob: str, secret: str) -> list[str]:
    """The 8-character pieces of `secret` in `blob` (none: nothing leaked)."""
    return [secret[i : i + 8] for i in range(len(secret) - 7) if secret[i : i + 8] in blob]


def written(folder: Path) -> str:
    return "".join(
        p.read_bytes().decode("utf-8", "replace") for p in sorted(folder.rglob("*")) if p.is_file()
    )


def errors(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("error:")]


def document(base_url: str, provider: str = "openai-compatible", **model: Any) -> dict[str, Any]:
    return {
        "format": "poisson-tasks/preregistration@1",
        "name": "defects",
        "model": {"provider": provider, "model": MODEL, "base_url": base_url, **model},
        "decoding": {
            "temperature": 1.0,
            "top_p": 1.0,
            "reasoning_effort": None,
            "max_completion_tokens": 256,
        },
        "design": {
            "arms": [ARM],
            "tasks": 1,
            "attempts": 1,
            "seed_string": "defects",
            "slack": 0,
            "horizon": parse_arm_id(ARM).max_turns(0),
        },
        "budget": {"tokens": 5_000_000, "wall_clock_s": 120},
        "execution": {
            "concurrency": 1,
            "max_retries": 1,
            "backoff_s": 0.001,
            "backoff_max_s": 0.01,
        },
    }


def write(tmp_path: Path, doc: dict[str, Any], name: str = "prereg.yaml") -> Path:
    path = tmp_path / "input" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def run_and_card(path: Path, out: Path) -> str:
    """run, then card into the folder and on stdout: everything printed."""
    printed = [cli.invoke(app, ["run", str(path), "--out", str(out), "--quiet"]).output]
    if (out / "run.json").is_file():
        printed.append(cli.invoke(app, ["card", str(out), "--out", str(out / "card")]).output)
        printed.append(cli.invoke(app, ["card", str(out)]).output)
    return "\n".join(printed)


# --------------------------------------------------------------------------- defect 1


def test_1_a_key_echoed_in_fingerprint_and_finish_reason_is_never_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every string that came from the server is redacted where it enters, not chosen fields."""
    monkeypatch.setenv(ENV, KEY)

    def script(seen: Seen, oracle: dict[str, Any]) -> Answer:
        oracle["system_fingerprint"] = f"fp_{KEY}"
        oracle["choices"][0]["finish_reason"] = KEY
        return Answer(200, oracle)

    out = tmp_path / "run"
    with serve(script) as double:
        printed = run_and_card(write(tmp_path, document(double.base_url, api_key_env=ENV)), out)
        assert double.requests  # the server was asked, and echoed the key on every answer
    assert (out / "card" / "card.md").is_file()
    assert not leaks(written(out) + printed, KEY)


# --------------------------------------------------------------------------- defect 2


@pytest.mark.parametrize("kind", sorted(SHAPED))
@pytest.mark.parametrize(
    ("field", "place"),
    [
        ("description", lambda doc, value: doc.__setitem__("description", f"see {value}")),
        ("name", lambda doc, value: doc.__setitem__("name", value)),
        (
            "decoding.extra_body.metadata.note",
            lambda doc, value: doc["decoding"].__setitem__(
                "extra_body", {"metadata": {"note": value}}
            ),
        ),
        (
            "decoding.extra_body.session",
            lambda doc, value: doc["decoding"].__setitem__("extra_body", {"session": value}),
        ),
        (
            "model.base_url",  # under a query name that is not a credential's
            lambda doc, value: doc["model"].__setitem__(
                "base_url", doc["model"]["base_url"] + "?code=" + value.replace(" ", "%20")
            ),
        ),
        (
            "model.base_url",  # the fragment
            lambda doc, value: doc["model"].__setitem__(
                "base_url", doc["model"]["base_url"] + "#" + value.replace(" ", "%20")
            ),
        ),
    ],
)
def test_2_a_credential_shaped_value_anywhere_is_refused_naming_the_field(
    tmp_path: Path, kind: str, field: str, place: Any
) -> None:
    value = SHAPED[kind]
    doc = document("http://127.0.0.1:9/v1")
    place(doc, value)
    res = cli.invoke(app, ["validate", str(write(tmp_path, doc))])
    assert res.exit_code == 2
    assert any(line.startswith(f"error: {field}") for line in errors(res.output)), res.output
    assert not leaks(res.output, value.removeprefix("Bearer ")), res.output


def test_2_the_keys_value_anywhere_in_the_preregistration_refuses_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Decided by value: a key of no known shape, or a piece of it, is found where the user put
    it, and the run is refused before anything is written or sent."""
    monkeypatch.setenv(ENV, KEY)
    with serve() as double:
        doc = document(double.base_url + f"?session={KEY[:12]}", api_key_env=ENV)
        doc["description"] = f"run with {KEY}"
        doc["decoding"]["extra_body"] = {"metadata": {"note": KEY}}
        res = cli.invoke(app, ["run", str(write(tmp_path, doc)), "--out", str(tmp_path / "run")])
        assert not double.requests
    named = errors(res.output)
    assert res.exit_code == 2 and not (tmp_path / "run").exists()
    for field in ("description", "model.base_url", "decoding.extra_body.metadata.note"):
        assert any(line.startswith(f"error: {field}:") for line in named), named
    assert not leaks(res.output, KEY)


# --------------------------------------------------------------------------- defect 3


@pytest.mark.parametrize(
    ("field", "model"),
    [
        ("model.base_url", {"base_url": f"ftp://user:{SHAPED['openai']}@example.org/v1"}),
        ("model.base_url", {"base_url": f"gopher://{SHAPED['huggingface']}@example.org/v1"}),
        ("model.base_url", {"base_url": f"http//user:{KEY}@example.org"}),
        ("model.api_key_env", {"api_key_env": [SHAPED["huggingface"]]}),
        ("model.api_key_env", {"api_key_env": [KEY]}),
        ("model.api_key_env", {"api_key_env": SHAPED["huggingface"]}),
        ("model.api_key_env", {"api_key_env": SHAPED["google"]}),
        ("model.api_key_env", {"api_key_env": f"MY-{KEY}"}),
        ("model.api_key_env", {"api_key_env": {"value": KEY}}),
    ],
)
def test_3_an_error_names_the_field_and_never_repeats_a_credential(
    tmp_path: Path, field: str, model: dict[str, Any]
) -> None:
    doc = document("http://127.0.0.1:9/v1")
    doc["model"].update(model)
    res = cli.invoke(app, ["validate", str(write(tmp_path, doc))])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert any(line.startswith(f"error: {field}") for line in errors(res.output)), res.output
    for secret in (*SHAPED.values(), KEY):
        assert not leaks(res.output, secret), res.output


# --------------------------------------------------------------------------- defect 12

BIG = [
    {"id": f"other-model-{i:06d}", "object": "model", "owned_by": "x" * 40} for i in range(20_000)
]


def test_12_serving_facts_are_typed_bounded_stored_once_and_escaped(tmp_path: Path) -> None:
    hostile = "<script>alert(1)</script>"
    listing = {
        "object": "list",
        "data": [
            {"id": MODEL, "root": f"/m/snapshots/{SNAPSHOT}", "max_model_len": "131072"},
            *BIG,
        ],
    }
    routes = {
        "/version": Answer(200, {"version": hostile}),
        "/v1/models": Answer(200, listing),
    }
    out = tmp_path / "run"
    with serve(routes=routes) as double:
        path = write(tmp_path, document(double.base_url, "vllm", revision=SNAPSHOT[:12]))
        assert len(json.dumps(listing)) > 1_500_000  # a 2 MB /v1/models answer
        printed = run_and_card(path, out)
    header = json.loads((out / "run.json").read_text())
    assert (out / "run.json").stat().st_size < 100_000  # capped, and stored once
    serving = header["serving"]
    assert serving["stack_version"] == "unreadable"  # an HTML fragment is no version
    assert "context_window" not in serving  # a string is not a context window
    assert all(session.get("serving") is None for session in header["sessions"])
    card_md = (out / "card" / "card.md").read_text()
    assert "<script" not in card_md and "<script" not in printed
    assert json.loads((out / "card" / "card.json").read_text())  # the card was built


def test_12_a_version_that_is_a_list_is_unreadable(tmp_path: Path) -> None:
    digest = "a2af6cc3eb7fa8be8504abaf9b04e88f17a119ec3f04a3addf55f92841195f5a"
    routes = {
        "GET /api/version": Answer(200, {"version": ["0.12.3", {"x": "<b>"}]}),
        "POST /api/show": Answer(
            200,
            {"details": {"quantization_level": "Q4"}, "model_info": {"x.context_length": "4096"}},
        ),
        "GET /api/tags": Answer(200, {"models": [{"name": MODEL, "digest": digest}]}),
    }
    out = tmp_path / "run"
    with serve(routes=routes) as double:
        run_and_card(
            write(tmp_path, document(double.base_url, "ollama", revision=digest[:12])), out
        )
    serving = json.loads((out / "run.json").read_text())["serving"]
    assert serving["stack_version"] == "unreadable" and "context_window" not in serving
    assert "- serving stack: ollama unreadable" in (out / "card" / "card.md").read_text()


# --------------------------------------------------------------------------- issue 33, item 7

LETTERS = "QmxTvRnKpWzYhBcJdLfGsEab"  # a key of letters only: no known shape, no digit


def test_33_7a_an_error_quoting_a_value_equal_to_the_key_never_repeats_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A value that is the key, quoted by an error line, is described by its length; a line that
    quotes it otherwise (a flag's value) has it redacted."""
    monkeypatch.setenv(ENV, LETTERS)
    doc = document("http://127.0.0.1:9/v1", api_key_env=ENV)
    doc["format"] = LETTERS
    res = cli.invoke(app, ["run", str(write(tmp_path, doc)), "--out", str(tmp_path / "run")])
    assert res.exit_code == 2 and any(
        line.startswith("error: format:") for line in errors(res.output)
    )
    assert "a value of 24 characters that could be a credential" in res.output
    res = cli.invoke(app, ["card", str(tmp_path), "--compare", LETTERS])
    assert res.exit_code == 2 and errors(res.output)
    assert not leaks(res.output, LETTERS), res.output


def _strings_decoded(value: Any) -> list[str]:
    """Every string of a JSON value, and every string of any string that is itself JSON, read
    as a reader would read it (json.loads, as deep as it goes)."""
    out: list[str] = []
    if isinstance(value, str):
        out.append(value)
        try:
            inner = json.loads(value)
        except ValueError:
            inner = None
        if isinstance(inner, dict | list | str):
            out += _strings_decoded(inner)
    elif isinstance(value, dict):
        for key, nested in value.items():
            out += [key, *_strings_decoded(nested)]
    elif isinstance(value, list):
        for nested in value:
            out += _strings_decoded(nested)
    return out


@pytest.mark.parametrize("levels", [1, 2], ids=["as \\u escapes", "escaped twice"])
def test_33_7b_a_key_spelled_in_json_escapes_inside_the_arguments_is_never_decodable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, levels: int
) -> None:
    monkeypatch.setenv(ENV, KEY)
    spelled = "".join("\\" * levels + f"u{ord(c):04x}" for c in KEY)

    def script(seen: Seen, oracle: dict[str, Any]) -> Answer:
        for call in oracle["choices"][0]["message"].get("tool_calls") or []:
            arguments = call["function"]["arguments"]
            call["function"]["arguments"] = arguments[:-1] + ', "note": "' + spelled + '"}'
        return Answer(200, oracle)

    out = tmp_path / "run"
    with serve(script) as double:
        printed = run_and_card(write(tmp_path, document(double.base_url, api_key_env=ENV)), out)
    printed += cli.invoke(app, ["view", str(out), "--out", str(tmp_path / "v.html")]).output
    assert (out / "card" / "card.md").is_file()
    lines = [json.loads(x) for x in (out / "episodes.jsonl").read_text().splitlines()]
    assert lines and all(not leaks(s, KEY) for x in lines for s in _strings_decoded(x))
    page = (tmp_path / "v.html").read_text()
    assert not leaks(written(out) + page + printed, KEY)
    spelled = re.sub(r"\\+u([0-9a-fA-F]{4})", lambda m: chr(int(m[1], 16)), page)
    assert not leaks(spelled, KEY)  # nor spelled in escapes


def test_33_7c_a_run_folder_named_with_the_key_is_refused_and_never_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, KEY)
    named = tmp_path / f"run-{KEY[3:15]}"
    with serve() as double:
        path = write(tmp_path, document(double.base_url, api_key_env=ENV))
        res = cli.invoke(app, ["run", str(path), "--out", str(named), "--quiet"])
        assert not double.requests
    assert res.exit_code == 2 and not named.exists()
    assert errors(res.output)[0].startswith("error: the run folder's path: holds the API key")
    assert not leaks(res.output, KEY)
    with serve() as double:  # a folder made elsewhere, then named so: view shows no key
        path = write(tmp_path, document(double.base_url, api_key_env=ENV), "second.yaml")
        assert (
            cli.invoke(app, ["run", str(path), "--out", str(tmp_path / "r"), "--quiet"]).exit_code
            == 0
        )
    (tmp_path / "r").rename(named)
    res = cli.invoke(app, ["view", str(named), "--out", str(tmp_path / "v.html")])
    assert res.exit_code == 0, res.output
    page = (tmp_path / "v.html").read_text()
    head = page.split("</header>", 1)[0]
    assert "<title>" in head and "[redacted]" in head
    assert not leaks(page + res.output, KEY)
