"""A small real wave against its forecast, and live capacity reported by real worker
processes: the embedded dispatcher and a Celery worker. PostgreSQL, Redis and the
processes are real; the forecast is made before the wave, from the statistics of a
warm-up wave and the slots the dispatcher reported."""

import signal
from datetime import timedelta

import pytest

from kernel.clock import authority_now
from runs.capacity.forecast import forecast
from runs.capacity.live import live_slots
from runs.capacity.statistics import job_type_statistics
from runs.models import Run, RunState, WorkerSlots
from schedule_services.lifecycle import schedule_create
from scheduler_project.http.schedule_requests import schedule_spec
from tests.child_env import database_url_of_test_db
from tests.e2e.processes import wait_until
from tests.factories import make_tenant

# alone: its forecast is checked against a live wave's measured lateness, which a test beside it would move.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.alone]

SLOTS = 20
WAVE = 300


@pytest.fixture
def embedded(processes, tmp_path):
    processes.env.update({"DATABASE_URL": database_url_of_test_db(), "OBJECT_STORE_URL": f"file://{tmp_path}/objects",
                          "CAPACITY_REPORT_INTERVAL_SECONDS": "1"})
    processes.env.pop("REDIS_URL", None)
    return processes


def _wave(tenant, n: int, at, prefix: str) -> list[str]:
    ids = []
    for i in range(n):
        body = {"name": f"{prefix}-{i}", "jobType": "demo.sleep", "params": {"seconds": 1},
                "recurrence": {"kind": "once", "at": at.isoformat()}}
        ids.append(schedule_create(tenant=tenant, spec=schedule_spec(body))[0].id)
    return ids


def _finished(ids) -> bool:
    return Run.objects.filter(schedule_id__in=ids, state=RunState.SUCCEEDED).count() == len(ids)


def _lateness(ids) -> list[float]:
    rows = Run.objects.filter(schedule_id__in=ids).values_list("scheduled_at", "started_at")
    return sorted((started - scheduled).total_seconds() for scheduled, started in rows)


def _rank(values, p):
    return values[max(1, -(-p * len(values) // 100)) - 1]


def test_wave__measured_start_lateness_matches_the_forecast(embedded):
    tenant = make_tenant("acme", max_active_runs=1000)
    embedded.manage("scan", "scan", "--interval", "0.1")
    embedded.manage("dispatch", "dispatch", "--pools", f"short={SLOTS}", "--poll-interval", "0.05")
    wait_until(lambda: live_slots().get("short") == SLOTS, timeout=30, message="the dispatcher's slot report")

    # The statistics: a small wave of the same shape, three runs a slot. Only its first round
    # starts all at once (a run's duration then includes the wait for a core: 1.4-2.6 s for a
    # 1 s job on two cores); the wave's fifteen rounds mostly start as slots free, and a
    # warm-up of that first round alone made the forecast 15-80 % late.
    warm = _wave(tenant, 3 * SLOTS, authority_now() + timedelta(seconds=3), "warm")
    wait_until(lambda: _finished(warm), timeout=60, message="the warm-up wave")
    expected = job_type_statistics("demo.sleep").expected_duration()

    at = authority_now().replace(microsecond=0) + timedelta(seconds=12)
    ids = _wave(tenant, WAVE, at, "wave")
    predicted = forecast(at, at + timedelta(minutes=1), classes=["short"])
    [row] = predicted.rows
    assert row.due == WAVE
    wait_until(lambda: _finished(ids), timeout=120, message="the wave")

    measured = _lateness(ids)
    figures = {
        "wave": WAVE, "slots": SLOTS, "expectedDurationSeconds": round(expected, 3),
        "forecast": {"p50": row.p(50), "p99": row.p(99)},
        "measured": {"p50": round(_rank(measured, 50), 3), "p99": round(_rank(measured, 99), 3)},
    }
    print(figures)  # BENCHMARKS.md, "Capacity forecast against a real wave"
    for q in ("p50", "p99"):
        assert figures["measured"][q] == pytest.approx(figures["forecast"][q], rel=0.20), figures


def test_live_capacity__embedded_pools_and_celery_concurrency_report_and_withdraw(embedded, redis_url):
    embedded.manage("dispatch", "dispatch", "--pools", "short=4,long=2")
    wait_until(lambda: live_slots() == {"short": 4, "long": 2}, timeout=30, message="the embedded pools' report")
    embedded.celery_worker("worker", "short", concurrency=3, REDIS_URL=redis_url)
    wait_until(lambda: live_slots() == {"short": 7, "long": 2}, timeout=60, message="the Celery worker's report")
    [celery] = WorkerSlots.objects.filter(process__startswith="celery:")
    first = celery.reported_at
    wait_until(lambda: WorkerSlots.objects.get(id=celery.id).reported_at > first, timeout=10,
               message="a periodic report")
    embedded.signal("worker", signal.SIGTERM)
    embedded.children.pop("worker").wait(timeout=30)
    wait_until(lambda: live_slots() == {"short": 4, "long": 2}, timeout=10, message="the withdrawal on shutdown")
    embedded.stop("dispatch")
    wait_until(lambda: live_slots() == {}, timeout=10, message="the dispatcher's withdrawal")
