"""OpenAI's rate-limit headers as the runner reads them and the reference endpoint writes them.

The expected values are read off OpenAI's documented forms (durations like `6m0s`, `1s`, `20ms`;
"time until the window is back to full") and Azure's observed `-1` / `0`, not off the parser.
"""

from __future__ import annotations

import pytest

from poisson_tasks.ratelimitheaders import (
    Stated,
    format_duration,
    parse_count,
    parse_duration,
    read_stated,
    stated_headers,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("6m0s", 360.0),
        ("1s", 1.0),
        ("1.5s", 1.5),
        ("20ms", 0.02),
        ("12ms", 0.012),
        ("0s", 0.0),
        ("1m30.5s", 90.5),
        ("1h2m3s", 3723.0),
        ("2h0m0s", 7200.0),
        ("250us", 0.00025),
        ("250µs", 0.00025),  # Go writes the micro sign, U+00B5
        ("250μs", 0.00025),  # and some write the Greek mu, U+03BC
        ("1500ns", 0.0000015),
        ("17.28s", 17.28),
        (".5s", 0.5),
        ("0", 0.0),  # Azure's bare reset
        ("2.5", 2.5),
        (" 3s ", 3.0),
    ],
)
def test_every_duration_form_is_read(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "text",
    [None, "", "s", "ms", "-1s", "-1", "+1s", "1x", "abc", "1.5.5s", "1s2", "s1", "1 s",
     "１s", "1e3s", "inf", "nan", "1d", "99999999h"],
)  # fmt: skip
def test_a_malformed_duration_is_absent(text: str | None) -> None:
    assert parse_duration(text) is None


@pytest.mark.parametrize(
    ("text", "count"),
    [("10", 10), (" 10 ", 10), ("0", 0), ("150000", 150000), (None, None), ("", None),
     ("-1", None), ("1.5", None), ("1e3", None), ("²", None), ("١٠", None), ("10k", None),
     ("99999999999999999", None)],
)  # fmt: skip
def test_counts_are_ascii_whole_numbers(text: str | None, count: int | None) -> None:
    assert parse_count(text) == count


OPENAI = {
    "x-ratelimit-limit-requests": "60",
    "x-ratelimit-limit-tokens": "150000",
    "x-ratelimit-remaining-requests": "59",
    "x-ratelimit-remaining-tokens": "149984",
    "x-ratelimit-reset-requests": "1s",
    "x-ratelimit-reset-tokens": "6m0s",
}


def test_openais_documented_example_is_read_in_full() -> None:
    assert read_stated(OPENAI) == (
        Stated("requests", 60, 59, 1.0),
        Stated("tokens", 150000, 149984, 360.0),
    )


def test_no_header_states_nothing() -> None:
    assert read_stated({}) == ()
    assert read_stated({"content-type": "application/json", "retry-after": "2"}) == ()


def test_azures_minus_one_and_zero_are_absent() -> None:
    azure = {
        "x-ratelimit-limit-tokens": "-1",
        "x-ratelimit-remaining-tokens": "-1",
        "x-ratelimit-reset-tokens": "0",
        "x-ratelimit-limit-requests": "0",
        "x-ratelimit-remaining-requests": "0",
    }
    assert read_stated(azure) == ()


@pytest.mark.parametrize(
    "broken",
    [
        {"x-ratelimit-limit-tokens": "lots"},
        {"x-ratelimit-remaining-tokens": "many"},
        {"x-ratelimit-remaining-tokens": "-5"},
        {"x-ratelimit-limit-tokens": "1.5e5"},
    ],
)
def test_a_malformed_count_leaves_its_quantity_out(broken: dict[str, str]) -> None:
    headers = {**OPENAI, **broken}
    assert [s.quantity for s in read_stated(headers)] == ["requests"]


def test_a_quantity_missing_a_header_is_absent() -> None:
    headers = {k: v for k, v in OPENAI.items() if k != "x-ratelimit-remaining-tokens"}
    assert [s.quantity for s in read_stated(headers)] == ["requests"]


def test_a_malformed_or_missing_reset_keeps_the_quantity_without_a_reset() -> None:
    headers = {**OPENAI, "x-ratelimit-reset-tokens": "soon"}
    headers.pop("x-ratelimit-reset-requests")
    assert read_stated(headers) == (
        Stated("requests", 60, 59, None),
        Stated("tokens", 150000, 149984, None),
    )


def test_usage_based_twins_are_a_quantity_of_their_own() -> None:
    twins = {
        "x-ratelimit-limit-tokens_usage_based": "200000",
        "x-ratelimit-remaining-tokens_usage_based": "180000",
        "x-ratelimit-reset-tokens_usage_based": "6s",
    }
    assert read_stated({**OPENAI, **twins})[-1] == Stated("tokens_usage_based", 200000, 180000, 6.0)


def test_remaining_above_the_limit_is_cut_to_it() -> None:
    headers = {**OPENAI, "x-ratelimit-remaining-requests": "75"}
    assert read_stated(headers)[0] == Stated("requests", 60, 60, 1.0)


def test_httpx_headers_are_read_whatever_their_case() -> None:
    import httpx2

    headers = httpx2.Headers({k.upper(): v for k, v in OPENAI.items()})
    assert [s.quantity for s in read_stated(headers)] == ["requests", "tokens"]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.0, "0s"), (0.012, "12ms"), (0.0121, "13ms"), (0.9996, "1s"), (1.0, "1s"), (1.5, "1.5s"),
     (59.9999, "1m0s"), (60.0, "1m0s"), (90.5, "1m30.5s"), (360.0, "6m0s"), (3723.25, "1h2m3.25s")],
)  # fmt: skip
def test_durations_are_written_as_openai_writes_them(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize("seconds", [0.0, 0.0004, 0.02, 0.5, 1.2345, 61.0, 359.9, 7201.5])
def test_a_written_duration_reads_back_never_shorter(seconds: float) -> None:
    read = parse_duration(format_duration(seconds))
    assert read is not None and seconds <= read < seconds + 0.001 + 1e-9


def test_stated_headers_read_back() -> None:
    stated = Stated("tokens", 30000, 1234, 57.532)
    assert read_stated(dict(stated_headers(stated))) == (Stated("tokens", 30000, 1234, 57.532),)
