"""Check one local-model CI run: records, card verdict, provenance and the server's request log.

usage: python scripts/ci/check_local_model.py OUT_DIR

OUT_DIR holds what scripts/ci/local-model kept: run/ (run.json, episodes.jsonl, and replay/, the
replay of one of its slots), replay.txt (what `replay` printed), card.rc and
card.err (the `card` command's exit status and stderr), card.md when a card was made, serve.out
(serve-local's announcement) and server.log (llama.cpp's own log). Prints one line per check and
exits 1 when any fails.

- no instrument failures, and every outcome in the closed vocabulary (verifier.OUTCOMES);
- the card's verdict is the one the rules give: a cell with more than thresholds.no_call_max of
  its scored episodes without a tool call means the no-call refusal (exit 1 and its line), else a
  card (exit 0) that says "self-served";
- the llama.cpp provenance the runner measured is all there (build, model file, size, sha256,
  quantisation, n_ctx, threads, the chat template's served and file sha256);
- serve-local announced that llama.cpp parses the template's tool calls (its start-up check), the
  template it chose from the GGUF's metadata (chatml-tools, the one the registration names: a
  choice that moved would change the registered study), and the start-up tool call it asked the
  model for (on stdout when it came back as a native call, else as a warning on stderr; what it
  came back as is printed, never asserted);
- the replay printed a Reproducibility section and its counts add up (one slot replayed; same
  plus different verdict is the slots replayed; an identical transcript has the same calls and
  verdict; each first difference is one episode whose transcript differs). What it measured is
  printed, never asserted: a value is the model's and the server's, not the instrument's;
- the runner's requests (the run's and the replay's: every response plus every retried attempt),
  plus serve-local's own start-up requests (local.server.STARTUP_REQUESTS: the parse check and the
  tool call), equal the completion requests the server logged (one `launch_slot_` line each).
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from poisson_tasks.calibration.reproducibility import measure_replay
from poisson_tasks.local.server import STARTUP_REQUESTS
from poisson_tasks.verifier import INSTRUMENT_OUTCOMES, OUTCOMES

FACTS = (
    "build",
    "model_file",
    "model_bytes",
    "model_sha256",
    "quantization",
    "n_ctx",
    "threads",
    "template_sha256",
    "template_file_sha256",
)
PARSED = "tool calls parsed by llama.cpp, chat format peg-native"
CHOSEN = "template chatml-tools, chosen from the GGUF's metadata: a ChatML model"
PROBED = "start-up tool call: asked the loaded model once"


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(t) for t in path.read_text(encoding="utf-8").splitlines() if t.strip()]


def check(out: Path) -> list[tuple[bool, str]]:
    results: list[tuple[bool, str]] = []
    header = json.loads((out / "run" / "run.json").read_text(encoding="utf-8"))
    episodes = _lines(out / "run" / "episodes.jsonl")
    planned = len(header["arms"]) * len(header["seeds"]) * header["attempts"]
    results.append((len(episodes) == planned, f"{len(episodes)} episodes of {planned} planned"))
    outcomes = sorted({e["outcome"] for e in episodes})
    unknown = [o for o in outcomes if o not in OUTCOMES]
    results.append((not unknown, f"outcomes {outcomes} all in the closed vocabulary"))
    instrument = [e for e in episodes if e["outcome"] in INSTRUMENT_OUTCOMES]
    results.append((not instrument, f"{len(instrument)} instrument failures"))

    no_call_max = header["thresholds"]["no_call_max"]
    scored: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for e in episodes:
        if e["outcome"] not in INSTRUMENT_OUTCOMES:
            scored[e["arm_id"]].append(e)
    over = sorted(
        a
        for a, es in scored.items()
        if sum(e["tool_calls"] == 0 for e in es) > no_call_max * len(es)
    )
    rc = int((out / "card.rc").read_text().strip())
    err = (out / "card.err").read_text(encoding="utf-8")
    if over:
        ok = rc == 1 and "card refused" in err and "no tool call" in err
        results.append((ok, f"no-call refusal expected ({', '.join(over)}): card exit {rc}"))
    else:
        card = out / "card.md"
        ok = rc == 0 and card.is_file() and "self-served" in card.read_text(encoding="utf-8")
        results.append((ok, f"a card expected (no cell over the no-call limit): card exit {rc}"))

    serving = header["serving"]
    facts = serving.get("llamacpp") or {}
    missing = [k for k in FACTS if facts.get(k) in (None, "")]
    results.append((serving.get("provider") == "llamacpp", "serving provider llamacpp"))
    results.append(
        (not missing, f"llama.cpp provenance fields present (missing: {missing or 'none'})")
    )

    announced = (out / "serve.out").read_text(encoding="utf-8")
    results.append((PARSED in announced, f"serve-local announced: {PARSED}"))
    results.append((CHOSEN in announced, f"serve-local announced: {CHOSEN}"))
    log = (out / "server.log").read_text(encoding="utf-8", errors="replace")
    probe = [t for t in [*announced.splitlines(), *log.splitlines()] if PROBED in t]
    results.append((len(probe) == 1, "serve-local reported its start-up tool call once"))
    if probe:
        print(f"start-up tool call (printed, not asserted): {probe[0]}")

    results += _replay(out)
    replayed = _lines(out / "run" / "replay" / "episodes.jsonl")
    runner = sum(
        len(e["transcript"]["responses"]) + e["transcript"]["retries"]
        for e in [*episodes, *replayed]
    )
    logged = sum("launch_slot_" in t for t in log.splitlines())
    results.append(
        (
            runner + STARTUP_REQUESTS == logged,
            f"runner requests {runner} + serve-local's start-up requests {STARTUP_REQUESTS}, "
            f"server log {logged}",
        )
    )
    return results


def _replay(out: Path) -> list[tuple[bool, str]]:
    """The replay's section: printed, and its counts add up (values printed, not asserted)."""
    printed = (out / "replay.txt").read_text(encoding="utf-8")
    results = [("## Reproducibility" in printed, "replay printed a Reproducibility section")]
    rep = measure_replay(out / "run")
    if rep is None:
        return [*results, (False, "run/replay/ holds a replay")]
    identical, calls = rep.identical_transcript.count, rep.same_tool_calls.count
    same, different = rep.same_verdict.count, rep.different_verdict.count
    firsts = sum(d.episodes for d in rep.first_differences)
    results += [
        (rep.sample == 1 and rep.seed == 0, f"replay sample {rep.sample}, seed {rep.seed}"),
        (
            rep.replayed + rep.not_yet_replayed == rep.sample and rep.replayed == 1,
            f"{rep.replayed} replayed + {rep.not_yet_replayed} not yet = sample {rep.sample}",
        ),
        (same + different == rep.replayed, f"same verdict {same} + different {different}"),
        (identical <= calls and identical <= same, f"identical {identical} within same calls"),
        (firsts == rep.replayed - identical, f"first differences {firsts} = not identical"),
    ]
    print(
        f"measured (printed, not asserted): identical transcript {identical}/{rep.replayed}, "
        f"same tool calls {calls}, same verdict {same}, serving differences "
        f"{rep.serving_differences or 'none'}"
    )
    return results


def main() -> int:
    out = Path(sys.argv[1])
    results = check(out)
    for ok, text in results:
        print(("ok:   " if ok else "FAIL: ") + text)
    return 0 if all(ok for ok, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
