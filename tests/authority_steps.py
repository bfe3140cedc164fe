"""Steps that take runs through the real authority: create a schedule, make it due,
materialize, claim, stage, publish, and let a lease pass.

Time passes by moving a lease deadline or a schedule's ``next_run_at`` in the database
(authority time), never by mocking a clock.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import connection

from kernel.clock import authority_now
from runs import authority
from runs.models import Attempt, Run, StoredObject
from schedule_services.lifecycle import schedule_create
from scheduler_project.http.schedule_requests import schedule_spec
from schedules.models import Schedule
from workers import uploads

# One instant per make_due(): after the instant we set, this rule's next one is months away.
YEARLY = "0 0 1 1 *"
# How far ahead a test puts an instant it sets up before it comes due (a directive on it, an
# armed timer): under a second of set-up alone, several with two test processes sharing two
# cores (`make test PYTEST_WORKERS=2`); an instant already past at creation is never that schedule's.
LEAD = timedelta(seconds=5)
PARAMS = {"report.sales": {"region": "us"}, "demo.sleep": {"seconds": 0}}
REPORT = b"region,total\nus,42\n"


def create_schedule(tenant, *, cron: str = YEARLY, name: str = "s", job_type: str = "demo.sleep",
                    params: dict | None = None, zone: str = "UTC", **extra) -> Schedule:
    body = {
        "name": name,
        "jobType": job_type,
        "params": PARAMS[job_type] if params is None else params,
        "recurrence": {"kind": "cron", "cron": cron, "timezone": zone},
        **extra,
    }
    schedule, _ = schedule_create(tenant=tenant, spec=schedule_spec(body))
    return schedule


def report_schedule(tenant, *, job_type: str = "report.sales", name: str = "sales-report", **extra) -> Schedule:
    """The sales report whose results effects deliver and retention expires."""
    return create_schedule(tenant, job_type=job_type, name=name, **extra)


def make_due(schedule: Schedule, *, ago: timedelta = timedelta(seconds=1)) -> datetime:
    """Time passes until the schedule's next instant: it becomes ``ago`` late. Returns the instant."""
    instant = authority_now() - ago
    Schedule.objects.filter(id=schedule.id).update(next_run_at=instant)
    return instant


def materialize_one(schedule: Schedule) -> Run:
    """Make one instant due, run the scanner, and return that instant's occurrence."""
    instant = make_due(schedule)
    authority.materialize_due()
    return Run.objects.get(schedule=schedule, scheduled_at=instant)


def start_run(schedule: Schedule, *, lease_seconds: int = 60) -> Run:
    """Make one instant due, materialize it and claim it: a running run with attempt 1."""
    make_due(schedule, ago=timedelta(milliseconds=10))
    authority.materialize_due()
    run = authority.claim(worker_label="test-worker", lease_seconds=lease_seconds)
    assert run is not None and run.schedule_id == schedule.id
    return run


def stage(run: Run, data: bytes, *, attempt_id: str | None = None, fence: int | None = None,
          content_type: str = "text/csv") -> StoredObject:
    """Upload as the run's current attempt, or as the (possibly stale) one named."""
    return uploads.stage_result(
        run_id=run.id, attempt_id=attempt_id or run.current_attempt_id, fence=fence or run.fence,
        data=data, content_type=content_type,
    )


def complete_success(run_id: str, attempt_id: str, fence: int, obj: StoredObject) -> Run:
    return authority.complete(
        run_id=run_id, attempt_id=attempt_id, fence=fence, outcome="succeeded",
        object_key=obj.key, version_id=obj.version_id, checksum=obj.checksum,
    )


def publish(run: Run, obj: StoredObject, *, attempt_id: str | None = None, fence: int | None = None) -> Run:
    """Complete as the run's current attempt, or as the (possibly stale) one named."""
    return complete_success(run.id, attempt_id or run.current_attempt_id, fence or run.fence, obj)


def succeeded_run(tenant, *, data: bytes = REPORT, **schedule_kw) -> Run:
    """A sales report run, claimed, staged and published."""
    run = start_run(report_schedule(tenant, **schedule_kw))
    return publish(run, stage(run, data))


