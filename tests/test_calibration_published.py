"""Published cards: stored, rebuilt byte for byte, refused on a one-byte change, read beside a run;
and the `poisson-tasks card` command line."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from synthetic_runs import DECODING, FAKE_HASH, header, line, write_run
from typer.testing import CliRunner

from poisson_tasks.calibration import card_from_run, card_json, manifest, render_document
from poisson_tasks.calibration.published import (
    check_published,
    compare_published,
    published_facts,
    store_published,
    write_manifest,
)
from poisson_tasks.cli import app
from poisson_tasks.errors import CardRefusal, PublishedCardError
from poisson_tasks.hashes import generator_hash
from poisson_tasks.runfolder import EPISODES

ARMS = ("depth:d1", "depth:d2", "distractor:r0@k16", "distractor:r2@k16")


def make_run(
    folder: Path, *, gen: str | None = None, model: str = "oracle", **head: object
) -> Path:
    """A small full run on this install's generator (so its card is not stale)."""
    lines = [
        line(
            a,
            s,
            t,
            "passed" if (s + t + len(a)) % 3 else "overshoot",
            transcript={"note": f"synthetic {a} {s} {t}"},
        )
        for a in ARMS
        for s in range(6)
        for t in range(2)
    ]
    return write_run(
        folder,
        header(
            ARMS,
            range(6),
            2,
            generator_hash=gen or generator_hash(),
            provider="reference",
            model=model,
            **head,
        ),
        lines,
    )


