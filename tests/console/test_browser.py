"""A person at the console, in a real headless Chromium against the live server: logs in
as staff, opens every page over runs seeded through the services, and checks what is on
the screen. Screenshots: var/test-artifacts/console/*.png."""

import pytest
from selenium.webdriver.common.by import By

from console.forecast import next_24_hours
from effects.models import EffectIntent
from runs.capacity.live import slots_report
from scheduler_project.clock import authority_now
from tests.console.browser import chromium_driver, click_and_wait, screenshot
from tests.console.seed import lateness_of

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def browser(live_server, world):
    driver = chromium_driver()
    driver.implicitly_wait(5)
    try:
        driver.get(f"{live_server.url}/console/")
        assert "/console/login/" in driver.current_url  # not logged in: the login page
        driver.find_element(By.ID, "id_username").send_keys(world.staff.username)
        driver.find_element(By.ID, "id_password").send_keys("console-pw")
        click_and_wait(driver, driver.find_element(By.ID, "login"))
        driver.find_element(By.TAG_NAME, "nav")  # logged in
        yield driver
    finally:
        driver.quit()


def text_of(driver, css: str) -> str:
    return driver.find_element(By.CSS_SELECTOR, css).text


def test_browser__overview_shows_the_lateness_in_the_database(browser, world, live_server):
    assert browser.find_element(By.TAG_NAME, "h1").text == "Overview"
    row = browser.find_element(By.CSS_SELECTOR, '#lateness tr[data-tenant="acme"][data-class="short"]')
    started = lateness_of(world.late_runs + [world.report_run, world.running_run])
    assert row.find_element(By.CSS_SELECTOR, "td.p50").text == f"{round(started[2], 3)}".rstrip("0").rstrip(".")
    assert "over objective" in row.find_element(By.CSS_SELECTOR, "td.p99").text
    assert "breach" in row.get_attribute("class")
    assert browser.find_element(By.CSS_SELECTOR, "#uncertain-effects .figure").text == "1"
    screenshot(browser, "overview")


def test_browser__next_24_hours_draws_one_bar_per_due_minute(browser, world, live_server):
    slots_report("console-browser:1", {"short": 2}, ttl_seconds=600)  # a line at half the peak (4)
    browser.get(f"{live_server.url}/console/next-24-hours/")
    forecast = next_24_hours(authority_now())
    bars = browser.find_elements(By.CSS_SELECTOR, "#forecast-chart rect.bar")
    drawn = {}
    for bar in bars:
        minute, resource_class = bar.get_attribute("data-minute"), bar.get_attribute("data-class")
        drawn[(minute, resource_class)] = int(bar.get_attribute("data-count"))
        rendered = bar.size["height"]  # what the browser laid out, in CSS pixels
        assert rendered == pytest.approx(int(bar.get_attribute("data-count")) * 200 / 4, abs=1)
    # Every quarter hour: three short runs; at :30 one long. The current quarter hour may have
    # passed since the schedules were created: 95 or 96 quarter hours, 23 or 24 half past.
    short_minutes = {m for (m, c) in drawn if c == "short"}
    long_minutes = {m for (m, c) in drawn if c == "long"}
    assert len(short_minutes) in (95, 96) and all(drawn[(m, "short")] == 3 for m in short_minutes)
    assert len(long_minutes) in (23, 24) and long_minutes <= short_minutes and all(m.endswith(":30Z") for m in long_minutes)
    assert sum(drawn.values()) == forecast.total() == len(short_minutes) * 3 + len(long_minutes)
    assert text_of(browser, "#forecast-total") == str(forecast.total())
    line = browser.find_element(By.CSS_SELECTOR, '#forecast-chart line.live-slots[data-class="short"]')
    assert line.get_attribute("data-slots") == "2"
    chart_top = browser.find_element(By.ID, "forecast-chart").location["y"]
    assert line.location["y"] - chart_top == pytest.approx(200 - 2 * 200 / 4, abs=2)  # where the browser drew it
    points = browser.find_elements(By.CSS_SELECTOR, '#lateness-chart circle.p99[data-class="short"]')
    assert len(points) == len(short_minutes) and points[-1].get_attribute("data-p99") == "5"
    screenshot(browser, "next-24-hours")


def test_browser__schedules_search_and_schedule_page(browser, world, live_server):
    browser.get(f"{live_server.url}/console/schedules/")
    search = browser.find_element(By.NAME, "q")
    search.send_keys("wave-3")
    click_and_wait(browser, browser.find_element(By.CSS_SELECTOR, "#schedule-search button"))
    rows = browser.find_elements(By.CSS_SELECTOR, "#schedules tr[data-schedule]")
    assert len(rows) == 1 and "every hour at :30" in rows[0].text
    assert len(rows[0].find_elements(By.CSS_SELECTOR, "td.instants div")) == 5
    screenshot(browser, "schedules")
    click_and_wait(browser, rows[0].find_element(By.TAG_NAME, "a"))
    click_and_wait(browser, browser.find_element(By.ID, "pause"))
    assert text_of(browser, "#paused-state").startswith("paused since")
    click_and_wait(browser, browser.find_element(By.ID, "resume"))
    assert text_of(browser, "#paused-state") == "active"
    browser.get(f"{live_server.url}/console/schedules/{world.report_run.schedule_id}/")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#run-timeline rect.execution")) == 1
    screenshot(browser, "schedule")


def test_browser__run_page_shows_attempts_effects_and_progress(browser, world, live_server):
    browser.get(f"{live_server.url}/console/runs/{world.report_run.id}/")
    assert text_of(browser, "#run-state") == "succeeded"
    assert text_of(browser, "#effects .effect-state") == "uncertain"
    assert len(browser.find_elements(By.CSS_SELECTOR, "#attempts tr")) == 2  # header and attempt 1
    assert browser.find_element(By.ID, "result-link").get_attribute("href").endswith(f"/runs/{world.report_run.id}/result/")
    screenshot(browser, "run")
    browser.get(f"{live_server.url}/console/runs/{world.running_run.id}/")
    assert browser.find_element(By.ID, "progress").get_attribute("data-percent") == "40"
    screenshot(browser, "run-in-progress")


def test_browser__resolve_button_moves_an_effect_from_uncertain_to_sent(browser, world, live_server):
    browser.get(f"{live_server.url}/console/effects/")
    row = browser.find_element(By.CSS_SELECTOR, f'tr[data-effect="{world.uncertain.id}"]')
    screenshot(browser, "uncertain-effects")
    click_and_wait(browser, row.find_element(By.CSS_SELECTOR, "button.resolve-sent"))
    assert "No effect is uncertain." in text_of(browser, "#uncertain")
    assert "sent (by operator)" in text_of(browser, ".messages")
    intent = EffectIntent.objects.get(id=world.uncertain.id)
    assert intent.state == "sent" and intent.resolution.endswith("console:operator: sent")
    browser.get(f"{live_server.url}/console/runs/{world.report_run.id}/")
    assert text_of(browser, "#effects .effect-state") == "sent"
    screenshot(browser, "effect-resolved")
