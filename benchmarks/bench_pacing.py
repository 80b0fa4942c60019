"""Pacing against a rate-limited endpoint (issue 37): wall time against the floor the limit sets.

    python benchmarks/bench_pacing.py                 # both designs, every configuration (~20 min)
    python benchmarks/bench_pacing.py --only smoke    # one design

The reference endpoint is served in its own process with a tokens-per-minute limit (and a
requests-per-minute one that does not bind), sending OpenAI's rate-limit headers and 429s
(reference/ratelimit.py); its buckets start full, as an idle account's do. Each design is first
run once without a limit to count the study's tokens T and requests R (the reference policies
answer a request the same way every time, so every complete run spends the same). Then, side by
side in this one process, three runs of the same study against a fresh limited server:

  pace headers   execution.pace: headers at the pre-registration's concurrency
  pace off       the pre-registration's concurrency, no pacing
  pace off, 32   (64 where the pre-registration already says 32) the concurrency a user guesses

A session whose calls ran out of retries leaves `api_error` slots; the study is resumed at once
(`run --resume`, as a user would) until every slot is scored, at most MAX_SESSIONS times, and its
wall time is every session's. The floor is the least time any client could take: an account that starts with a full minute's
allowance still has to wait for the rest to refill, so floor = max(T - TPM, R - RPM) / limit per
minute. `T / TPM` beside it is the cruder floor that leaves the first minute out. Every 429 is
counted from the episode lines (records' rate_limited), over every session. Reference-policy runs
measure the runner, never a model.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from common import markdown_table

from poisson_tasks.calibration.records import records_from_run
from poisson_tasks.prereg import validate_preregistration
from poisson_tasks.reference import RateLimit, start_reference_server
from poisson_tasks.runner import run_preregistration
from poisson_tasks.tokens import count_tokens

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Design:
    name: str
    file: str
    tasks: int | None  # None: as the file says
    attempts: int | None
    tpm: int
    rpm: int
    guess: int  # the concurrency a user would guess


DESIGNS = {
    "smoke": Design("smoke", "smoke.yaml", None, None, tpm=150_000, rpm=5_000, guess=32),
    "published": Design(
        "published noisy, 10 tasks x 2 attempts",
        "published-reference-noisy.yaml",
        10,
        2,
        tpm=500_000,
        rpm=5_000,
        guess=32,
    ),
}


def document(design: Design, concurrency: int | None, pace: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((ROOT / "preregistrations" / design.file).read_text())
    if design.tasks is not None:
        doc["design"]["tasks"] = design.tasks
        doc["design"].pop("seed_list_hash", None)
        doc["design"].pop("seeds", None)
    if design.attempts is not None:
        doc["design"]["attempts"] = design.attempts
    doc["budget"]["wall_clock_s"] = 7200
    doc["budget"]["tokens"] = 100_000_000
    if concurrency is not None:
        doc["execution"]["concurrency"] = concurrency
    doc["execution"]["pace"] = pace
    return doc


@dataclass(frozen=True)
class Outcome:
    """A study run to completion: sessions (a session whose calls ran out of retries leaves
    api_error slots, and `run --resume` runs them again at once, as a user would), their wall
    time, the episode lines, the api_error lines, 429s, retries, and the tokens of the scored
    episodes and their model calls."""

    sessions: int
    complete: bool
    scored: int
    planned: int
    wall: float
    lines: int
    failed: int
    rate_limited: int
    retries: int
    tokens: int
    requests: int


MAX_SESSIONS = 10  # a study still incomplete after this many sessions is reported as such


def run(doc: dict[str, Any], limit: RateLimit | None) -> Outcome:
    """The study in a temporary folder against a fresh server, resumed until every slot is
    scored."""
    out = Path(tempfile.mkdtemp(prefix="bench-pacing-")) / "run"
    wall, retries, sessions = 0.0, 0, 0
    with start_reference_server(rate_limit=limit, process=True) as server:
        doc["model"]["base_url"] = server.base_url
        plan = validate_preregistration(doc)
        complete = False
        while not complete and sessions < MAX_SESSIONS:
            started = time.perf_counter()
            summary = run_preregistration(plan, out, resume=sessions > 0, show_progress=False)
            wall += time.perf_counter() - started
            retries += summary.retries
            sessions += 1
            complete = summary.complete
    records = records_from_run(out)
    scored = [r for r in records if not r.instrument]
    return Outcome(
        sessions,
        complete,
        summary.scored,
        summary.planned,
        wall,
        len(records),
        sum(r.outcome == "api_error" for r in records),
        sum(r.rate_limited for r in records),
        retries,
        sum(r.tokens or 0 for r in scored),
        sum(r.model_calls for r in scored),
    )


def measure(design: Design) -> list[tuple[object, ...]]:
    plain = document(design, None, "off")
    declared = int(plain["execution"]["concurrency"])
    study = run(plain, None)
    tokens, requests = study.tokens, study.requests
    limit = RateLimit(rpm=design.rpm, tpm=design.tpm)
    floor = 60 * max((tokens - design.tpm) / design.tpm, (requests - design.rpm) / design.rpm, 0)
    crude = 60 * max(tokens / design.tpm, requests / design.rpm)
    guess = design.guess if design.guess != declared else 64
    rows: list[tuple[object, ...]] = []
    for label, pace, concurrency in (
        ("pace headers", "headers", declared),
        ("pace off", "off", declared),
        ("pace off", "off", guess),
    ):
        got = run(document(design, concurrency, pace), limit)
        rows.append(
            (
                design.name,
                f"{design.tpm:,} TPM, {design.rpm:,} RPM",
                label,
                concurrency,
                got.sessions
                if got.complete
                else f"{got.sessions}, incomplete: {got.scored:,} of {got.planned:,} slots scored",
                f"{got.lines:,}",
                f"{got.failed:,}",
                f"{got.wall:.1f}",
                f"{floor:.1f}",
                f"{got.wall / floor:.3f}" if got.complete else "n/a: incomplete",
                f"{crude:.1f}",
                f"{got.rate_limited:,}",
                f"{got.rate_limited / (got.wall / 60):.2f}",
                f"{got.retries:,}",
            )
        )
    rows.append(
        (
            design.name,
            "no limit",
            f"the study: {tokens:,} tokens, {requests:,} requests",
            declared,
            study.sessions,
            f"{study.lines:,}",
            "0",
            f"{study.wall:.1f}",
            "",
            "",
            "",
            "",
            "",
            "",
        )
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help=f"one design: {', '.join(DESIGNS)}")
    args = parser.parse_args()
    names = [args.only] if args.only else list(DESIGNS)
    count_tokens("load the tokenizer before any clock")
    rows: list[tuple[object, ...]] = []
    for name in names:
        rows += measure(DESIGNS[name])
    columns = (
        "design",
        "limit",
        "pacing",
        "concurrency",
        "sessions",
        "episode lines",
        "api_error lines",
        "wall s",
        "floor s",
        "wall / floor",
        "T / TPM s",
        "429s",
        "429s a minute",
        "retries",
    )
    print(markdown_table(columns, rows))
    load = os.getloadavg()
    only = f" --only {args.only}" if args.only else ""
    print(
        f"\n`python benchmarks/bench_pacing.py{only}` (`python benchmarks/perf.py --only pacing`)"
        f" — {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {os.cpu_count()} cores, "
        f"load average at the end {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}"
    )


if __name__ == "__main__":
    main()
