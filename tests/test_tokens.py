"""The pinned tokenizer: loaded lazily from bpe-openai's extension, counting as the package does."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from poisson_tasks import tokens

ADVERSARIAL = [
    "",
    " ",
    "  ",
    "\n",
    "\r\n\r\n",
    "\t \t\n  \n",
    " " * 300,
    "\n" * 50,
    "a" * 5000,
    "9" * 1001,
    "1234567890",
    "hello world",
    "Hello, World! It's a test's test; they'll've done",
    "ÄÖÜ äöü ß Łódź naïve café",
    "日本語のテキスト、中文文本，한국어 텍스트",
    "emoji 👩‍👩‍👧‍👦 🏳️‍🌈 family",
    "\u200b\u200d\ufeff zero widths",
    "e\u0301 combining a\u0308",
    "lone surrogate \ud800 here",
    "\udfff",
    "< |endoftext| > looks alike",
    "<|endoftex",
    '{"role":"tool","content":"000003 ok           32d049009e77f1c4d0f3d65f01e99ca8"}',
    '{\\"query\\": \\"aaf4c6f262799\\"}',
    "x" + "  \n" * 40 + "y",
    "mixed\r\rcarriage\rreturns",
    "العربية עברית",
    "'s 't 're 've 'm 'll 'd 'S 'T",
    "CamelCaseWordsAndALLCAPS and lowercase",
    "\x00\x01\x02 control \x7f",
]


def _reference_counts(texts: list[str]) -> list[int | str]:
    import bpe_openai

    encoding = bpe_openai.get_encoding("o200k_base")
    out: list[int | str] = []
    for text in texts:
        try:
            out.append(len(encoding.encode(text)))
        except ValueError:
            out.append("ValueError")
    return out


def _ours(texts: list[str]) -> list[int | str]:
    out: list[int | str] = []
    for text in texts:
        try:
            out.append(tokens.count_tokens(text))
        except ValueError:
            out.append("ValueError")
    return out


def test_tokenizer_id_is_unchanged() -> None:
    assert tokens.TOKENIZER_ID == "bpe-openai==0.1.4:o200k_base"


def test_adversarial_counts_match_bpe_openai() -> None:
    reference = _reference_counts(ADVERSARIAL)
    ours = _ours(ADVERSARIAL)
    assert ours == reference
    assert reference.count("ValueError") == 0  # every adversarial text is countable


@pytest.mark.parametrize("special", ["<|endoftext|>", "<|endofprompt|>", "a <|endoftext|> b"])
def test_special_token_text_is_refused_as_bpe_openai_refuses_it(special: str) -> None:
    with pytest.raises(ValueError):
        tokens.count_tokens(special)
    assert _reference_counts([special]) == ["ValueError"]  # the package refuses it too


def test_import_is_cheap_and_the_first_count_skips_the_package_tables() -> None:
    code = textwrap.dedent(
        """
        import json, sys
        import poisson_tasks.tokens as tokens
        after_import = sorted(m for m in sys.modules if m.startswith("bpe_openai"))
        tokens.count_tokens("hello world")
        after_count = sorted(m for m in sys.modules if m.startswith("bpe_openai"))
        print(json.dumps([after_import, after_count]))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    after_import, after_count = json.loads(out.stdout)
    assert after_import == []
    assert after_count == ["bpe_openai._bindings"]  # the extension alone: no compat tables


# The full pin sweep (all 45 arms x 60 seeds, the contrasts `generate --arms` checks) in a fresh
# process, so no warm cache hides a text. It records every text sent to the tokenizer, and checks
# the history search's piecewise count (draft._pair_tokens) against the whole messages' count
# (history_tokens of the rendered call and answer) at every query the search tries. Then every
# recorded text is counted by bpe_openai's own get_encoding("o200k_base") and by count_tokens.
_SWEEP = textwrap.dedent(
    """
    import json
    from poisson_tasks import tokens
    from poisson_tasks.arms import KNOBS, all_arms
    from poisson_tasks.bundle import canonical_json
    from poisson_tasks.domain.engine import read_payload
    from poisson_tasks.generator import draft
    from poisson_tasks.pins.plan import check_plan
    from poisson_tasks.transcript import history_tokens

    real = tokens._backend()
    seen = []

    class Recorder:
        def count(self, text):
            seen.append(text)
            return real.count(text)

    piecewise = draft._pair_tokens
    pairs = []
    pair_bad = []

    def checked(sc, names, i, query, seq, pieces):
        got = piecewise(sc, names, i, query, seq, pieces)
        messages = draft._read_exchange(sc, names, i, query, seq)
        ask, answer = (canonical_json(m).decode() for m in messages)
        payload = read_payload(sc.key, names[i % len(names)], query)
        same_text = ask == pieces.ask_head + query + pieces.ask_tail and answer == (
            pieces.answer_head + " " + payload + pieces.answer_tail
        )
        whole = history_tokens(messages)
        pairs.append(query)
        if got != whole or not same_text:
            pair_bad.append([query, got, whole, same_text])
        return got

    tokens._backend = lambda: Recorder()
    draft._pair_tokens = checked
    arms = [a.id for knob in KNOBS for a in all_arms(knob)]
    report = check_plan(arms, range(60))
    tokens._backend = lambda: real
    tokens.count_tokens.cache_clear()

    import bpe_openai

    reference = bpe_openai.get_encoding("o200k_base")
    bad = [t for t in set(seen) if tokens.count_tokens(t) != len(reference.encode(t))]
    print(json.dumps({
        "arms": len(arms), "texts": len(seen), "bad": bad[:5], "n_bad": len(bad),
        "pairs": len(pairs), "digit_first": sum(q[0].isdigit() for q in pairs),
        "digit_last": sum(q[-1].isdigit() for q in pairs), "pair_bad": pair_bad[:5],
        "n_pair_bad": len(pair_bad),
    }))
    """
)


@pytest.fixture(scope="module")
def sweep() -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", _SWEEP], capture_output=True, text=True, check=True, timeout=900
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["arms"] == 45
    return result


@pytest.mark.xdist_group("full-pin-sweep")  # one sweep fixture, one worker
def test_every_text_of_the_full_pin_sweep_counts_as_bpe_openai_counts_it(
    sweep: dict[str, Any],
) -> None:
    assert sweep["texts"] > 10_000, sweep  # the recorder saw the sweep's texts
    assert sweep["n_bad"] == 0, sweep["bad"]


@pytest.mark.xdist_group("full-pin-sweep")  # one sweep fixture, one worker
def test_the_history_search_counts_by_pieces_exactly_over_the_full_sweep(
    sweep: dict[str, Any],
) -> None:
    """Counting the query and the payload apart from the rest of their messages never changes a
    total the history search sees (the tokenizer never merges across those cuts)."""
    assert sweep["pairs"] > 10_000, sweep  # every history bundle's search ran through the check
    # queries starting and ending with a digit and with a letter were both tried
    assert 0 < sweep["digit_first"] < sweep["pairs"]
    assert 0 < sweep["digit_last"] < sweep["pairs"]
    assert sweep["n_pair_bad"] == 0, sweep["pair_bad"]
