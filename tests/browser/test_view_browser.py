"""The report in a real browser: Debian's chromium, driven through its chromedriver (Selenium).

CI runs these in their own step (scripts/ci/browser); the fast suite leaves them out (marker
`browser`). Without chromium or chromedriver they skip with one line. Every step saves a
screenshot under $VIEW_SCREENSHOTS (default ci-output/browser/, never committed).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
if CHROMIUM is None or DRIVER is None:
    pytest.skip(
        "browser tests skipped: chromium and chromedriver are not installed "
        "(apt-get install chromium chromium-driver)",
        allow_module_level=True,
    )

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webelement import WebElement  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402
from view_runs import small_run  # noqa: E402  (tests/ is on pytest's pythonpath)

from poisson_tasks.calibration.published import rebuild_published  # noqa: E402
from poisson_tasks.glossary import lookup  # noqa: E402
from poisson_tasks.view import write_view  # noqa: E402

pytestmark = pytest.mark.browser
ROOT = Path(__file__).resolve().parents[2]
SHOTS = Path(os.environ.get("VIEW_SCREENSHOTS", ROOT / "ci-output" / "browser"))
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
REORDERED = "\u202egnp.exe\x1b[31m"  # a right-to-left override and a terminal escape
HOSTILE = (
    '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'
    '<a href="javascript:window.__pwned=3">click</a>'
)


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[webdriver.Chrome]:
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    chrome = webdriver.Chrome(service=Service(str(DRIVER)), options=options)
    SHOTS.mkdir(parents=True, exist_ok=True)
    yield chrome
    chrome.quit()


def _open(chrome: webdriver.Chrome, page: Path) -> str:
    chrome.get("about:blank")
    chrome.get_log("browser")  # drain what came before this page
    chrome.get_log("performance")
    url = page.resolve().as_uri()
    chrome.get(url)
    WebDriverWait(chrome, 20).until(
        lambda c: c.execute_script("return document.documentElement.dataset.ready") == "1"
    )
    return url


def _shot(chrome: webdriver.Chrome, name: str) -> None:
    chrome.save_screenshot(str(SHOTS / f"{name}.png"))
    print(f"step {name}: ok (screenshot {SHOTS / name}.png)")


def _click(chrome: webdriver.Chrome, element: WebElement) -> None:
    chrome.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
    element.click()


def _wait(chrome: webdriver.Chrome, css: str) -> list[WebElement]:
    WebDriverWait(chrome, 20).until(lambda c: c.find_elements(By.CSS_SELECTOR, css))
    return chrome.find_elements(By.CSS_SELECTOR, css)


def _quiet(chrome: webdriver.Chrome, url: str) -> None:
    """No console message at warning level or above, and no request but the page itself."""
    logs = [e for e in chrome.get_log("browser") if e["level"] in ("WARNING", "SEVERE")]
    assert logs == [], logs
    requested: set[str] = set()
    for entry in chrome.get_log("performance"):
        message: dict[str, Any] = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            requested.add(message["params"]["request"]["url"])
    assert requested <= {url}, requested - {url}
    print(f"console: no warning or error; requests: {sorted(requested)}")


@pytest.fixture(scope="module")
def noisy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report") / "reference-noisy.html"
    write_view(out, published="reference-noisy")
    return out


def test_the_published_noisy_report(driver: webdriver.Chrome, noisy: Path) -> None:
    card = rebuild_published("reference-noisy")
    url = _open(driver, noisy)
    _shot(driver, "1-card")

    _click(driver, driver.find_element(By.CSS_SELECTOR, 'button.open[data-arm="depth:d5"]'))
    _wait(driver, "[data-role=episodes] tr.ep")
    assert "depth:d5" in driver.find_element(By.ID, "panelbody").text
    _shot(driver, "2-depth-d5-cell")

    Select(driver.find_element(By.CSS_SELECTOR, "[data-role=outcome-filter]")).select_by_value(
        "wrong_state"
    )
    WebDriverWait(driver, 20).until(lambda c: "outcome=wrong_state" in c.current_url)
    rows = _wait(driver, "[data-role=episodes] tr.ep")
    assert {row.get_attribute("data-outcome") for row in rows} == {"wrong_state"}
    assert len(rows) == card.cell("depth:d5").outcomes["wrong_state"]
    _shot(driver, "3-filtered-wrong-state")

    # an episode that made calls, so a reference step and the model's sit side by side
    made_calls = [r for r in rows if r.find_elements(By.CSS_SELECTOR, "td")[6].text != "0"]
    _click(driver, made_calls[0])
    verdict = _wait(driver, "[data-role=verdict]")[0]
    assert "wrong_state" in verdict.text and "goal stages reached" in verdict.text
    divergence = driver.find_element(By.CSS_SELECTOR, "[data-role=divergence]").text
    assert divergence.startswith("First divergence at step")
    reference = driver.find_element(By.CSS_SELECTOR, "[data-role=reference]")
    marked = reference.find_elements(By.CSS_SELECTOR, "tr.diverge")
    assert len(marked) == 1
    assert len(reference.find_elements(By.CSS_SELECTOR, "tr[data-step]")) >= 5  # d5: five calls
    _shot(driver, "4-episode")
    driver.execute_script("arguments[0].scrollIntoView()", reference)
    _shot(driver, "5-episode-reference")

    _click(driver, driver.find_element(By.CSS_SELECTOR, "#panelbody button[data-pair]"))
    _wait(driver, "[data-role=pair-attempts]")
    title = driver.find_element(By.CSS_SELECTOR, "[data-role=pair-title]").text
    assert "depth:d5" in title and " beside " in title
    changed = driver.find_element(By.CSS_SELECTOR, "[data-role=changed]").text
    assert "goal stage" in changed
    sides = driver.find_elements(By.CSS_SELECTOR, "[data-role=pair-attempts] > div")
    assert len(sides) == 2 and all(s.find_elements(By.CSS_SELECTOR, ".attempt") for s in sides)
    _shot(driver, "6-paired")
    # issue 34 item 5: no literal backtick and no count with the wrong noun anywhere on the page;
    # depth:d1 beside depth:d2 at a seed, where an attempt makes a single call
    text = driver.execute_script("return document.body.innerText")
    seed = driver.execute_script(
        "return JSON.parse(document.getElementById('meta').textContent).seeds[0]"
    )
    driver.execute_script(
        "location.hash = '/?view=pair&pair=' + encodeURIComponent('depth:d1|depth:d2')"
        " + '&seed=' + arguments[0]",
        seed,
    )
    _wait(driver, "[data-role=pair-attempts] .attempt")
    single = driver.find_element(By.CSS_SELECTOR, "[data-role=pair-attempts]").text
    assert " · 1 call · " in single, single
    for shown in (text, single):
        assert "`" not in shown
        assert not re.search(r"\b1 (calls|episodes|tools|retries|attempts)\b", shown)
    _quiet(driver, url)


def test_a_terms_definition_shows_on_hover(driver: webdriver.Chrome, noisy: Path) -> None:
    """Issue 34 item 5: a card's term shows its glossary definition when the pointer rests on it."""
    url = _open(driver, noisy)
    churn = next(
        e
        for e in driver.find_elements(By.CSS_SELECTOR, "#knob-depth th .term")
        if e.text == "churn"
    )
    after = "return getComputedStyle(arguments[0], '::after').content"
    assert driver.execute_script(after, churn) in ("none", "normal", '""')
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", churn)
    ActionChains(driver).move_to_element(churn).perform()
    term = lookup("churn")
    assert term is not None
    WebDriverWait(driver, 10).until(lambda c: term.definition in c.execute_script(after, churn))
    _shot(driver, "8-glossary-hover")
    glossary = driver.find_element(By.ID, "glossary").text
    assert "churn" in glossary and term.definition in glossary
    _quiet(driver, url)


