"""Read vf-eval's traces.jsonl files back into verdicts and check them against verify().

For every episode: the task is regenerated from its (arm, seed), the calls are read from the trace's
messages, and verify() judges them directly; the export's own verdict (trace.info), its reward and
its metrics must say the same. Exit 1 on any difference, on a provider failure, or when the files
hold too few episodes or too few kinds of outcome to show anything, or no episode of a /leaky arm
that passes its own reading and fails the strict one (the reward named strict must read 0.0 there).

    python scripts/ci/check_vf_traces.py out/*/traces.jsonl
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

from poisson_tasks.generator import generate
from poisson_tasks.runner.nulltrace import TRACE_INFO_KEY, read_turns
from poisson_tasks.verifier import OUTCOMES, FormatReport, verify

MIN_EPISODES = 10
MIN_OUTCOMES = 2
# Episodes of a /leaky arm that pass its own reading and fail the strict one: the reward named
# strict must say 0.0 on them. The evals hold one such arm, so at least one must be seen.
LEAKY_ONLY = "leaky arm: passed, strict label not passed"


def check(path: Path, problems: list[str], outcomes: Counter[str]) -> int:
    n = 0
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        episode = json.loads(raw)
        trace = episode["traces"][-1]
        data = trace["task"]["data"]
        where = f"{path.parent.name}:{number} {data['arm_id']} seed {data['seed']}"
        n += 1
        stop = trace.get("stop_condition")
        if stop not in ("agent_completed", "max_turns"):
            problems.append(f"{where}: the rollout stopped on {stop}: {trace.get('errors')}")
            continue
        bundle = generate(data["arm_id"], data["seed"])
        turns, _, _, replies, text_calls = read_turns(trace)
        hit = stop == "max_turns"
        v = verify(bundle, turns, not hit, hit, FormatReport(unparsed_calls=len(text_calls)))
        info = trace["info"].get(TRACE_INFO_KEY, {})
        want = {
            "outcome": v.outcome,
            "passed": v.passed,
            "leaky_pass": v.leaky_pass,
            "malformed_clause": v.malformed_clause,
            "goal_stages": v.goal_stages,
            "final_state": [list(r) for r in v.final_state],
            "tool_calls": sum(len(t) for t in turns),
            "model_calls": replies,
        }
        got = {k: info.get(k) for k in want}
        if got != want:
            diff = {k: (got[k], want[k]) for k in want if got[k] != want[k]}
            problems.append(f"{where}: the export's verdict differs from verify(): {diff}")
        strict = (trace.get("rewards") or {}).get("strict") or {}
        if strict.get("score") != (1.0 if v.strict_label == "passed" else 0.0):
            problems.append(
                f"{where}: reward strict {strict.get('score')} but the strict label is "
                f"{v.strict_label}"
            )
        metrics = trace.get("metrics") or {}
        if (
            metrics.get("outcome") != float(OUTCOMES.index(v.outcome))
            or metrics.get("leaky_pass") != (1.0 if v.leaky_pass else 0.0)
            or metrics.get("arm_pass") != (1.0 if v.passed else 0.0)
        ):
            problems.append(f"{where}: metrics {metrics} do not match the verdict {v.outcome}")
        if bundle.verifier == "leaky" and v.passed and v.strict_label != "passed":
            outcomes[LEAKY_ONLY] += 1
        outcomes[v.outcome] += 1
    return n


def main(paths: list[str]) -> int:
    problems: list[str] = []
    outcomes: Counter[str] = Counter()
    total = sum(check(Path(p), problems, outcomes) for p in paths)
    leaky_only = outcomes.pop(LEAKY_ONLY, 0)
    print(f"{total} episodes in {len(paths)} traces.jsonl: {dict(sorted(outcomes.items()))}")
    print(f"{leaky_only} on a /leaky arm passed its own reading with the strict reward at 0.0")
    if total < MIN_EPISODES:
        problems.append(f"only {total} episodes (need {MIN_EPISODES})")
    if leaky_only == 0:
        problems.append(
            "no /leaky episode passed leaky and failed strict: the strict reward went untested"
        )
    if len(outcomes) < MIN_OUTCOMES:
        problems.append(f"only {len(outcomes)} kind(s) of outcome (need {MIN_OUTCOMES})")
    for p in problems:
        print("FAIL:", p)
    if not problems:
        print("every trace reads as the verdict verify() gives on its calls")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
