"""What a scan reads: the due index (bucket, next_run_at, id) with bucket filters, batch
bounds and most-overdue first; never the whole schedule table, never a schedule's history."""

from datetime import timedelta

import pytest
from django.conf import settings
from django.db import IntegrityError, connection, transaction

from kernel.clock import authority_now
from runs import authority
from runs.models import Run, RunState
from schedule_services.lifecycle import due_bucket
from schedules.models import Schedule
from tests.authority_steps import create_schedule, make_due

pytestmark = pytest.mark.django_db


def due_in_bucket(tenant, bucket: int, *, ago=timedelta(seconds=1)) -> Schedule:
    schedule = create_schedule(tenant)
    Schedule.objects.filter(id=schedule.id).update(bucket=bucket)
    make_due(schedule, ago=ago)
    return schedule


def materialized(schedules) -> set[str]:
    return set(Run.objects.filter(schedule__in=schedules).values_list("schedule_id", flat=True))


def table_reads(table: str, expression: str) -> int:
    """This transaction's access statistics for ``table`` (pg_stat_xact_user_tables)."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {expression} FROM pg_stat_xact_user_tables WHERE relname = %s", [table])
        return cursor.fetchone()[0]


def test_materialize__given_buckets__only_their_schedules(tenant):
    schedules = {bucket: due_in_bucket(tenant, bucket) for bucket in (1, 2, 3, 40)}

    assert authority.materialize_due(buckets=[2, 40]).queued == 2
    assert materialized(schedules.values()) == {schedules[2].id, schedules[40].id}

    assert authority.materialize_due().queued == 2  # no buckets given: all of them
    assert materialized(schedules.values()) == {s.id for s in schedules.values()}


def test_materialize__a_bucket_named_twice__scanned_once(tenant):
    schedules = [due_in_bucket(tenant, bucket) for bucket in (2, 2, 3)]

    assert authority.materialize_due(buckets=[2, 3, 2, 3]).queued == 3
    assert Run.objects.filter(schedule__in=schedules).count() == 3


def test_schedule__bucket_outside_the_scanned_range__refused(tenant):
    schedule = create_schedule(tenant)
    with pytest.raises(IntegrityError), transaction.atomic():
        Schedule.objects.filter(id=schedule.id).update(bucket=settings.DUE_BUCKETS)


def test_materialize__batch_size_bounds_a_transaction_across_buckets(tenant):
    schedules = [due_in_bucket(tenant, bucket % 8) for bucket in range(30)]

    batches = []
    while (size := authority.materialize_due(batch_size=7).schedules) > 0:
        batches.append(size)

    assert batches == [7, 7, 7, 7, 2]
    assert Run.objects.filter(schedule__in=schedules).count() == 30


def test_materialize__within_a_bucket__most_overdue_first(tenant):
    late = [due_in_bucket(tenant, 5, ago=timedelta(seconds=seconds)) for seconds in (10, 30, 20)]

    authority.materialize_due(buckets=[5], batch_size=1)

    assert materialized(late) == {late[1].id}


def test_materialize__small_batch_of_a_large_table__reads_indexes_not_the_table(tenant):
    """A poll that finds 5 due schedules among thousands costs what it returns: the lock query
    reads the due index bucket by bucket, the advance finds rows by primary key."""
    due = [due_in_bucket(tenant, bucket) for bucket in (0, 9, 17, 33, 63)]
    template = due[0]
    later = authority_now() + timedelta(days=1)
    idle = [
        Schedule(tenant=tenant, job_type_id=template.job_type_id, name="idle", recurrence=template.recurrence,
                 next_run_at=later)
        for _ in range(3000)
    ]
    for schedule in idle:
        schedule.bucket = due_bucket(schedule.id)
    Schedule.objects.bulk_create(idle)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE schedules_schedule")

    before = table_reads("schedules_schedule", "seq_scan")
    assert authority.materialize_due().queued == 5

    assert materialized(due) == {s.id for s in due}
    assert table_reads("schedules_schedule", "seq_scan") == before


def test_materialize_and_complete__long_history__do_not_read_it(tenant):
    """A minutely schedule keeps tens of thousands of finished runs: the overlap guard's
    bookkeeping reads only the unfinished ones."""
    schedule = create_schedule(tenant)  # buffer_one: materialize counts the guard's waiters
    history = authority_now() - timedelta(days=10)
    Run.objects.bulk_create(
        Run(schedule=schedule, tenant=tenant, revision=1, job_type="demo.sleep", resource_class="short",
            state=RunState.FAILED, scheduled_at=history + timedelta(minutes=i), due_at=history, created_at=history,
            finished_at=history)
        for i in range(3000)
    )
    make_due(schedule)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE runs_run")

    rows_read = "idx_tup_fetch + seq_tup_read"
    before = table_reads("runs_run", rows_read)
    assert authority.materialize_due().queued == 1
    run = authority.claim(worker_label="w")
    authority.complete(run_id=run.id, attempt_id=run.current_attempt.id, fence=run.fence, outcome="failed",
                       error="boom")
    assert table_reads("runs_run", rows_read) - before < 100


def test_scan_command__bucket_ranges__each_bucket_once():
    from runs.management.commands.scan import parse_buckets

    assert parse_buckets("0-3,2-5,9") == [0, 1, 2, 3, 4, 5, 9]
    assert parse_buckets(None) is None