def test_hostile_transcripts_do_nothing(driver: webdriver.Chrome, tmp_path: Path) -> None:
    """Markup in what a model and a server wrote (made up here, for this test) shows as text."""

    def edit(doc: dict[str, Any]) -> None:
        transcript = doc["transcript"]
        transcript["messages"][-1]["content"] = f"<think>{HOSTILE}</think>{HOSTILE}{REORDERED}"
        transcript["failed_responses"] = [{"status": 500, "body": HOSTILE}]
        doc["error"] = HOSTILE

    folder = small_run(tmp_path / "run", arms=("depth:d1", "depth:d2"), seeds=2, edit=edit)
    out = tmp_path / "hostile.html"
    write_view(out, folder)
    url = _open(driver, out)
    _click(driver, driver.find_element(By.CSS_SELECTOR, 'button.open[data-arm="depth:d1"]'))
    _click(driver, _wait(driver, "[data-role=episodes] tr.ep")[0])
    _wait(driver, "[data-role=verdict]")
    panel = driver.find_element(By.ID, "panelbody")
    assert "<script>window.__pwned=1</script>" in panel.text
    assert "\\u202egnp.exe\\x1b[31m" in panel.text and "\u202e" not in panel.text  # as card.md
    assert panel.find_elements(By.CSS_SELECTOR, "[data-role=think]")
    assert driver.execute_script("return window.__pwned === undefined")
    assert not driver.find_elements(By.CSS_SELECTOR, "#panelbody img, #panelbody a, img[onerror]")
    _shot(driver, "7-hostile-episode")
    _quiet(driver, url)


