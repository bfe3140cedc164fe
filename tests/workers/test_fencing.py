"""The fence in the job's hands (workers.jobs.fencing): a team's table on this run's database
(PostgreSQL or SQLite) and a team's bucket on a real moto_server refuse a stale attempt's
write in one compare-and-set; ctx.still_owner() asks the ownership rule."""

import uuid
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

import pytest
from botocore.exceptions import ClientError
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from examples.models import DailyTotal
from objectstore.s3_client import s3_client
from runs.models import Run
from tests.authority_steps import create_schedule, expire_lease, start_run
from workers.job_context import context_for
from workers.jobs import StaleAttempt, fenced_get, fenced_put, fenced_update, fenced_update_or_create
from workers.jobs.framework import JobControl, JobLost

DAY = date(2026, 12, 1)


@dataclass
class Ctx:
    """What the helpers read of a job context: the fencing token."""

    run_id: str
    fence: int
    attempt_id: str = ""

    def __post_init__(self):
        self.attempt_id = self.attempt_id or f"att_{self.run_id}_{self.fence}"


def write(ctx, orders: int) -> bool:
    return fenced_update_or_create(ctx, DailyTotal, day=DAY, defaults={
        "orders": orders, "revenue": Decimal("1.50"), "written_by_attempt": ctx.fence})


def stored() -> tuple:
    return DailyTotal.objects.values_list("orders", "fence_run_id", "fence").get(day=DAY)


@pytest.mark.django_db
def test_fenced_update_or_create__creates_then_a_higher_fence_wins_and_a_lower_one_is_refused():
    assert write(Ctx("run_a", 1), 10) is True
    assert write(Ctx("run_a", 2), 20) is False
    assert stored() == (20, "run_a", 2)

    with pytest.raises(StaleAttempt, match="fence 1 of run run_a"):
        write(Ctx("run_a", 1), 11)
    assert stored() == (20, "run_a", 2)
    assert write(Ctx("run_a", 2), 21) is False  # the same attempt again: its own fence is not higher
    assert stored() == (21, "run_a", 2)


@pytest.mark.django_db
def test_fenced_update_or_create__another_occurrence_is_not_ordered_by_this_one_s_fence():
    write(Ctx("run_a", 3), 30)
    assert write(Ctx("run_b", 1), 5) is False
    assert stored() == (5, "run_b", 1)


@pytest.mark.django_db
def test_fenced_update__is_one_guarded_statement():
    write(Ctx("run_a", 1), 10)
    pk = DailyTotal.objects.get(day=DAY).pk
    with CaptureQueriesContext(connection) as queries:
        fenced_update(Ctx("run_a", 2), DailyTotal, pk, orders=12)
    [statement] = [q["sql"] for q in queries.captured_queries]
    assert statement.startswith("UPDATE") and '"fence" <=' in statement and '"fence" IS NULL' in statement
    assert stored() == (12, "run_a", 2)


@pytest.mark.django_db
def test_fenced_update__refuses_a_stale_attempt_and_names_a_missing_row():
    write(Ctx("run_a", 2), 20)
    pk = DailyTotal.objects.get(day=DAY).pk
    with pytest.raises(StaleAttempt) as refused:
        fenced_update(Ctx("run_a", 1), DailyTotal, pk, orders=1)
    assert isinstance(refused.value, JobLost)  # the runtime ends the attempt; `except Exception` cannot swallow it
    assert stored() == (20, "run_a", 2)
    with pytest.raises(DailyTotal.DoesNotExist):
        fenced_update(Ctx("run_a", 3), DailyTotal, pk + 1000, orders=1)


@pytest.mark.django_db
def test_fenced_update_or_create__a_refused_create_leaves_the_caller_s_transaction_usable():
    write(Ctx("run_a", 2), 20)
    with transaction.atomic():
        with pytest.raises(StaleAttempt):
            write(Ctx("run_a", 1), 11)
        assert stored() == (20, "run_a", 2)  # still usable after the failed insert (a savepoint)


# ---------------------------------------------------------------- S3


@pytest.fixture
def bucket(moto_server):
    client = s3_client(moto_server, "us-east-1")
    name = f"team-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=name)
    return client, name


