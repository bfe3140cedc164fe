"""The console's pages against a world seeded through the services: what each shows, and
that its buttons go through the services."""

import re
from datetime import timedelta

import pytest
from croniter import croniter
from django.contrib.auth import get_user_model
from django.test import Client

from console.forecast import MINUTES, next_24_hours
from kernel.clock import authority_now
from runs.capacity.live import slots_report
from runs.models import EffectState, Run, RunState, Trigger
from schedules.models import Schedule
from tests.console.seed import FORECAST_RULES, lateness_of

pytestmark = pytest.mark.django_db(transaction=True)


def test_console__needs_a_staff_login(db):
    assert Client().get("/console/").status_code == 302
    plain = Client()
    plain.force_login(get_user_model().objects.create_user("visitor", password="pw"))
    response = plain.get("/console/")
    assert response.status_code == 302 and response["Location"].startswith("/console/login/")


def test_login_page__logs_a_staff_user_in(db):
    from tests.console.seed import staff_user

    staff_user("ops", "secret-pw")
    client = Client()
    response = client.post("/console/login/", {"username": "ops", "password": "secret-pw", "next": "/console/"})
    assert response.status_code == 302 and response["Location"] == "/console/"
    assert b"Overview" in client.get("/console/").content


def test_overview__lateness_matches_the_database_and_marks_the_breach(world, staff_client):
    page = staff_client.get("/console/").content.decode()
    started = lateness_of(world.late_runs + [world.report_run, world.running_run])
    row = re.search(r'data-tenant="acme" data-class="short">(.*?)</tr>', page, re.S).group(1)
    cells = re.findall(r"<td[^>]*>([^<]*)", row)
    assert cells[2] == str(len(started))
    p99 = float(cells[4].split()[0])
    expected = started[-2] + (started[-1] - started[-2]) * (0.99 * (len(started) - 1) % 1)
    assert p99 == pytest.approx(expected, abs=0.002) and p99 > 10
    assert 'class="breach" data-tenant="acme"' in page and "(over objective)" in page
    assert re.search(r'id="uncertain-effects">.*?class="figure">1<', page, re.S)
    assert re.search(r'id="count-running">.*?class="figure">4<', page, re.S)


