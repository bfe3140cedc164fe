"""What a person reads on the console: every id with the name a person gave it, every rule in
words and as written, every instant in the schedule's zone with the zone named, charts with
labelled axes and units that fit a 1,366-pixel window, and an Overview that answers first
whether anything is late or failing, and since when."""

import io
import re
from datetime import datetime, timedelta, timezone

import pytest
from django.core.management import call_command

from console.words import rule_in_words
from runs import authority
from runs.models import Run
from kernel.clock import authority_now
from tests.authority_steps import create_schedule, make_due, materialize_one, publish, stage, start_run
from tests.console.seed import FAILURE, HISTORY, seed_history

pytestmark = pytest.mark.django_db

WINDOW = 1366
ISO_INSTANT = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d")


def visible_text(page: str) -> str:
    """The page as read: no tags, no attributes, no style block."""
    body = page.split("</style>", 1)[-1]
    return re.sub(r"<[^>]+>", " ", body)


@pytest.mark.parametrize("cron, words", [
    ("*/5 * * * *", "every 5 minutes (UTC)"),
    ("0,5,10,15,20,25,30,35,40,45,50,55 * * * *", "every 5 minutes (UTC)"),  # as import_beat writes */5
    ("0-59/5 * * * *", "every 5 minutes (UTC)"),
    ("* * * * *", "every minute (UTC)"),
    ("30 * * * *", "every hour at :30 (UTC)"),
    ("0 9 * * *", "at 09:00 every day (UTC)"),
    ("0 9 * * 1-5", "at 09:00 on Mon-Fri (UTC)"),
    ("0 9,13,17 * * *", "at 09:00, 13:00 and 17:00 every day (UTC)"),
    ("*/15 9-17 * * 1-5", "every 15 minutes from 09:00 to 17:45 on Mon-Fri (UTC)"),
    ("5-59/15 * * * *", "every 15 minutes from :05 (UTC)"),
    ("0 */2 * * *", "every 2 hours from 00:00 (UTC)"),
    ("15 9-17 * * *", "every hour from 09:15 to 17:15 (UTC)"),
    ("0 0 1 * *", "at 00:00 on day 1 of the month (UTC)"),
    ("0 0 1 1 *", "at 00:00 on day 1 of the month in Jan (UTC)"),
    ("0 0 1,15 * 1", "at 00:00 on days 1, 15 of the month or on Mon (UTC)"),  # Vixie: either day field
    ("@daily", "at 00:00 every day (UTC)"),
])
def test_rule_in_words__the_same_set_of_instants_reads_the_same(cron, words):
    assert rule_in_words({"kind": "cron", "cron": cron, "timezone": "UTC"}) == words


def test_rule_in_words__other_kinds():
    assert rule_in_words({"kind": "interval", "everySeconds": 300}) == "every 5 minutes"
    assert rule_in_words({"kind": "after_completion", "delaySeconds": 90}) == "90 seconds after the previous run ends"
    assert rule_in_words({"kind": "once", "at": "2026-12-07T14:00:00Z", "timezone": "America/New_York"}) == \
        "once, at 2026-12-07 09:00:00 EST"
    assert rule_in_words({"kind": "cron", "cron": "not a rule"}) == "unreadable rule"


def test_schedules_list__an_imported_every_five_minutes_reads_in_words(tenant, staff_client):
    from django_celery_beat.models import CrontabSchedule, PeriodicTask

    every_five = CrontabSchedule.objects.create(minute="*/5", hour="*", day_of_month="*", day_of_week="*",
                                                timezone="UTC")
    PeriodicTask.objects.create(name="poll partner", task="tests.bridge.add", crontab=every_five, args="[1, 2]")
    call_command("import_beat", "--tenant", tenant.name, stdout=io.StringIO())
    page = staff_client.get("/console/schedules/", {"q": "poll partner"}).content.decode()
    assert '<span class="words">every 5 minutes (UTC)</span>' in page
    assert '<code class="syntax">cron 0,5,10,15,20,25,30,35,40,45,50,55 * * * *</code>' in page  # as written