def test_fenced_put__the_pointer_holds_the_highest_fence_and_a_stale_write_is_refused_and_removed(bucket):
    client, name = bucket
    assert fenced_get(client, name, "totals/day.json") is None
    first = fenced_put(Ctx("run_a", 1), client, name, "totals/day.json", b"attempt 1")
    fenced_put(Ctx("run_a", 2), client, name, "totals/day.json", b"attempt 2")
    assert fenced_get(client, name, "totals/day.json") == b"attempt 2"

    late = Ctx("run_a", 1, attempt_id="att_late")
    with pytest.raises(StaleAttempt):
        fenced_put(late, client, name, "totals/day.json", b"late attempt 1")
    assert fenced_get(client, name, "totals/day.json") == b"attempt 2"
    keys = {o["Key"] for o in client.list_objects_v2(Bucket=name)["Contents"]}
    assert f"totals/day.json/fence-1-{late.attempt_id}" not in keys  # the refused write is removed
    assert first in keys  # superseded writes stay (a lifecycle rule may expire them)

    fenced_put(Ctx("run_b", 1), client, name, "totals/day.json", b"next occurrence")
    assert fenced_get(client, name, "totals/day.json") == b"next occurrence"


def test_fenced_put__the_pointer_moves_only_by_a_conditional_write_the_store_checks(bucket):
    """The compare-and-set is the server's: a write against an outdated ETag is refused."""
    client, name = bucket
    fenced_put(Ctx("run_a", 1), client, name, "k", b"one")
    outdated = client.head_object(Bucket=name, Key="k/current")["ETag"]
    fenced_put(Ctx("run_a", 2), client, name, "k", b"two")
    with pytest.raises(ClientError) as refused:
        client.put_object(Bucket=name, Key="k/current", Body=b"{}", IfMatch=outdated)
    assert refused.value.response["Error"]["Code"] == "PreconditionFailed"
    with pytest.raises(ClientError):
        client.put_object(Bucket=name, Key="k/current", Body=b"{}", IfNoneMatch="*")
    assert fenced_get(client, name, "k") == b"two"


# ---------------------------------------------------------------- still_owner


@pytest.mark.django_db
def test_still_owner__true_while_the_attempt_owns_the_run_false_once_its_lease_passed(tenant):
    run = start_run(create_schedule(tenant))
    run = Run.objects.select_related("current_attempt", "schedule").get(id=run.id)
    ctx = context_for(run, JobControl())
    assert (ctx.run_id, ctx.attempt_id, ctx.fence) == (run.id, run.current_attempt_id, 1)
    with CaptureQueriesContext(connection) as queries:
        assert ctx.still_owner() is True
    assert len(queries.captured_queries) == 1

    expire_lease(run.id)
    assert ctx.still_owner() is False


# ---------------------------------------------------------------- the example


@pytest.mark.django_db
@pytest.mark.usefixtures("file_objects")
def test_example_daily_totals__writes_the_team_s_row_and_object_with_its_fence(tenant, bucket, monkeypatch):
    from examples import jobs as example_jobs
    from runs import authority
    from schedules.models import JobType
    from workers.intake import claim_and_execute

    client, name = bucket
    monkeypatch.setenv("TEAM_S3_ENDPOINT_URL", client.meta.endpoint_url)
    example_jobs._team_s3.cache_clear()
    tenant.allowed_job_types.add(JobType.objects.get(name="examples.daily_totals"))
    schedule = create_schedule(tenant, job_type="examples.daily_totals", params={"orders": 40, "bucket": name})
    run, _ = authority.run_once(tenant=tenant, schedule_id=schedule.id)
    try:
        [done] = claim_and_execute(resource_classes=["short"], worker_label="w")
    finally:
        example_jobs._team_s3.cache_clear()

    assert done.outcome == "succeeded", done.error
    row = DailyTotal.objects.get()
    assert (row.orders, row.written_by_attempt, row.fence_run_id, row.fence) == (40, 1, run.id, 1)
    summary = fenced_get(client, name, f"daily-totals/{row.day.isoformat()}.json")
    assert summary is not None and b'"orders": 40' in summary and str(row.revenue).encode() in summary