def test_next_24_hours__one_bar_per_minute_with_the_rules_counts(world, staff_client):
    forecast = next_24_hours(authority_now())
    expected = {}
    for (cron, job_type), schedule in zip(FORECAST_RULES, world.forecast_schedules):
        resource_class = "short" if job_type == "demo.sleep" else "long"
        schedule.refresh_from_db()
        for at in _cron_instants(cron, schedule.next_run_at, forecast.start):
            minute = int((at - forecast.start).total_seconds() // 60)
            expected[(minute, resource_class)] = expected.get((minute, resource_class), 0) + 1
    page = staff_client.get("/console/next-24-hours/").content.decode()
    bars = re.findall(r'<rect class="bar" x="[\d.]+" y="[\d.]+" width="1" height="([\d.]+)" fill="#\w+" '
                      r'shape-rendering="crispEdges" data-minute="([^"]+)" data-class="(\w+)" data-count="(\d+)"', page)
    drawn = {}
    for height, stamp, resource_class, count in bars:
        minute = (int(stamp[11:13]) * 60 + int(stamp[14:16]) - forecast.start.hour * 60 - forecast.start.minute) % MINUTES
        drawn[(minute, resource_class)] = int(count)
        assert float(height) == pytest.approx(int(count) * 200 / 4, abs=0.01)  # peak: 3 short + 1 long at :30
    assert drawn == expected and len(drawn) >= 95 + 23
    assert f'id="forecast-total">{sum(expected.values())}<' in page


def test_next_24_hours__live_slots_line_and_forecast_p99(world, staff_client, settings):
    """2 live short slots: a dashed line at 2 on the bars' scale (peak 4: 3 short + 1 long);
    each quarter hour's 3 short runs of 5 s (the default duration, no statistics yet) start
    0, 0 and 5 s late: p99 5 s. No long slots: a long minute never starts (inf)."""
    settings.CAPACITY_DEFAULT_DURATION_SECONDS = 5
    slots_report("console-test:1", {"short": 2}, ttl_seconds=600)
    page = staff_client.get("/console/next-24-hours/").content.decode()
    lines = re.findall(r'<line class="live-slots" x1="[\d.]+" x2="[\d.]+" y1="([\d.]+)" y2="\1" [^>]*'
                       r'data-class="(\w+)" data-slots="(\d+)"', page)
    assert lines == [("112.000", "short", "2")]  # 200 px for 4 per minute, under a 12 px margin
    points = re.findall(r'<circle class="p99" [^>]*data-minute="([^"]+)" data-class="(\w+)" data-p99="([^"]+)"', page)
    short = {minute: p99 for minute, rc, p99 in points if rc == "short"}
    long_ = {minute: p99 for minute, rc, p99 in points if rc == "long"}
    assert len(short) in (95, 96) and len(long_) in (23, 24)
    # The first minute may meet the running runs' slots still busy (their expected end is now).
    assert {p99 for minute, p99 in sorted(short.items())[1:]} == {"5"} and set(long_.values()) == {"inf"}
    assert re.search(r'id="live-slots">Live slots: <span data-class="short">short <b>2</b>', page)


def _cron_instants(cron, first, start):
    """croniter's instants from the schedule's next one (`first`) inside the 24 h from `start`."""
    walker = croniter(cron, first - timedelta(microseconds=1))
    instants = []
    while (at := walker.get_next(type(start))) < start + timedelta(hours=24):
        if at >= start:
            instants.append(at)
    return instants


def test_schedules__list_searches_and_shows_next_five_instants(world, staff_client):
    page = staff_client.get("/console/schedules/", {"q": "wave-3"}).content.decode()
    assert page.count('data-schedule="') == 1
    assert "every hour at :30 (UTC)" in page and "cron 30 * * * *" in page
    instants = re.search(r'<td class="instants">(.*?)</td>', page, re.S).group(1)
    assert len(re.findall(r'<time class="instant" datetime="\S+:30:00Z"[^>]*>\S+ \S+:30:00 UTC</time>', instants)) == 5


def test_schedules__keyset_pages_cover_every_schedule_once(world, staff_client, settings):
    import console.filters

    seen, after = [], ""
    console.filters.PAGE_SIZE, saved = 3, console.filters.PAGE_SIZE
    try:
        while True:
            page = staff_client.get("/console/schedules/", {"after": after}).content.decode()
            seen += re.findall(r'data-schedule="([^"]+)"', page)
            found = re.search(r'id="next-page" href="[^"]*after=([^"&]+)"', page)
            if not found:
                break
            after = found.group(1)
    finally:
        console.filters.PAGE_SIZE = saved
    assert seen == sorted(Schedule.objects.values_list("id", flat=True))


def test_schedule_page__buttons_go_through_the_services(world, staff_client):
    schedule = world.forecast_schedules[0]
    page = staff_client.get(f"/console/schedules/{schedule.id}/").content.decode()
    assert 'id="pause"' in page and 'id="revisions"' in page
    staff_client.post(f"/console/schedules/{schedule.id}/pause/")
    schedule.refresh_from_db()
    assert schedule.paused and schedule.next_run_at is None
    staff_client.post(f"/console/schedules/{schedule.id}/resume/")
    schedule.refresh_from_db()
    assert not schedule.paused and schedule.next_run_at is not None
    response = staff_client.post(f"/console/schedules/{schedule.id}/run-now/", follow=True)
    assert Run.objects.filter(schedule=schedule, trigger=Trigger.MANUAL).count() == 1
    assert b"Run queued" in response.content
    assert staff_client.post(f"/console/schedules/{schedule.id}/explode/").status_code == 400


def test_schedule_page__history_timeline_draws_each_run(world, staff_client):
    run = world.report_run
    page = staff_client.get(f"/console/schedules/{run.schedule_id}/").content.decode()
    axis = re.search(r'<svg id="occurrence-axis".*?</svg>', page, re.S).group(0)
    states = re.findall(r'class="occurrence" [^>]*data-state="(\w+)"', axis)
    assert states == ["succeeded"] + ["planned"] * 10  # the run, then the next ten New Years
    assert axis.count('class="execution"') == 1 and f'href="/console/runs/{run.id}/"' in axis


def test_run_page__attempts_fence_effects_progress_and_result(world, staff_client):
    page = staff_client.get(f"/console/runs/{world.report_run.id}/").content.decode()
    assert f'id="run-fence">{world.report_run.fence}<' in page and "uncertain" in page
    assert 'id="result-link"' in page
    download = staff_client.get(f"/console/runs/{world.report_run.id}/result/")
    assert download.status_code == 302 and "/api/v1/objects/" in download["Location"]
    running = staff_client.get(f"/console/runs/{world.running_run.id}/").content.decode()
    assert 'data-percent="40"' in running and "40 of 100 regions" in running
    staff_client.post(f"/console/runs/{world.running_run.id}/cancel/")
    assert Run.objects.get(id=world.running_run.id).cancellation_requested


def test_uncertain_effects__resolve_records_who_and_when(world, staff_client):
    page = staff_client.get("/console/effects/").content.decode()
    assert f'data-effect="{world.uncertain.id}"' in page
    staff_client.post(f"/console/effects/{world.uncertain.id}/resolve/", {"resolution": "sent"})
    world.uncertain.refresh_from_db()
    assert world.uncertain.state == EffectState.SENT
    assert re.fullmatch(r"\S+Z console:staff-only: sent", world.uncertain.resolution)
    again = staff_client.post(f"/console/effects/{world.uncertain.id}/resolve/", {"resolution": "failed"}, follow=True)
    assert b"cannot be resolved as failed" in again.content


def test_runs_list__shows_the_tenant_runs_by_state(world, staff_client):
    page = staff_client.get("/console/runs/", {"state": RunState.SUCCEEDED}).content.decode()
    assert world.report_run.id in page and world.running_run.id not in page


@pytest.mark.parametrize("values", [[3.0], [1.0, 2.0], [0.5, 2.0, 4.0, 30.0, 0.01], list(map(float, range(250)))])
def test_lateness_percentiles__embedded_mode_computes_what_postgresql_does(values):
    """SQLite (make run) computes percentiles in Python: the same interpolation as percentile_cont."""
    from django.db import connection

    from console.overview import _percentile

    with connection.cursor() as cursor:
        cursor.execute("SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY v), percentile_cont(0.99) "
                       "WITHIN GROUP (ORDER BY v) FROM unnest(%s::float8[]) AS v", [values])
        p50, p99 = cursor.fetchone()
    assert (_percentile(values, 0.5), _percentile(values, 0.99)) == pytest.approx((p50, p99))


def test_forecast__schedules_sharing_a_rule_join_it_at_their_own_next_instant(tenant, monkeypatch):
    """One walk per rule: a schedule whose next instant is two hours away adds nothing
    before it, a lagging one (next instant already past) adds every instant of the window."""
    import runs.capacity.demand as demand
    from tests.authority_steps import create_schedule

    walks, walk = [], demand.rule_instants
    monkeypatch.setattr(demand, "rule_instants", lambda *a: walks.append(a) or walk(*a))

    now = authority_now()
    ahead, lagging = (create_schedule(tenant, cron="0 * * * *", name=name) for name in ("ahead", "lagging"))
    start = now.replace(second=0, microsecond=0)
    hours = [start.replace(minute=0) + timedelta(hours=h) for h in range(25)]
    hours = [h for h in hours if start <= h < start + timedelta(hours=24)]
    Schedule.objects.filter(id=ahead.id).update(next_run_at=hours[2])
    Schedule.objects.filter(id=lagging.id).update(next_run_at=hours[0] - timedelta(hours=5))
    forecast = next_24_hours(now)
    counts = {minute: count for minute, count in enumerate(forecast.per_class["short"]) if count}
    expected = {int((h - start).total_seconds() // 60): 1 + (h >= hours[2]) for h in hours}
    assert counts == expected and len(walks) == 1
