"""`trainlaunch ui` in a real headless browser (Debian's chromium through chromedriver): the app
list, an app page whose charts have drawn, a log line arriving live, stacks on demand, the
sweep page; screenshots as test artefacts; no request leaves 127.0.0.1 (the browser's own
network log) and the page's Content-Security-Policy is never violated (its console log).

Skips when chromium is absent, unless TRAINLAUNCH_REQUIRE_BROWSER is set (CI sets it).
Screenshots go to $TRAINLAUNCH_TEST_ARTEFACTS (default: the test's tmp_path).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.conftest import CLI
from tests.process.ui_helpers import UI, enc, finished_sweep, start_ranks_app, ui_server

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
HAVE_BROWSER = os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)
WAIT_S = 60

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not HAVE_BROWSER and not os.environ.get("TRAINLAUNCH_REQUIRE_BROWSER"),
        reason="needs chromium and chromedriver (TRAINLAUNCH_REQUIRE_BROWSER=1 makes this fail)",
    ),
]


@pytest.fixture
def artefacts(tmp_path: Path) -> Path:
    """Where screenshots go: $TRAINLAUNCH_TEST_ARTEFACTS, else the test's own tmp_path."""
    where = Path(os.environ.get("TRAINLAUNCH_TEST_ARTEFACTS") or tmp_path / "artefacts")
    where.mkdir(parents=True, exist_ok=True)
    return where


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[object]:
    """Headless chromium with its network (performance) and console logs kept."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-dev-shm-usage", "--window-size=1300,1900", f"--user-data-dir={tmp_path / 'profile'}",
    ):  # fmt: skip
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()


def wait_for(driver: object, what: str, condition: object) -> object:
    """Poll condition(driver) until truthy (the page re-renders as it refreshes: an element
    read just before it was replaced is read again on the next poll)."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(
        driver, WAIT_S, poll_frequency=0.1, ignored_exceptions=(StaleElementReferenceException,)
    )  # type: ignore[arg-type]
    return wait.until(condition, message=what)  # type: ignore[arg-type]


def css(driver: object, selector: str) -> list:
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, selector)  # type: ignore[attr-defined]


def text(driver: object, selector: str) -> str:
    """The text of the first element matching selector now ("" if none), read in one step."""
    script = "const e = document.querySelector(arguments[0]); return e ? e.textContent : '';"
    return str(driver.execute_script(script, selector))  # type: ignore[attr-defined]


def texts(driver: object, selector: str) -> list[str]:
    """The text of every element matching selector now, read in one step."""
    script = "return [...document.querySelectorAll(arguments[0])].map(e => e.textContent);"
    return list(driver.execute_script(script, selector))  # type: ignore[attr-defined]


def attrs(driver: object, selector: str, name: str) -> list[str]:
    """An attribute of every element matching selector now."""
    script = "return [...document.querySelectorAll(arguments[0])].map(e => e.getAttribute(arguments[1]));"
    return list(driver.execute_script(script, selector, name))  # type: ignore[attr-defined]


def click(driver: object, selector: str) -> None:
    driver.execute_script("document.querySelector(arguments[0]).click()", selector)  # type: ignore[attr-defined]


def requested_urls(driver: object) -> list[str]:
    """Every URL the browser asked for since the last call (its DevTools network events)."""
    urls = []
    for entry in driver.get_log("performance"):  # type: ignore[attr-defined]
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def test_the_dashboard_in_a_real_browser(
    cli: CLI, tmp_path: Path, browser: object, artefacts: Path
) -> None:
    go = tmp_path / "go"
    handle = start_ranks_app(cli, go)
    sweep = finished_sweep(cli)
    with ui_server(cli) as ui:
        seen = _app_list(browser, ui, handle)
        seen += _app_page(browser, ui, handle, go, artefacts)
        seen += _sweep_page(browser, ui, sweep, artefacts)
        cli("stop", handle, check=True)

    assert seen and any("/api/apps/" in u for u in seen) and any("/charts/" in u for u in seen)
    # the browser's own pages (chrome://new-tab-page...) and data: URLs never leave it
    left = [u for u in seen if urlsplit(u).scheme not in ("chrome", "data", "about", "blob")]
    assert [u for u in left if urlsplit(u).hostname != "127.0.0.1"] == []
    assert {urlsplit(u).scheme for u in left} == {"http"}
    problems = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]  # type: ignore[attr-defined]
    assert problems == []  # a CSP violation or a script error would be here


