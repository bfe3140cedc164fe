"""Headless Chromium (Debian's `chromium` and `chromium-driver`) driven by Selenium, with
screenshots saved under var/test-artifacts/console/. Without the packages the browser tests
are skipped on a developer's machine and fail in CI (bin/ensure-services installs them)."""

import json
import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "var" / "test-artifacts" / "console"
CHROMIUM = ("chromium", "chromium-browser")


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
                     "--window-size=1600,1000"):
        options.add_argument(argument)
    if offline:
        options.add_argument("--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1")
        options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    return webdriver.Chrome(service=Service(executable_path=driver), options=options)


def screenshot(driver, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    # The whole page: widen to the document so the 24-hour chart is in the picture.
    width = driver.execute_script("return Math.max(document.body.scrollWidth, 1600)")
    height = driver.execute_script("return Math.max(document.body.scrollHeight, 1000)")
    driver.set_window_size(width, height)
    driver.save_screenshot(str(path))
    print(f"screenshot: {path}")
    return path


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