THAI = "สวัสดี"  # one token of a script with no spaces, the slowest to lay out of those tried


@pytest.mark.parametrize("size", [1_000_000, 3_000_000], ids=["1 MB", "3 MB"])
def test_a_long_unbroken_reply_opens_its_episode_under_a_second(
    driver: webdriver.Chrome, tmp_path: Path, size: int
) -> None:
    """A model that degenerates into one token repeated without a space (made up here): the
    episode's panel opens in under a second, the reply shown cut with buttons for the rest."""
    reply = (THAI * (size // len(THAI) + 1))[:size]

    def edit(doc: dict[str, Any]) -> None:
        transcript = doc["transcript"]
        transcript["messages"][-1]["content"] = reply
        transcript["responses"][-1]["choices"][0]["message"]["content"] = reply

    folder = small_run(tmp_path / "run", arms=("depth:d1",), seeds=1, edit=edit)
    out = tmp_path / "long.html"
    write_view(out, folder)
    url = _open(driver, out)
    _click(driver, driver.find_element(By.CSS_SELECTOR, 'button.open[data-arm="depth:d1"]'))
    line = _wait(driver, "[data-role=episodes] tr.ep")[0].get_attribute("data-line")
    driver.set_script_timeout(120)
    elapsed = driver.execute_async_script(OPEN_EPISODE, "depth:d1", line)
    print(f"a {size:,}-character unbroken reply: its episode panel open in {elapsed:.0f} ms")
    assert elapsed < 1000
    long = driver.find_elements(By.CSS_SELECTOR, "#panelbody [data-role=turn] [data-role=long]")
    assert long and len(long[0].text) < 5_000 + 200  # cut at 5,000, and its buttons
    more = long[0].find_element(By.CSS_SELECTOR, "[data-role=show-more]")
    assert more.text.startswith(f"… {size - 5000:,} more characters")
    _click(driver, more)
    assert (
        long[0]
        .find_element(By.CSS_SELECTOR, "[data-role=show-more]")
        .text.startswith(f"… {size - 15_000:,} more characters")
    )
    _shot(driver, f"8-long-reply-{size // 1_000_000}mb")
    _quiet(driver, url)


# Opens one episode of an arm and reports the milliseconds until its panel is laid out and a
# frame has been drawn (the time a person waits after the click).
OPEN_EPISODE = """
const [arm, line, done] = arguments;
const t0 = performance.now();
location.hash = "/?view=episode&arm=" + encodeURIComponent(arm) + "&line=" + line;
const laidOut = () => {
  document.body.offsetHeight;
  requestAnimationFrame(() => setTimeout(() => done(performance.now() - t0), 0));
};
const wait = () => document.querySelector("[data-role=verdict]") ? laidOut() : setTimeout(wait, 5);
wait();
"""
