"""The pinned tokenizer: loaded lazily from bpe-openai's extension, counting exactly as the package."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

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


# Every text the full pin sweep (all 45 arms x 60 seeds, the contrasts `generate --arms` checks)
# sends to the tokenizer, recorded in a fresh process (no warm caches hide a text), then counted
# by bpe_openai's own get_encoding("o200k_base") and by count_tokens.
_SWEEP = textwrap.dedent(
    """
    import json, sys
    from poisson_tasks import tokens
    from poisson_tasks.arms import KNOBS, all_arms
    from poisson_tasks.pins.plan import check_plan

    real = tokens._backend()
    seen = []

    class Recorder:
        def encode(self, text):
            seen.append(text)
            return real.encode(text)

    tokens._backend = lambda: Recorder()
    arms = [a.id for knob in KNOBS for a in all_arms(knob)]
    report = check_plan(arms, range(60))
    tokens._backend = lambda: real
    tokens.count_tokens.cache_clear()

    import bpe_openai

    reference = bpe_openai.get_encoding("o200k_base")
    bad = [t for t in seen if tokens.count_tokens(t) != len(reference.encode(t))]
    print(json.dumps({"arms": len(arms), "texts": len(seen), "bad": bad[:5], "n_bad": len(bad)}))
    """
)


def test_every_text_of_the_full_pin_sweep_counts_as_bpe_openai_counts_it() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _SWEEP], capture_output=True, text=True, check=True, timeout=600
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["arms"] == 45
    assert result["texts"] > 10_000, result  # the recorder saw the sweep's texts
    assert result["n_bad"] == 0, result["bad"]
