"""A person at the console, in a real headless Chromium with a 1366 x 768 window against the
live server: logs in as staff, opens every page over runs seeded through the services, and
checks what is on the screen, and that each page fits the window (no horizontal scrollbar,
no instant broken over two lines) without a browser console error. Screenshots of each
whole page: var/test-artifacts/console/*.png."""

from datetime import timedelta

import pytest
from selenium.webdriver.common.by import By

from console.forecast import next_24_hours
from kernel.clock import authority_now
from runs import authority
from runs.capacity.live import slots_report
from runs.models import EffectIntent
from tests.authority_steps import create_schedule, make_due
from tests.console.browser import chromium_driver, click_and_wait, layout_faults, screenshot
from tests.console.seed import FAILURE, HISTORY, lateness_of

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


def looks_right(driver, name: str) -> None:
    """The page fits the 1366-pixel window, without a console error; a screenshot of it."""
    screenshot(driver, name)
    assert layout_faults(driver) == []


def test_browser__overview_first_says_what_is_late_or_failing_and_since_when(browser, world, history, live_server):
    late = create_schedule(world.tenant, name="invoices", zone="Europe/Paris")
    make_due(late, ago=timedelta(minutes=3))
    authority.materialize_due()  # queued, 3 minutes past due: late
    browser.get(f"{live_server.url}/console/")
    attention = browser.find_element(By.ID, "attention")
    assert attention.location["y"] < browser.find_element(By.ID, "count-pending").location["y"]  # first
    assert attention.text.startswith("Needs attention now:")
    assert "1 run waiting more than 10 s past due, the oldest since" in attention.text
    assert "1 schedule failing (last run failed), the longest since" in attention.text
    assert text_of(browser, "#failing tr[data-schedule] td a") == "billing-sync"
    assert text_of(browser, "#late tr[data-run] td a") == "invoices"
    looks_right(browser, "overview-attention")


def test_browser__overview_shows_the_lateness_in_the_database(browser, world, live_server):
    assert browser.find_element(By.TAG_NAME, "h1").text.startswith("Overview")
    row = browser.find_element(By.CSS_SELECTOR, '#lateness tr[data-tenant="acme"][data-class="short"]')
    started = lateness_of(world.late_runs + [world.report_run, world.running_run])
    assert row.find_element(By.CSS_SELECTOR, "td.p50").text == f"{round(started[2], 3)}".rstrip("0").rstrip(".")
    assert "over objective" in row.find_element(By.CSS_SELECTOR, "td.p99").text
    assert "breach" in row.get_attribute("class")
    assert browser.find_element(By.CSS_SELECTOR, "#uncertain-effects .figure").text == "1"
    looks_right(browser, "overview")


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
        assert rendered == pytest.approx(int(bar.get_attribute("data-count")) * 200 / 4, abs=1)  # scale 0-4
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
    zero = browser.find_element(By.CSS_SELECTOR, "#forecast-chart line.grid").location["y"]  # the 0 gridline
    assert zero - line.location["y"] == pytest.approx(2 * 200 / 4, abs=2)  # where the browser drew it
    ticks = [t.text for t in browser.find_elements(By.CSS_SELECTOR, "#forecast-chart text.tick")]
    assert ticks[:5] == ["0", "1", "2", "3", "4"] and len(ticks) == 5 + 12  # due per minute; every 2 hours
    assert [t.text for t in browser.find_elements(By.CSS_SELECTOR, "#lateness-chart text.tick")][0] == "0 s"
    points = browser.find_elements(By.CSS_SELECTOR, '#lateness-chart circle.p99[data-class="short"]')
    assert len(points) == len(short_minutes) and points[-1].get_attribute("data-p99") == "5"
    looks_right(browser, "next-24-hours")


def test_browser__schedules_search_and_schedule_page(browser, world, live_server):
    browser.get(f"{live_server.url}/console/schedules/")
    search = browser.find_element(By.NAME, "q")
    search.send_keys("wave-3")
    click_and_wait(browser, browser.find_element(By.CSS_SELECTOR, "#schedule-search button"))
    rows = browser.find_elements(By.CSS_SELECTOR, "#schedules tr[data-schedule]")
    assert len(rows) == 1 and "every hour at :30" in rows[0].text
    assert len(rows[0].find_elements(By.CSS_SELECTOR, "td.instants time.instant")) == 5
    looks_right(browser, "schedules")
    click_and_wait(browser, rows[0].find_element(By.TAG_NAME, "a"))
    click_and_wait(browser, browser.find_element(By.ID, "pause"))
    assert text_of(browser, "#paused-state").startswith("paused since")
    click_and_wait(browser, browser.find_element(By.ID, "resume"))
    assert text_of(browser, "#paused-state") == "active"
    browser.get(f"{live_server.url}/console/schedules/{world.report_run.schedule_id}/")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#occurrence-axis rect.execution")) == 1
    looks_right(browser, "schedule-yearly")