def test_runs_list__each_run_shows_its_schedules_name(tenant, staff_client):
    schedule = create_schedule(tenant, name="nightly-billing")
    run = materialize_one(schedule)
    page = staff_client.get("/console/runs/", {"tenant": tenant.id}).content.decode()
    row = re.search(rf'<tr data-run="{run.id}">.*?</tr>', page, re.S).group(0)
    assert f'<a href="/console/schedules/{schedule.id}/">nightly-billing</a>' in row
    assert f'<small class="id">{schedule.id}</small>' in row


def test_revisions__the_rule_in_words_and_as_written_not_a_dict(tenant, staff_client):
    schedule = create_schedule(tenant, cron="0 9 * * 1-5", zone="Europe/Paris", name="morning")
    page = staff_client.get(f"/console/schedules/{schedule.id}/").content.decode()
    revisions = re.search(r'<table id="revisions">.*?</table>', page, re.S).group(0)
    assert '<td class="words">at 09:00 on Mon-Fri (Europe/Paris)</td>' in revisions
    assert '<code class="syntax">cron 0 9 * * 1-5</code>' in revisions
    assert "{" not in revisions and "'kind'" not in page


def test_instants__in_the_schedules_zone_with_the_zone_named(tenant, staff_client):
    schedule = create_schedule(tenant, name="east-coast", zone="America/New_York")
    run = materialize_one(schedule)
    at = datetime(2026, 12, 7, 14, 0, tzinfo=timezone.utc)  # 09:00 in New York
    Run.objects.filter(id=run.id).update(scheduled_at=at, due_at=at)
    shown = re.compile(r'<time class="instant" datetime="2026-12-07T14:00:00Z" '
                       r'title="2026-12-07 09:00:00 in America/New_York; 2026-12-07T14:00:00Z">'
                       r'2026-12-07 09:00:00 EST</time>')
    for url in (f"/console/runs/{run.id}/", "/console/runs/", f"/console/schedules/{schedule.id}/"):
        page = staff_client.get(url).content.decode()
        assert shown.search(page), url
        assert not ISO_INSTANT.search(visible_text(page)), url  # no raw ISO text that a browser breaks at "-"
    schedules = staff_client.get("/console/schedules/", {"q": "east-coast"}).content.decode()
    assert re.search(r'<td class="instants"><div><time class="instant" [^>]*>\S+ 00:00:00 EST</time>', schedules)
    style = staff_client.get("/console/").content.decode()
    assert re.search(r"time\.instant[^{]*\{[^}]*white-space: nowrap", style)


def test_next_24_hours__charts_have_labelled_axes_with_units_and_fit_the_window(tenant, staff_client):
    create_schedule(tenant, cron="*/15 * * * *", name="quarterly")
    page = staff_client.get("/console/next-24-hours/").content.decode()
    assert "overflow-x" not in page
    for chart in ("forecast-chart", "lateness-chart"):
        svg = re.search(rf'<svg id="{chart}"[^>]*>', page).group(0)
        width = float(re.search(r'width="([\d.]+)"', svg).group(1))
        assert width <= WINDOW - 2 * 16 - 20, chart  # the page's margins and a scrollbar
    forecast = re.search(r'<svg id="forecast-chart".*?</svg>', page, re.S).group(0)
    ticks = re.findall(r'<text class="tick"[^>]*>([^<]+)</text>', forecast)
    assert ticks[:2] == ["0", "1"] and len([t for t in ticks if re.fullmatch(r"\d\d:00", t)]) == 12
    assert ">occurrences due / minute</text>" in forecast and ">time (UTC), from " in forecast
    lateness = re.search(r'<svg id="lateness-chart".*?</svg>', page, re.S).group(0)
    ticks = re.findall(r'<text class="tick"[^>]*>([^<]+)</text>', lateness)
    assert ticks[0] == "0 s" and all(t.endswith(" s") for t in ticks[:3])
    assert ">p99 start lateness</text>" in lateness and ">never</text>" in lateness


