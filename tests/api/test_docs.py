"""The served API docs work offline: every asset they load is one of our own static files."""

import re
import time
from urllib.parse import urlsplit

import pytest
from django.test import Client
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from tests.console.browser import chromium_driver, requests_seen

pytestmark = pytest.mark.django_db

ASSET_REFERENCE = re.compile(r'(?:src|href)="([^"]+)"')


@pytest.fixture
def static_client(settings):
    # Tests do not run collectstatic: WhiteNoise serves straight from the apps' static folders.
    settings.WHITENOISE_USE_FINDERS = True
    return Client()


@pytest.mark.parametrize("page", ["/api/docs/", "/api/redoc/"])
def test_docs__load_every_asset_from_our_own_static_url(static_client, settings, page):
    response = static_client.get(page)
    assert response.status_code == 200
    html = response.content.decode()
    assert not re.findall(r"(?:https?:)?//[\w.-]+\.\w+", html), "the page names an outside host"
    assets = ASSET_REFERENCE.findall(html)
    assert any(asset.endswith(".js") for asset in assets), assets
    for asset in assets:
        parts = urlsplit(asset)
        assert not parts.scheme and not parts.netloc and parts.path.startswith(settings.STATIC_URL), asset
        served = static_client.get(asset)
        assert served.status_code == 200, asset
        served.close()


@pytest.fixture
def offline_browser():
    driver = chromium_driver(offline=True)
    try:
        yield driver
    finally:
        driver.quit()


def requests_until_quiet(driver, quiet_seconds: float = 1.0, timeout: float = 15) -> dict[str, dict]:
    """Every request the page made, once it has made no new one for ``quiet_seconds``."""
    seen: dict[str, dict] = {}
    deadline = time.monotonic() + timeout
    quiet_since = time.monotonic()
    while time.monotonic() - quiet_since < quiet_seconds and time.monotonic() < deadline:
        time.sleep(0.2)
        new = requests_seen(driver)
        if new:
            quiet_since = time.monotonic()
        for request_id, request in new.items():
            seen.setdefault(request_id, {}).update({k: v for k, v in request.items() if v is not None})
    return seen


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("page, rendered", [
    ("/api/docs/", ".swagger-ui .info .title"),
    ("/api/redoc/", ".api-info h1"),
])
def test_docs_in_a_browser__offline_every_request_answered_by_this_server(offline_browser, live_server, settings,
                                                                       page, rendered):
    settings.WHITENOISE_USE_FINDERS = True
    offline_browser.get(f"{live_server.url}{page}")
    WebDriverWait(offline_browser, 15).until(expected_conditions.visibility_of_element_located(
        (By.CSS_SELECTOR, rendered)))
    assert "Scheduler API" in offline_browser.find_element(By.CSS_SELECTOR, rendered).text
    requests = [r for r in requests_until_quiet(offline_browser).values() if not (r.get("url") or "").startswith(("data:", "blob:"))]
    assert any(r["url"].startswith(f"{live_server.url}/static/") for r in requests), requests
    elsewhere = [r for r in requests if not (r.get("url") or "").startswith(live_server.url)]
    assert elsewhere == []
    failed = [r for r in requests if r.get("failed") or (r.get("status") or 200) >= 400]
    assert failed == []


def test_favicon__the_projects_icon_at_the_address_browsers_ask(static_client):
    answer = static_client.get("/favicon.ico")
    assert answer.status_code == 301
    icon = static_client.get(answer["Location"])
    assert icon.status_code == 200 and icon["Content-Type"] == "image/svg+xml"
    icon.close()