def test_browser__schedule_page_shows_recent_and_coming_on_one_axis(browser, history, live_server):
    browser.get(f"{live_server.url}/console/schedules/{history.id}/")
    marks = browser.find_elements(By.CSS_SELECTOR, "#occurrence-axis .occurrence")
    states = [mark.get_attribute("data-state") for mark in marks]
    assert states == list(HISTORY) + ["planned"] * 10  # oldest first, then the next ten instants
    xs = [mark.rect["x"] + mark.rect["width"] / 2 for mark in marks]  # each mark is centred on its instant
    assert xs == sorted(xs) and xs[-1] - xs[0] > 900  # one time axis across the chart
    now = browser.find_element(By.ID, "now-line").rect["x"]
    assert xs[len(HISTORY) - 1] < now < xs[len(HISTORY)]  # now between the running run and the first planned
    assert "skipped (misfire)" in marks[5].find_element(By.TAG_NAME, "title").get_attribute("textContent")
    assert FAILURE in marks[6].find_element(By.TAG_NAME, "title").get_attribute("textContent")
    legend = {item.get_attribute("data-state"): item.text for item in browser.find_elements(By.CSS_SELECTOR, "#legend .legend-item")}
    assert legend == {"failed": "failed 2", "skipped": "skipped 1", "running": "running 1", "succeeded": "succeeded 4",
                      "planned": "planned 10"}
    assert "time in America/New_York" in text_of(browser, "#occurrence-axis")
    assert text_of(browser, "#rule .words") == "every 15 minutes (America/New_York)"
    looks_right(browser, "schedule")


def test_browser__schedule_page_draws_incidents_over_the_time_they_were_open(browser, history, live_server):
    from runs.models import Incident, Run

    runs = list(Run.objects.filter(schedule=history).order_by("scheduled_at"))
    failed = next(run for run in runs if run.state == "failed")
    now = authority_now()
    resolved = Incident.objects.create(
        tenant_id=history.tenant_id, schedule=history, kind="failures", breach_key="from:test", run=failed,
        instant=failed.scheduled_at, opened_at=failed.finished_at, resolved_at=failed.finished_at + timedelta(minutes=20),
        resolution="recovered")
    running = runs[-1]
    open_ = Incident.objects.create(
        tenant_id=history.tenant_id, schedule=history, kind="long_running", breach_key=f"run:{running.id}",
        run=running, instant=running.scheduled_at, opened_at=now - timedelta(minutes=3))
    browser.get(f"{live_server.url}/console/schedules/{history.id}/")
    bars = {bar.get_attribute("data-incident"): bar
            for bar in browser.find_elements(By.CSS_SELECTOR, "#occurrence-axis rect.incident")}
    assert set(bars) == {resolved.id, open_.id}
    assert bars[resolved.id].get_attribute("data-kind") == "failures"
    assert bars[open_.id].get_attribute("data-kind") == "long_running"
    assert bars[resolved.id].get_attribute("fill") != bars[open_.id].get_attribute("fill")  # told apart by kind
    title = bars[open_.id].find_element(By.TAG_NAME, "title").get_attribute("textContent")
    assert title.startswith("long_running since ") and " · open · occurrence " in title and running.id in title
    marks = {mark.get_attribute("data-at"): mark for mark in browser.find_elements(By.CSS_SELECTOR, "#occurrence-axis .occurrence")}
    failed_mark = marks[failed.scheduled_at.strftime("%Y-%m-%dT%H:%M:%SZ")].rect
    resolved_bar = bars[resolved.id].rect
    assert resolved_bar["x"] > failed_mark["x"]  # opened when the failed run finished, after its instant
    assert resolved_bar["y"] > failed_mark["y"] and bars[open_.id].rect["y"] > failed_mark["y"]  # lanes below runs
    now_x = browser.find_element(By.ID, "now-line").rect["x"]
    open_bar = bars[open_.id].rect
    assert open_bar["x"] < now_x <= open_bar["x"] + open_bar["width"] + 1  # open: drawn up to now
    link = bars[open_.id].find_element(By.XPATH, "..")
    assert link.get_dom_attribute("href") == f"/console/runs/{running.id}/"
    looks_right(browser, "schedule-incidents")


def test_browser__runs_list_names_schedules(browser, history, live_server):
    browser.get(f"{live_server.url}/console/runs/")
    cells = browser.find_elements(By.CSS_SELECTOR, "#runs td.schedule a")
    assert "billing-sync" in {cell.text for cell in cells}
    looks_right(browser, "runs")


def test_browser__run_page_shows_attempts_effects_and_progress(browser, world, live_server):
    browser.get(f"{live_server.url}/console/runs/{world.report_run.id}/")
    assert text_of(browser, "#run-state") == "succeeded"
    assert text_of(browser, "#effects .effect-state") == "uncertain"
    assert len(browser.find_elements(By.CSS_SELECTOR, "#attempts tr")) == 2  # header and attempt 1
    assert browser.find_element(By.ID, "result-link").get_attribute("href").endswith(f"/runs/{world.report_run.id}/result/")
    looks_right(browser, "run")
    browser.get(f"{live_server.url}/console/runs/{world.running_run.id}/")
    assert browser.find_element(By.ID, "progress").get_attribute("data-percent") == "40"
    looks_right(browser, "run-in-progress")