@pytest.fixture
def published(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    base = tmp_path / "calibration"
    monkeypatch.setattr(manifest, "PUBLISHED_DIR", base)
    store_published(make_run(tmp_path / "run-oracle"), "reference-oracle")
    return base


def test_stored_card_is_rebuilt_byte_for_byte(published: Path) -> None:
    folder = published / "reference-oracle"
    assert sorted(p.name for p in folder.iterdir()) == [
        "card.json",
        "card.md",
        "episodes.jsonl.gz",
        "run.json",
    ]
    with gzip.open(folder / "episodes.jsonl.gz", "rb") as fh:
        assert fh.read() == (published.parent / "run-oracle" / EPISODES).read_bytes()
    (check,) = check_published()
    assert check.ok and check.name == "reference-oracle"
    stored = json.loads((folder / "card.json").read_text())
    assert stored["kind"] == "reference-policy" and stored["published_cards"] == [
        "reference-oracle"
    ]
    assert "Reference-policy card: `oracle`" in (folder / "card.md").read_text()


def test_gzip_header_is_reproducible(published: Path, tmp_path: Path) -> None:
    first = (published / "reference-oracle" / "episodes.jsonl.gz").read_bytes()
    store_published(tmp_path / "run-oracle", "reference-oracle")
    assert (published / "reference-oracle" / "episodes.jsonl.gz").read_bytes() == first
    assert first[4:8] == b"\0\0\0\0"  # mtime 0


def test_one_byte_changed_in_a_stored_record_fails_naming_card_and_line(published: Path) -> None:
    path = published / "reference-oracle" / "episodes.jsonl.gz"
    data = gzip.decompress(path.read_bytes())
    changed = data.replace(b"synthetic depth:d1 3 1", b"synthetic depth:d1 3 2", 1)
    assert len(changed) == len(data) and changed != data
    path.write_bytes(gzip.compress(changed, mtime=0))
    (check,) = check_published()
    assert not check.ok
    assert check.message.startswith(
        "published card reference-oracle: card.json differs from the "
        "card rebuilt from its records at line "
    )
    assert "records_sha256" in check.message


def test_one_byte_changed_in_the_compressed_file_fails_naming_card(published: Path) -> None:
    path = published / "reference-oracle" / "episodes.jsonl.gz"
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0x01
    path.write_bytes(bytes(raw))
    (check,) = check_published()
    assert not check.ok and check.message.startswith("published card reference-oracle: ")


def test_one_byte_changed_in_a_stored_card_fails_naming_its_line(published: Path) -> None:
    path = published / "reference-oracle" / "card.md"
    text = path.read_text()
    lines = text.split("\n")
    number = next(i for i, t in enumerate(lines) if t.startswith("| `d2` |"))
    lines[number] = lines[number].replace("|", "!", 1)
    path.write_text("\n".join(lines))
    (check,) = check_published()
    assert not check.ok
    assert (
        f"card.md differs from the card rebuilt from its records at line {number + 1}"
        in check.message
    )


def test_a_listed_card_without_records_fails_and_an_empty_manifest_passes(
    published: Path,
) -> None:
    write_manifest(["reference-oracle", "reference-noisy"], published)
    checks = {c.name: c for c in check_published()}
    assert checks["reference-oracle"].ok
    assert (
        not checks["reference-noisy"].ok
        and "records are missing" in checks["reference-noisy"].message
    )
    write_manifest([], published)
    assert check_published() == []


def test_missing_manifest_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(PublishedCardError, match=r"manifest\.json is missing"):
        check_published(tmp_path)
    assert published_facts(tmp_path) == []


def test_compare_published_reads_a_matching_run_beside_the_cards(
    published: Path, tmp_path: Path
) -> None:
    a = card_from_run(make_run(tmp_path / "mine", model="noisy"))
    doc = compare_published(a)
    assert "`reference-oracle` is a reference-policy card" in doc
    assert "| `depth:d1` |" in doc and "## strict pass@1" in doc and "## leaky pass@1" in doc
    assert not [c for c in a.statements.does_not_claim if c.key == "not_covered"]


@pytest.mark.parametrize(
    ("head", "what"),
    [
        ({"gen": FAKE_HASH}, "generator hash (ffffffffffff here"),
        ({"decoding": {**DECODING, "top_p": 0.5}}, "decoding ("),
    ],
)
def test_compare_published_refuses_in_one_line_naming_what_differs(
    published: Path,
    tmp_path: Path,
    head: dict[str, object],
    what: str,
) -> None:
    a = card_from_run(make_run(tmp_path / "mine", **head))  # type: ignore[arg-type]
    with pytest.raises(CardRefusal) as err:
        compare_published(a)
    assert "\n" not in str(err.value)
    assert str(err.value).startswith("compare refused:") and what in str(err.value)


# --------------------------------------------------------------------------- command line


def test_cli_card_prints_markdown_json_and_writes_files(published: Path, tmp_path: Path) -> None:
    run = make_run(tmp_path / "mine", model="noisy")
    a = card_from_run(run)
    runner = CliRunner()
    md = runner.invoke(app, ["card", str(run)])
    assert md.exit_code == 0 and md.stdout == render_document(a)
    js = runner.invoke(app, ["card", str(run), "--json"])
    assert js.exit_code == 0 and js.stdout.encode() == card_json(a)
    out = tmp_path / "out"
    wrote = runner.invoke(app, ["card", str(run), "--out", str(out), "--plot"])
    assert wrote.exit_code == 0, wrote.output
    assert sorted(p.name for p in out.iterdir()) == [
        "card.json",
        "card.md",
        "depth.png",
        "distractor.png",
    ]
    assert (out / "card.json").read_bytes() == card_json(a)
    assert (out / "depth.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    beside = runner.invoke(app, ["card", str(run), "--compare", "published"])
    assert beside.exit_code == 0 and "beside the published cards" in beside.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--plot"], "--plot writes PNG files: add --out DIR"),
        (["--compare", "other"], "--compare 'other' is unknown; the one choice is `published`"),
    ],
)
def test_cli_bad_options_exit_2(
    published: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    run = make_run(tmp_path / "mine")
    res = CliRunner().invoke(app, ["card", str(run), *args])
    assert res.exit_code == 2 and res.stderr.strip() == f"error: {message}"


def test_cli_compare_refusal_exit_1(published: Path, tmp_path: Path) -> None:
    run = make_run(tmp_path / "mine", gen=FAKE_HASH)
    res = CliRunner().invoke(app, ["card", str(run), "--compare", "published"])
    assert res.exit_code == 1 and res.stderr.startswith("error: compare refused:")


def test_cli_published_check(published: Path) -> None:
    ok = CliRunner().invoke(app, ["card", "--published"])
    assert ok.exit_code == 0 and ok.stdout.startswith("ok: published card reference-oracle")
    path = published / "reference-oracle" / "card.json"
    path.write_bytes(path.read_bytes().replace(b'"kind"', b'"kinD"'))
    bad = CliRunner().invoke(app, ["card", "--published"])
    assert bad.exit_code == 1
    assert "error: published card reference-oracle: card.json differs" in bad.stderr
    write_manifest([], published)
    empty = CliRunner().invoke(app, ["card", "--published"])
    assert empty.exit_code == 0 and "nothing to check" in empty.stdout


def test_cli_with_a_missing_run_folder_exits_2(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["card", str(tmp_path / "no-such-run")])
    assert res.exit_code == 2 and "does not exist" in res.stderr


@pytest.mark.slow
def test_the_repository_published_cards_rebuild() -> None:
    """Every card calibration/manifest.json lists rebuilds byte for byte."""
    checks = check_published()
    assert checks, "calibration/manifest.json lists no published card"
    assert all(c.ok for c in checks), [c.message for c in checks if not c.ok]


def test_compare_with_an_unreadable_stored_card_is_one_error(
    published: Path, tmp_path: Path
) -> None:
    (published / "reference-oracle" / "card.json").write_text("{}")
    a = card_from_run(make_run(tmp_path / "mine"))
    with pytest.raises(
        PublishedCardError, match=r"published card reference-oracle: .*card\.json cannot be read"
    ):
        compare_published(a)


def test_plot_without_matplotlib_is_one_clear_error(
    published: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from poisson_tasks.calibration.plot import write_plots
    from poisson_tasks.errors import MissingExtraError

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    a = card_from_run(make_run(tmp_path / "mine"))
    with pytest.raises(MissingExtraError, match=r"pip install 'poisson-tasks\[plot\]'"):
        write_plots(a, tmp_path / "plots")
    res = CliRunner().invoke(
        app, ["card", str(tmp_path / "mine"), "--out", str(tmp_path / "o"), "--plot"]
    )
    assert res.exit_code == 2
    assert res.stderr.strip() == "error: --plot needs matplotlib: pip install 'poisson-tasks[plot]'"


def test_a_refused_run_is_not_stored(published: Path, tmp_path: Path) -> None:
    lines = [line("depth:d1", s, 0, "wrong_state", tool_calls=0) for s in range(10)]
    run = write_run(tmp_path / "refused", header(["depth:d1"], range(10), 1), lines)
    with pytest.raises(CardRefusal):
        store_published(run, "reference-refused")
    assert not (published / "reference-refused").exists()
    assert [c.name for c in check_published()] == ["reference-oracle"]
