"""CI (issue 25): the smoke design cut in 4 shards, run concurrently against 4 reference endpoints
on loopback, merged, and its card compared with the unsharded card under the one comparison
(calibration.sameness); then merge's refusals, each one line from the real command line.

    python scripts/ci/check_shards.py WORKDIR

Reference-policy figures are baselines of the instrument, never a model's results.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))  # the vLLM-shaped loopback double the tests use

from endpoint_double import Answer, serve  # noqa: E402
from test_real_endpoints import VLLM_MODELS  # noqa: E402

from poisson_tasks.calibration import card_from_run  # noqa: E402
from poisson_tasks.calibration.sameness import TIME_AND_PLACEMENT, compare_cards  # noqa: E402
from poisson_tasks.prereg import load_preregistration  # noqa: E402

SMOKE = ROOT / "preregistrations" / "smoke.yaml"
CLI = [sys.executable, "-m", "poisson_tasks.cli"]
N = 4


def cli(*args: str | Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=600)
    if check and done.returncode != 0:
        raise SystemExit(f"FAIL: poisson-tasks {' '.join(map(str, args))}: {done.stderr}")
    return done


def start_endpoints(work: Path) -> tuple[list[subprocess.Popen[bytes]], list[str]]:
    servers, urls = [], []
    for index in range(N):
        log = (work / f"endpoint-{index}.log").open("wb")
        servers.append(
            subprocess.Popen(
                [*CLI, "serve-reference", "--port", "0"], stdout=log, stderr=subprocess.STDOUT
            )
        )
    for index in range(N):
        log_path = work / f"endpoint-{index}.log"
        for _ in range(300):
            found = re.search(r"http://127\.0\.0\.1:\d+/v1", log_path.read_text())
            if found:
                urls.append(found.group(0))
                break
            time.sleep(0.1)
        else:
            raise SystemExit(f"FAIL: reference endpoint {index} did not start")
    return servers, urls


def refused(what: str, folders: list[Path], out: Path, says: str) -> None:
    done = cli("merge", *folders, "--out", out, check=False)
    lines = done.stderr.strip().splitlines()
    ok = done.returncode == 2 and len(lines) == 1 and says in lines[0] and not out.exists()
    print(f"  {what}: exit {done.returncode}: {lines[0] if lines else '(nothing)'}")
    if not ok:
        raise SystemExit(f"FAIL: {what} was not refused in one line naming {says!r}")


def copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def main() -> None:
    work = Path(sys.argv[1])
    servers, urls = start_endpoints(work)
    try:
        started = time.monotonic()
        shards = [work / f"shard-{index}" for index in range(N)]
        runs = [
            subprocess.Popen(
                [
                    *CLI,
                    "run",
                    str(SMOKE),
                    "--shard",
                    f"{index}/{N}",
                    "--out",
                    str(shards[index]),
                    "--base-url",
                    urls[index],
                    "--quiet",
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for index in range(N)
        ]
        for index, run in enumerate(runs):
            _, err = run.communicate(timeout=600)
            if run.returncode != 0:
                raise SystemExit(f"FAIL: shard {index}/{N}: {err}")
            print("  " + err.splitlines()[0] + " | " + err.splitlines()[1].strip())  # the summary
        print(
            f"4 shards, concurrently, against {', '.join(urls)}: {time.monotonic() - started:.1f} s"
        )
        merged = work / "merged"
        print(cli("merge", *shards, "--out", merged).stdout.strip())
        whole = work / "whole"
        cli("run", SMOKE, "--out", whole, "--quiet")  # one machine, in-process endpoint
        comparison = compare_cards(card_from_run(merged), card_from_run(whole))
        excluded = ", ".join(e.path for e in TIME_AND_PLACEMENT)
        print(f"merged card against the unsharded card (less {excluded}): {comparison.line()}")
        if not comparison.equal:
            raise SystemExit("FAIL: the merged card is not the one-machine card")

        print("refusals (each one line, exit 2, nothing written):")
        other_file = work / "other.yaml"
        doc = yaml.safe_load(SMOKE.read_text())
        doc["decoding"]["temperature"] = 0.7
        other_file.write_text(yaml.safe_dump(doc, sort_keys=False))
        other = work / "other-shard-3"
        cli(
            "run", other_file, "--shard", f"3/{N}", "--out", other, "--base-url", urls[3], "--quiet"
        )
        refused(
            "a shard from another pre-registration",
            [*shards[:3], other],
            work / "m1",
            "was made by another pre-registration",
        )
        # Another build cannot be installed beside this one here: a copy's header is edited to
        # record another generator hash, which is all the merge reads of a build.
        built = copy(shards[2], work / "shard-2-other-build")
        header = json.loads((built / "run.json").read_text())
        header["generator_hash"] = "0" * 64
        (built / "run.json").write_text(json.dumps(header))
        refused(
            "a shard of another generator build (edited header)",
            [*shards[:2], built, shards[3]],
            work / "m2",
            "another build of the generator",
        )
        # A shard folder is input from another machine: a forged count of shards is bounded by
        # the plan's own tasks before anything is sized by it (it once allocated without bound).
        plan = load_preregistration(SMOKE)  # a shard holds whole tasks: (arm, seed) pairs
        forged = copy(shards[2], work / "shard-2-forged-count")
        header = json.loads((forged / "run.json").read_text())
        header["shard"]["count"] = 10**12
        (forged / "run.json").write_text(json.dumps(header))
        refused(
            "a shard that says it is one of 10^12 (forged run.json)",
            [*shards[:2], forged, shards[3]],
            work / "m7",
            "shard.count 1000000000000 is not 1 to the plan's "
            f"{len(plan.arms) * len(plan.seeds)} tasks",
        )
        versioned = []
        for index, version in enumerate(("0.29.0", "0.28.1")):
            routes = {
                "/version": Answer(200, {"version": version}),
                "/v1/models": Answer(200, VLLM_MODELS),
            }
            with serve(routes=routes) as double:
                vdoc = yaml.safe_load(SMOKE.read_text())
                vdoc["model"] = {
                    "provider": "vllm",
                    "model": "double-model",
                    "base_url": double.base_url,
                    "revision": "0123456789abcdef",
                }
                vfile = work / "vllm.yaml"
                vfile.write_text(yaml.safe_dump(vdoc, sort_keys=False))
                folder = work / f"vllm-shard-{index}"
                cli("run", vfile, "--shard", f"{index}/2", "--out", folder, "--quiet")
                versioned.append(folder)
        refused(
            "a shard served by another vLLM version (loopback double)",
            versioned,
            work / "m3",
            "engine version 0.29.0 -> 0.28.1",
        )
        cut = copy(shards[1], work / "shard-1-killed")
        lines = (cut / "episodes.jsonl").read_bytes().splitlines(keepends=True)
        (cut / "episodes.jsonl").write_bytes(b"".join(lines[:-1]))
        refused(
            "a missing slot (a shard's last line gone)",
            [shards[0], cut, *shards[2:]],
            work / "m4",
            f"of the plan's {len(plan.slots())} slots is missing",
        )
        doubled = copy(shards[1], work / "shard-1-doubled")
        first = (shards[0] / "episodes.jsonl").read_bytes().splitlines(keepends=True)[0]
        with (doubled / "episodes.jsonl").open("ab") as fh:
            fh.write(first)
        refused(
            "a duplicated slot", [shards[0], doubled, *shards[2:]], work / "m5", "is duplicated"
        )
        refused("a missing shard", shards[:3], work / "m6", f"shard 3/{N} is missing")
    finally:
        for server in servers:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    main()
