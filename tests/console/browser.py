"""Headless Chromium (Debian's `chromium` and `chromium-driver`) driven by Selenium in a
1366 x 768 window (the laptop screen a console is judged on), with whole-page screenshots at
that width saved under var/test-artifacts/console/. Without the packages the browser tests
are skipped on a developer's machine and fail in CI (bin/ensure-services installs them)."""

import base64
import json
import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "var" / "test-artifacts" / "console"
CHROMIUM = ("chromium", "chromium-browser")
WIDTH, HEIGHT = 1366, 768


def _binary(names) -> str | None:
    return next((found for name in names if (found := shutil.which(name))), None)


def chromium_driver(*, offline: bool = False):
    """A headless Chromium session, or the test's skip (fail in CI) naming what is missing.
    ``offline``: no host name but the loopback ones resolves, so anything fetched from
    elsewhere fails, and the session logs its requests (requests_seen)."""
    browser, driver = _binary(CHROMIUM), _binary(("chromedriver",))
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        browser = None
    if browser is None or driver is None:
        message = "headless Chromium is not installed (bin/ensure-services installs chromium and chromium-driver)"
        pytest.fail(message) if os.environ.get("CI") else pytest.skip(message)
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     f"--window-size={WIDTH},{HEIGHT}"):
        options.add_argument(argument)
    logs = {"browser": "ALL"}  # console errors
    if offline:
        options.add_argument("--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1")
        logs["performance"] = "ALL"  # every request the page made
    options.set_capability("goog:loggingPrefs", logs)
    session = webdriver.Chrome(service=Service(executable_path=driver), options=options)
    # The page's viewport itself is 1366 x 768, whatever the window around it measures.
    session.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                            {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False})
    return session


def screenshot(driver, name: str) -> Path:
    """The whole page at the window's width (1366): as tall as the document, never wider."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    height = driver.execute_script("return document.documentElement.scrollHeight")
    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {
        "format": "png", "captureBeyondViewport": True,
        "clip": {"x": 0, "y": 0, "width": WIDTH, "height": height, "scale": 1}})
    path.write_bytes(base64.b64decode(shot["data"]))
    print(f"screenshot: {path}")
    return path


def layout_faults(driver) -> list[str]:
    """What is wrong with the page as laid out in the 1366-pixel window: a horizontal
    scrollbar, an instant broken over two lines, a console error."""
    faults = []
    scroll, client = driver.execute_script(
        "return [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    if scroll > client:
        faults.append(f"horizontal scrollbar: scrollWidth {scroll} > clientWidth {client}")
    wrapped = driver.execute_script(
        "return [...document.querySelectorAll('time.instant')]"
        ".filter(t => t.getClientRects().length > 1).map(t => t.textContent)")
    faults += [f"instant wrapped: {text}" for text in wrapped]
    faults += [f"console {entry['level']}: {entry['message']}" for entry in driver.get_log("browser")
               if entry["level"] in ("SEVERE", "WARNING")]
    return faults


def click_and_wait(driver, element, timeout: float = 10) -> None:
    """Click something that loads a new page, and wait until the old page is gone."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    page = driver.find_element(By.TAG_NAME, "html")
    element.click()
    # Asked about the old page while it is being replaced, chromedriver may answer "unknown
    # error: unhandled inspector error" instead of "stale element": ask again.
    WebDriverWait(driver, timeout, ignored_exceptions=(WebDriverException,)).until(
        expected_conditions.staleness_of(page))


def requests_seen(driver) -> dict[str, dict]:
    """The network requests of the session since the last call, from Chrome's performance
    log: {request id: {"url", "status", "failed"}} (status None while unanswered, failed
    the network error or block reason)."""
    seen: dict[str, dict] = {}
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        params = message.get("params", {})
        if message["method"] == "Network.requestWillBeSent":
            seen.setdefault(params["requestId"], {"status": None, "failed": None})["url"] = params["request"]["url"]
        elif message["method"] == "Network.responseReceived":
            response = params["response"]
            seen.setdefault(params["requestId"], {"failed": None}).update(url=response["url"], status=response["status"])
        elif message["method"] == "Network.loadingFailed":
            seen.setdefault(params["requestId"], {"url": None, "status": None})["failed"] = (
                params.get("blockedReason") or params.get("errorText") or "failed")
    return seen