def test_browser__resolve_button_moves_an_effect_from_uncertain_to_sent(browser, world, live_server):
    browser.get(f"{live_server.url}/console/effects/")
    row = browser.find_element(By.CSS_SELECTOR, f'tr[data-effect="{world.uncertain.id}"]')
    looks_right(browser, "uncertain-effects")
    click_and_wait(browser, row.find_element(By.CSS_SELECTOR, "button.resolve-sent"))
    assert "No effect is uncertain." in text_of(browser, "#uncertain")
    assert "sent (by operator)" in text_of(browser, ".messages")
    intent = EffectIntent.objects.get(id=world.uncertain.id)
    assert intent.state == "sent" and intent.resolution.endswith("console:operator: sent")
    browser.get(f"{live_server.url}/console/runs/{world.report_run.id}/")
    assert text_of(browser, "#effects .effect-state") == "sent"
    looks_right(browser, "effect-resolved")


def test_browser__skip_a_coming_occurrence_with_a_note_then_remove_it(browser, world, live_server):
    from schedules.models import OccurrenceDirective

    schedule = create_schedule(world.tenant, cron="0 9 * * *", name="daily-close", zone="Europe/Paris")
    browser.get(f"{live_server.url}/console/schedules/{schedule.id}/")
    row = browser.find_elements(By.CSS_SELECTOR, "#occurrences tr[data-at]")[1]
    at = row.get_attribute("data-at")
    row.find_element(By.NAME, "note").send_keys("bank holiday")
    click_and_wait(browser, row.find_element(By.CSS_SELECTOR, "button.skip"))
    row = browser.find_element(By.CSS_SELECTOR, f'#occurrences tr[data-at="{at}"]')
    assert row.find_element(By.CSS_SELECTOR, "td.directive").text.startswith("skip: bank holiday")
    directive = OccurrenceDirective.objects.get(schedule=schedule)
    assert (directive.action, directive.note, directive.actor) == ("skip", "bank holiday", world.staff.username)
    looks_right(browser, "schedule-occurrence-directives")
    click_and_wait(browser, row.find_element(By.CSS_SELECTOR, "button.clear"))
    assert not OccurrenceDirective.objects.exists()


def test_browser__hold_a_coming_occurrence_then_release_its_run__and_note_another(browser, world, live_server):
    import time

    from runs.models import PendingReason, Run, RunState
    from kernel.clock import instant

    first = authority_now().replace(microsecond=0) + timedelta(seconds=10)
    schedule = create_schedule(world.tenant, name="hourly-close", recurrence={
        "kind": "interval", "everySeconds": 3600, "anchor": instant(first)})
    browser.get(f"{live_server.url}/console/schedules/{schedule.id}/")
    row = browser.find_element(By.CSS_SELECTOR, f'#occurrences tr[data-at="{instant(first)}"]')
    row.find_element(By.NAME, "note").send_keys("wait for finance")
    click_and_wait(browser, row.find_element(By.CSS_SELECTOR, "button.hold"))
    second = instant(first + timedelta(hours=1))
    row = browser.find_element(By.CSS_SELECTOR, f'#occurrences tr[data-at="{second}"]')
    row.find_element(By.NAME, "note").send_keys("watch the totals")
    click_and_wait(browser, row.find_element(By.CSS_SELECTOR, "button.note"))
    assert text_of(browser, f'#occurrences tr[data-at="{instant(first)}"] td.directive').startswith(
        "hold: wait for finance")
    assert text_of(browser, f'#occurrences tr[data-at="{second}"] td.directive').startswith("note: watch the totals")

    time.sleep(max(0.0, (first - authority_now()).total_seconds()) + 0.05)
    authority.materialize_due()
    held = Run.objects.get(schedule=schedule)
    assert (held.state, held.pending_reason) == (RunState.PENDING, PendingReason.HELD)
    browser.get(f"{live_server.url}/console/schedules/{schedule.id}/")
    looks_right(browser, "schedule-held-run")
    click_and_wait(browser, browser.find_element(By.CSS_SELECTOR, "#held button.release"))
    assert "Released" in text_of(browser, ".messages")
    assert Run.objects.get(id=held.id).state == RunState.QUEUED


def test_browser__schedule_under_a_calendar_shows_its_moved_and_excluded_instants(browser, world, live_server):
    from schedule_services.calendars import calendar_create

    today = authority_now().date()
    wednesday = today + timedelta(days=(2 - today.weekday()) % 7 or 7)
    closures = calendar_create(tenant=world.tenant, fields={"name": "Founders day",
                                                             "exclude_dates": [wednesday.isoformat()]})
    schedule = create_schedule(world.tenant, name="weekly-ledger", cron="0 9 * * 3", zone="America/New_York",
                               calendar={"calendarIds": [closures.id], "policy": "shift_after"})
    browser.get(f"{live_server.url}/console/schedules/{schedule.id}/")
    shown = text_of(browser, "#next-instants")
    assert "excluded by Founders day" in shown and "moved from" in shown
    assert "Founders day" in text_of(browser, "#rule .words")
    looks_right(browser, "schedule-under-a-calendar")