def test_overview__nothing_late_or_failing_says_so_first(tenant, staff_client):
    page = staff_client.get("/console/").content.decode()
    assert page.index('id="all-well"') < page.index("<h2>Runs</h2>")


def test_overview__a_late_run_first_with_since_when(tenant, staff_client):
    schedule = create_schedule(tenant, name="invoices", zone="Europe/Paris")
    instant = make_due(schedule, ago=timedelta(minutes=5))
    authority.materialize_due()  # queued; no worker claims it
    page = staff_client.get("/console/").content.decode()
    assert page.index('id="attention"') < page.index("<h2>Runs</h2>")
    summary = re.search(r'<li id="late-summary">(.*?)</li>', page, re.S).group(1)
    assert "<b>1</b> run waiting more than 10 s past due" in summary
    since = instant.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert f'datetime="{since}"' in summary and re.search(r"\(5 min( \d+ s)? ago\)", summary)
    row = re.search(r'<table id="late">.*?</table>', page, re.S).group(0)
    assert f'<a href="/console/schedules/{schedule.id}/">invoices</a>' in row and "a free slot" in row
    assert re.search(r"\S+ \S+ CET</time>", row)  # owed since, in Paris


def test_overview__a_failing_schedule_since_its_first_failure_after_the_last_success(tenant, staff_client):
    schedule = seed_history(tenant)
    never = create_schedule(tenant, name="never-succeeded")
    failed, canceled = (materialize_one(never) for _ in range(2))
    Run.objects.filter(id=failed.id).update(state="failed", finished_at=authority_now(), error="boom")
    Run.objects.filter(id=canceled.id).update(state="canceled", finished_at=authority_now())  # not an outcome
    recovered = create_schedule(tenant, name="recovered")
    Run.objects.filter(id=materialize_one(recovered).id).update(state="failed", finished_at=authority_now())
    run = start_run(recovered)
    publish(run, stage(run, b"ok"))
    runs = list(Run.objects.filter(schedule=schedule).order_by("scheduled_at"))
    page = staff_client.get("/console/").content.decode()
    assert re.search(r'<li id="failing-summary"><b>2</b> schedules failing', page)
    table = re.search(r'<table id="failing">.*?</table>', page, re.S).group(0)
    row = re.search(rf'<tr data-schedule="{schedule.id}">.*?</tr>', table, re.S).group(0)
    since = runs[HISTORY.index("failed")].scheduled_at.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    last_success = runs[HISTORY.index("failed") - 1].scheduled_at.astimezone(timezone.utc)
    assert f'datetime="{since}"' in row and " EST</time>" in row
    assert "<td>2</td>" in row and FAILURE in row  # two failures in a row since the last success
    assert f'datetime="{last_success:%Y-%m-%dT%H:%M:%SZ}"' in row
    assert "<td>never</td>" in table  # never-succeeded: its one outcome failed
    assert f'data-schedule="{recovered.id}"' not in table  # failed, then succeeded


@pytest.mark.parametrize("days, labels", [
    (3650, [str(year) for year in range(2027, 2037)]),  # New Years
    (200, [f"2027-{month:02d}" for month in range(1, 7)]),  # firsts of months
    (2 / 24, ["12-04 18:00", "18:15", "18:30", "18:45", "19:00", "19:15", "19:30", "19:45"]),  # the date where it starts
])
def test_time_axis__ticks_at_round_wall_clock_times_of_the_zone(days, labels):
    from console.svg import time_ticks

    start = datetime(2026, 12, 4, 22, 55, tzinfo=timezone.utc)  # 17:55 in New York
    assert [label for _, label, _ in time_ticks(start, start + timedelta(days=days), "America/New_York")] == labels
