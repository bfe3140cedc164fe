"""The statistics snapshot forecasts read (runs.capacity.statistics): the cleanup pass measures
every schedule's and job type's expected duration when it is due, forecasts read those rows
while they are recent and measure themselves otherwise, and refreshers at once leave one
whole snapshot."""

import threading
from datetime import datetime, timedelta, timezone

import pytest
from django.db import connection, connections

from runs.capacity.forecast import forecast
from runs.capacity.statistics import (
    job_type_durations,
    measured_durations,
    refresh_snapshot,
    runtime_statistics,
    schedule_durations,
)
from runs.models import ExpectedDuration, StatisticsSnapshot
from runs.retention import cleanup_pass
from kernel.clock import authority_now
from tests.authority_steps import accepted_history, create_schedule

UTC = timezone.utc


@pytest.fixture
def history(tenant, settings):
    """Two schedules with history of their own (1 s and 4 s) and one without: demo.sleep's
    mean over them all is 3 s."""
    settings.CAPACITY_SCHEDULE_MIN_SAMPLES = 3
    quick, slow, new = (create_schedule(tenant, cron="0 9 * * *", name=n) for n in ("quick", "slow", "new"))
    accepted_history(quick, [1, 1, 1])
    accepted_history(slow, [4] * 6)
    return quick, slow, new


def test_refresh__measures_what_the_forecast_would__and_only_when_due(history, settings):
    quick, slow, new = history
    ids = [quick.id, slow.id, new.id]
    assert refresh_snapshot()
    assert schedule_durations(ids) == measured_durations(ids) == {quick.id: 1.0, slow.id: 4.0}
    assert job_type_durations(["demo.sleep", "demo.unknown"]) == {"demo.sleep": 3.0, "demo.unknown": 5.0}
    assert runtime_statistics(["demo.sleep"])["demo.sleep"].expected_duration() == 3.0
    assert not refresh_snapshot()  # measured a moment ago: not due
    later = authority_now() + timedelta(seconds=settings.CAPACITY_STATS_REFRESH_SECONDS + 1)
    assert refresh_snapshot(now=later)


def test_forecast_reads_a_recent_snapshot_and_measures_without_one(history, settings):
    """The snapshot is what a recent forecast reads: rows changed under it change the forecast.
    Once three refresh intervals old it is ignored, and the forecast measures the window."""
    quick, slow, new = history
    refresh_snapshot()
    ExpectedDuration.objects.filter(subject=quick.id).update(seconds=30)
    ExpectedDuration.objects.filter(subject="demo.sleep").update(seconds=7)
    start = datetime(2030, 1, 7, 8, 58, tzinfo=UTC)
    [row] = forecast(start, start + timedelta(minutes=5)).rows
    assert (row.due, row.slot_seconds) == (3, 30 + 4 + 7)

    StatisticsSnapshot.objects.filter(pk=1).update(
        measured_at=authority_now() - timedelta(seconds=3 * settings.CAPACITY_STATS_REFRESH_SECONDS + 1))
    [row] = forecast(start, start + timedelta(minutes=5)).rows
    assert (row.due, row.slot_seconds) == (3, 1 + 4 + 3)


def test_cleanup_pass_refreshes_the_snapshot(history):
    quick, slow, _ = history
    assert cleanup_pass().statistics_refreshed == 1
    assert dict(ExpectedDuration.objects.filter(kind=ExpectedDuration.SCHEDULE).values_list("subject", "seconds")) \
        == {quick.id: 1.0, slow.id: 4.0}
    assert cleanup_pass().statistics_refreshed == 0


@pytest.mark.django_db(transaction=True)
def test_refreshers_at_once_leave_one_whole_snapshot(tenant, settings):
    """Four refreshers on their own connections, all due at once: the rows are replaced whole,
    one refresher after the other (the snapshot's row lock), never mixed or doubled."""
    if connection.vendor != "postgresql":
        pytest.skip("SQLite serializes every writer: there is no race to show")
    settings.CAPACITY_SCHEDULE_MIN_SAMPLES = 3
    schedules = [create_schedule(tenant, cron="0 9 * * *", name=f"s{n}") for n in range(5)]
    for n, schedule in enumerate(schedules):
        accepted_history(schedule, [n + 1] * 3)
    barrier, outcomes, errors = threading.Barrier(4), [], []

    def refresher():
        try:
            barrier.wait()
            outcomes.append(refresh_snapshot())
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=refresher) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert True in outcomes
    rows = list(ExpectedDuration.objects.filter(kind=ExpectedDuration.SCHEDULE).values_list("subject", "seconds"))
    assert sorted(rows) == sorted((s.id, float(n + 1)) for n, s in enumerate(schedules))
