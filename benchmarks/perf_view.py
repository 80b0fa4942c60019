"""Issue 23, view stage: `poisson-tasks view` of the published noisy card (4,200 episodes).

Rows, each the median of `--repeats` runs:
- the write: `python -m poisson_tasks view --published reference-noisy --out FILE` in a fresh
  process (wall and CPU time, peak RSS), beside `python -m poisson_tasks card FOLDER` on the same
  records (card.md rendered from the same Artifact: the card's own cost), alternated run by run;
- the file's size, beside the records' own episodes.jsonl.gz;
- the first view in headless Chromium (Debian's chromium, through Selenium and chromedriver):
  from navigation start to the page's script marking itself ready (`performance.mark`) and to the
  first contentful paint, beside the same browser opening card.md as HTML (the markdown renderer's
  page, no data) to its load event. The browser is started once, outside the figures.

    .venv/bin/python benchmarks/perf_view.py            # a table
    .venv/bin/python benchmarks/perf_view.py --json     # the rows as one JSON list (perf.py)

Targets (issue 23): written in < 3 s, the file < 15 MB, the first view rendered in < 2 s.
Without chromium the render row says so and is not met.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import report  # the one table format, and the driver's JSON rows

from poisson_tasks.calibration.manifest import published_dir
from poisson_tasks.calibration.published import rebuild_published
from poisson_tasks.calibration.render import render_document
from poisson_tasks.view.markdown import card_html

NAME = "reference-noisy"
WRITE_S, SIZE_MB, RENDER_S = 3.0, 15.0, 2.0
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1400,1000",
)

Run = tuple[float, float, float]  # wall seconds, CPU seconds, peak RSS MiB


def timed(command: list[str], env: dict[str, str]) -> Run:
    """Wall and CPU seconds and peak RSS (MiB) of one fresh process."""
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        assert proc.stderr is not None
        raise SystemExit(f"{' '.join(command)} failed: {proc.stderr.read().decode()[-500:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def _median(runs: list[Run]) -> Run:
    wall, cpu, rss = zip(*runs, strict=True)
    return statistics.median(wall), statistics.median(cpu), statistics.median(rss)


def writes(out: Path, repeats: int, env: dict[str, str]) -> dict[str, Run]:
    view = [sys.executable, "-m", "poisson_tasks", "view", "--published", NAME, "--out", str(out)]
    card = [sys.executable, "-m", "poisson_tasks", "card", str(published_dir() / NAME)]
    timed(view, env)  # warm the page cache and the bytecode once; not counted
    timed(card, env)
    runs: dict[str, list[Run]] = {"view": [], "card": []}
    for _ in range(repeats):
        runs["view"].append(timed(view, env))
        runs["card"].append(timed(card, env))
    return {name: _median(figures) for name, figures in runs.items()}


def renders(page: Path, anchor: Path, repeats: int, profile: Path) -> dict[str, float] | None:
    """Median milliseconds: the page's ready mark and first contentful paint, and the anchor's
    load event; None without chromium."""
    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver_path is None:
        return None
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    chrome = webdriver.Chrome(service=Service(driver_path), options=options)
    ready, paint, card = [], [], []
    try:
        for _ in range(repeats + 1):  # the first pass warms the browser's caches; not counted
            chrome.get("about:blank")
            chrome.get(page.as_uri())
            marks = chrome.execute_script(
                "const r = performance.getEntriesByName('view-ready')[0];"
                "const p = performance.getEntriesByName('first-contentful-paint')[0];"
                "return [r ? r.startTime : null, p ? p.startTime : null];"
            )
            chrome.get("about:blank")
            chrome.get(anchor.as_uri())
            load = chrome.execute_script(
                "return performance.getEntriesByType('navigation')[0].loadEventEnd"
            )
            ready.append(marks[0])
            paint.append(marks[1])
            card.append(load)
    finally:
        chrome.quit()
    return {
        "ready": statistics.median(ready[1:]),
        "paint": statistics.median(paint[1:]),
        "card": statistics.median(card[1:]),
    }


def rows(
    write: dict[str, Run], size: int, gz: int, render: dict[str, float] | None
) -> list[dict[str, object]]:
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    wall, cpu, rss = write["view"]
    card_wall, card_cpu, card_rss = write["card"]
    out: list[dict[str, object]] = [
        {
            "stage": "view: write the published noisy report (4,200 episodes), CLI",
            "now": f"{wall:.2f} s (CPU {cpu:.2f} s), {rss:.0f} MiB",
            "anchor": f"card of the same records {card_wall:.2f} s (CPU {card_cpu:.2f} s), {card_rss:.0f} MiB",
            "target": f"< {WRITE_S:g} s",
            "ratio": f"{wall / card_wall:.2f}x card",
            "met": wall < WRITE_S,
            "note": f"median of the runs, each a fresh process; load average {load}",
        },
        {
            "stage": "view: the report's size",
            "now": f"{size / 1e6:.2f} MB",
            "anchor": f"its records' episodes.jsonl.gz {gz / 1e6:.2f} MB",
            "target": f"< {SIZE_MB:g} MB",
            "ratio": f"{size / gz:.2f}x records",
            "met": size < SIZE_MB * 1e6,
            "note": "one file: inline CSS, script, SVG; transcripts zlib-compressed per arm",
        },
    ]
    if render is None:
        out.append(
            {
                "stage": "view: first view in headless Chromium",
                "now": "not measured: chromium or chromedriver missing",
                "anchor": "",
                "target": f"< {RENDER_S:g} s",
                "ratio": "",
                "met": False,
                "note": "apt-get install chromium chromium-driver",
            }
        )
        return out
    out.append(
        {
            "stage": "view: first view in headless Chromium",
            "now": f"ready {render['ready'] / 1000:.2f} s, first paint {render['paint'] / 1000:.2f} s",
            "anchor": f"card.md as HTML, loaded {render['card'] / 1000:.2f} s",
            "target": f"< {RENDER_S:g} s",
            "ratio": f"{render['ready'] / render['card']:.2f}x card.md",
            "met": render["ready"] < RENDER_S * 1000,
            "note": "from navigation start, file://; median of the loads after one warm-up",
        }
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the rows as one JSON list")
    parser.add_argument("--repeats", type=int, default=3, help="runs per figure (median of them)")
    args = parser.parse_args()
    env = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="perf_view-") as tmp:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        page = Path(tmp) / "noisy.html"
        write = writes(page, args.repeats, env)
        anchor = Path(tmp) / "card.html"
        body = card_html(render_document(rebuild_published(NAME)))
        anchor.write_text(f"<!doctype html><meta charset=utf-8><title>card</title>{body}\n")
        render = renders(page, anchor, args.repeats, Path(tmp) / "profile")
        size = page.stat().st_size
    gz = (published_dir() / NAME / "episodes.jsonl.gz").stat().st_size
    table = rows(write, size, gz, render)
    report(table, args.json)


if __name__ == "__main__":
    main()