def _app_list(driver: object, ui: UI, handle: str) -> list[str]:
    driver.get(ui.url)  # type: ignore[attr-defined]
    wait_for(driver, "the token to leave the address", lambda d: "token=" not in d.current_url)
    wait_for(driver, "the app list", lambda d: handle in text(d, "#apps"))
    rows = texts(driver, "#apps tbody tr")
    assert len(rows) == 3  # the running app and the sweep's two points
    assert "RUNNING" in rows[0] and "2/2" in rows[0]
    # the name filter narrows the list, in the page
    box = css(driver, "#filter-name")[0]
    box.send_keys("train_tiny")
    wait_for(driver, "the filter", lambda d: len(texts(d, "#apps tbody tr")) == 2)
    box.clear()
    box.send_keys("zzz-no-such")
    wait_for(driver, "the empty filter", lambda d: "no app matches" in text(d, "#apps"))
    box.clear()
    return requested_urls(driver)


def _app_page(driver: object, ui: UI, handle: str, go: Path, artefacts: Path) -> list[str]:
    driver.get(f"{ui.base}/#/app/{enc(handle)}")  # type: ignore[attr-defined]

    def charts_drawn(d: object) -> bool:
        points = attrs(d, "#charts .chart-box[data-metric='loss'] svg polyline.series", "points")
        return len(points) == 2 and all(len(p.split()) == 30 for p in points)

    wait_for(driver, "the loss chart's two ranks", charts_drawn)
    wait_for(driver, "the lr chart", lambda d: texts(d, "#charts .chart-box[data-metric='lr'] svg"))
    wait_for(driver, "the rank table", lambda d: len(texts(d, "#ranks tbody tr")) == 2)
    assert "rank 1 step 29" in text(driver, "#ranks")
    assert "WANDB_API_KEY=********" in text(driver, "#describe")
    assert "hush-hush" not in driver.page_source  # type: ignore[attr-defined]

    go.touch()  # the ranks print their next line now: the tail shows it without a reload
    wait_for(driver, "a live log line", lambda d: "go seen by rank 0" in text(d, "#logs"))
    rank_filter = css(driver, "#log-ranks")[0]
    rank_filter.send_keys("1\n")

    def only_rank_1(d: object) -> bool:
        labels = texts(d, "#logs .label")
        return bool(labels) and all("rank 1]" in t for t in labels)

    wait_for(driver, "the rank filter", only_rank_1)
    rank_filter.clear()
    rank_filter.send_keys("\n")

    click(driver, "#dump-stacks")
    wait_for(driver, "the stacks", lambda d: "ranks.py" in text(d, "#stacks-text"))
    driver.execute_script("window.scrollTo(0, 0)")  # type: ignore[attr-defined]
    driver.save_screenshot(str(artefacts / "ui-app.png"))  # type: ignore[attr-defined]
    return requested_urls(driver)


def _sweep_page(driver: object, ui: UI, sweep: str, artefacts: Path) -> list[str]:
    driver.get(f"{ui.base}/#/sweeps")  # type: ignore[attr-defined]
    wait_for(driver, "the sweep list", lambda d: len(texts(d, "main tbody tr")) == 1)
    click(driver, "main tbody tr")
    wait_for(driver, "the points", lambda d: len(texts(d, "#points tbody tr")) == 2)
    wait_for(driver, "the overlay", lambda d: len(texts(d, "#overlay svg polyline.series")) == 2)
    wait_for(driver, "the scatter", lambda d: len(texts(d, "#scatter svg circle.point")) == 2)

    def first_lr(d: object) -> str:
        return texts(d, "#points tbody tr td")[1]

    assert first_lr(driver) == "0.3"
    click(driver, "#points th[data-key='p:lr']")  # sort by lr, ascending
    wait_for(driver, "sorting by lr", lambda d: first_lr(d) == "0.03")
    click(driver, "#points th[data-key='last:loss']")  # by the loss: lr 0.3 is lower
    wait_for(driver, "sorting by loss", lambda d: first_lr(d) == "0.3")

    click(driver, "#sweep-log")
    wait_for(driver, "the log scale", lambda d: "loss (log)" in text(d, "#overlay svg"))
    driver.save_screenshot(str(artefacts / "ui-sweep.png"))  # type: ignore[attr-defined]
    return requested_urls(driver)