def accepted_history(schedule: Schedule, seconds: list[float], *, delay: float = 0.0) -> list[Run]:
    """One succeeded run of `schedule` per entry of `seconds`, oldest first, whose accepted
    attempt took that long and was claimed `delay` after its due instant (the attempt's
    times moved in the database, as time passing would have set them)."""
    runs = []
    for took in seconds:
        run = start_run(schedule)
        run = publish(run, stage(run, REPORT))
        started = authority_now() - timedelta(minutes=5)
        Attempt.objects.filter(id=run.accepted_attempt_id).update(
            started_at=started, finished_at=started + timedelta(seconds=took))
        Run.objects.filter(id=run.id).update(due_at=started - timedelta(seconds=delay))
        runs.append(run)
    return runs


def set_lease_deadline(run_id: str, deadline: datetime) -> None:
    Run.objects.filter(id=run_id).update(lease_expires_at=deadline)
    Attempt.objects.filter(run_id=run_id, state="running").update(lease_expires_at=deadline)


def expire_lease(run_id: str, *, seconds_ago: float = 1) -> None:
    """Time passes past the lease deadline (database time, as the authority compares it)."""
    set_lease_deadline(run_id, authority_now() - timedelta(seconds=seconds_ago))


def insert_runs(count: int, *, tenant_id: str, schedule_ids: list[str], state: str, due: str, extra: str = "",
                 step: int = 1, offset: int = 0, attempts: bool = False) -> None:
    """``count`` runs of these schedules written by one SQL statement (a history in seconds),
    the i-th at ``due`` (an SQL instant: ``now() - interval '1 day'`` on PostgreSQL,
    ``'now', '-1 day'`` on SQLite) plus i x ``step`` + ``offset`` seconds, with ids
    ``run_<extra><i>``; finished ones finished then, running ones leased for an hour. With
    ``attempts``, each names its attempt ``att_<extra><i>`` (the caller inserts it in the same
    transaction) and a succeeded one its result."""
    seconds = f"(g.i * {step} + {offset})"
    if connection.vendor == "postgresql":
        numbers = f"generate_series(1, {count}) AS g(i)"
        at = f"{due} + {seconds} * interval '1 second'"
        lease = f"{at} + interval '1 hour'"
    else:
        numbers = f"(WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < {count}) SELECT i FROM c) AS g"
        at = f"STRFTIME('%Y-%m-%d %H:%M:%f', {due}, '+' || {seconds} || ' seconds')"
        lease = f"STRFTIME('%Y-%m-%d %H:%M:%f', {due}, '+' || {seconds} || ' seconds', '+1 hour')"
    live = state in ("queued", "running")
    schedules = "CASE " + " ".join(f"WHEN g.i % {len(schedule_ids)} = {n} THEN '{sid}'"
                                   for n, sid in enumerate(schedule_ids)) + " END"
    attempt = f"'att_{extra}' || g.i" if attempts else "NULL"
    result = [attempt, "'result.json'", "'v1'", "'sha256:0'", "2", "'application/json'"]
    if state != "succeeded":
        result = ["NULL"] * len(result)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO runs_run (id, schedule_id, tenant_id, trigger, revision, payload, job_type, resource_class,"
            f" state, pending_reason, scheduled_at, due_at, fence, lease_expires_at, attempt_count, dispatch_count,"
            f" max_attempts, holds_guard, strict, cancellation_requested, cancellation_accepted, finished_at, error,"
            f" progress_message, created_at, current_attempt_id, accepted_attempt_id, result_key, result_version_id,"
            f" result_checksum, result_size, result_content_type)"
            f" SELECT 'run_{extra}' || g.i, {schedules}, '{tenant_id}', 'schedule', 1, '{{}}', 'demo.sleep', 'short',"
            f" '{state}', '', {at}, {at}, 1, {lease if state == 'running' else 'NULL'}, 1, 1, 3, false, false,"
            f" false, false, {'NULL' if live else at}, '', '', {at}, {attempt}, {', '.join(result)} FROM {numbers}")
