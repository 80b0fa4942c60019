"""docs/view.md's screenshots, taken from the published reference-noisy report in chromium.

    .venv/bin/python scripts/view_screenshots.py        # writes docs/view-cell.png, docs/view-pair.png
                                                        # and docs/images/view-glossary.png

Needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver). The panel
alone is captured and its colours reduced (Pillow), so each PNG stays small.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from PIL import Image
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from poisson_tasks.view import write_view

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
GLOSSARY_SHOT = DOCS / "images" / "view-glossary.png"  # a term's definition shown on hover
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
    "--window-size=1280,820",
)


def _small(path: Path) -> None:
    image = Image.open(path).convert("RGB")
    image.quantize(colors=128, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)


def main() -> int:
    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver_path is None:
        print("needs chromium and chromedriver (apt-get install chromium chromium-driver)")
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "noisy.html"
        write_view(page, published="reference-noisy")
        options = webdriver.ChromeOptions()
        options.binary_location = chromium
        for flag in (*FLAGS, f"--user-data-dir={tmp}/profile"):
            options.add_argument(flag)
        chrome = webdriver.Chrome(service=Service(driver_path), options=options)
        wait = WebDriverWait(chrome, 30)
        try:
            chrome.get(page.as_uri())
            wait.until(lambda c: c.execute_script("return document.documentElement.dataset.ready"))
            chrome.find_element(By.CSS_SELECTOR, 'button.open[data-arm="depth:d5"]').click()
            wait.until(lambda c: c.find_elements(By.CSS_SELECTOR, "[data-role=episodes] tr.ep"))
            Select(
                chrome.find_element(By.CSS_SELECTOR, "[data-role=outcome-filter]")
            ).select_by_value("wrong_state")
            wait.until(lambda c: "outcome=wrong_state" in c.current_url)
            wait.until(lambda c: c.find_elements(By.CSS_SELECTOR, "[data-role=episodes] tr.ep"))
            chrome.save_screenshot(str(DOCS / "view-cell.png"))
            seed = chrome.execute_script(
                "return JSON.parse(document.getElementById('meta').textContent).seeds[2]"
            )
            chrome.execute_script(
                "location.hash = '/?view=pair&pair=' + encodeURIComponent('depth:d3|depth:d5') + '&seed=' + arguments[0]",
                seed,
            )
            wait.until(lambda c: c.find_elements(By.CSS_SELECTOR, "[data-role=pair-attempts]"))
            chrome.save_screenshot(str(DOCS / "view-pair.png"))
            chrome.get(page.as_uri())
            wait.until(lambda c: c.execute_script("return document.documentElement.dataset.ready"))
            churn = next(
                e
                for e in chrome.find_elements(By.CSS_SELECTOR, "#knob-depth th .term")
                if e.text == "churn"
            )
            chrome.execute_script("arguments[0].scrollIntoView({block: 'center'})", churn)
            ActionChains(chrome).move_to_element(churn).perform()
            wait.until(
                lambda c: (
                    "shared seeds"
                    in c.execute_script(
                        "return getComputedStyle(arguments[0], '::after').content", churn
                    )
                )
            )
            chrome.save_screenshot(str(GLOSSARY_SHOT))
        finally:
            chrome.quit()
    for shot in (DOCS / "view-cell.png", DOCS / "view-pair.png", GLOSSARY_SHOT):
        _small(shot)
        print(f"{shot}: {shot.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
