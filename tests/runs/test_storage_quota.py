"""A tenant's quota of stored bytes: cleanup counts recorded uploads into the tenant's
storage exactly once and takes deleted objects off; past max_stored_bytes, staging refuses
new results (429 quota_exceeded through the API, a retryable staging failure in process)."""

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection

from runs import authority
from runs.models import Run, StoredObject, TenantStorage
from runs.retention import cleanup_pass, count_stored_bytes
from kernel.errors import QuotaExceeded
from tests.authority_steps import publish, report_schedule, stage, start_run
from tests.factories import make_tenant
from tests.runs.test_retention import finished_days_ago

pytestmark = pytest.mark.usefixtures("file_objects")


def stored_bytes(tenant) -> int:
    return TenantStorage.objects.filter(tenant=tenant).values_list("stored_bytes", flat=True).first() or 0


def published(schedule, data: bytes) -> Run:
    run = start_run(schedule)
    return publish(run, stage(run, data))


@pytest.mark.django_db
def test_recorded_uploads_are_counted_once__deleted_ones_taken_off(tenant):
    other_tenant = make_tenant("other")
    mine, theirs = report_schedule(tenant), report_schedule(other_tenant)
    old, new = published(mine, b"x" * 100), published(mine, b"y" * 30)
    published(theirs, b"z" * 7)
    staged = start_run(mine)
    stage(staged, b"w" * 5)  # staged, not published: it holds bytes too
    assert stored_bytes(tenant) == 0  # counted by cleanup, not on the upload's path

    assert count_stored_bytes().objects_counted == 4
    assert (stored_bytes(tenant), stored_bytes(other_tenant)) == (135, 7)
    assert count_stored_bytes().objects_counted == 0 and stored_bytes(tenant) == 135  # never twice

    finished_days_ago(old, 10)  # past OBJECT_RETENTION_DAYS: its bytes go
    assert cleanup_pass().objects_deleted == 1
    assert stored_bytes(tenant) == 35 and StoredObject.objects.filter(run=new, counted=True).exists()


@pytest.mark.django_db
def test_an_upload_registered_but_not_recorded_is_counted_once_recorded(tenant):
    """A registered object is in the index of objects to count from the start (runs.0033),
    its size unknown until the upload is recorded: counting passes it by until then."""
    run = start_run(report_schedule(tenant))
    upload = authority.Upload(run.id, run.current_attempt_id, run.fence, b"v" * 12, "text/csv")
    answers, to_write = authority.stage_register([upload])
    assert to_write == [0] and StoredObject.objects.get(run=run).size is None

    assert count_stored_bytes().objects_counted == 0 and stored_bytes(tenant) == 0
    assert not StoredObject.objects.get(run=run).counted

    stage(run, b"v" * 12)  # the same bytes again: written and recorded under the registered row
    assert count_stored_bytes().objects_counted == 1 and stored_bytes(tenant) == 12
    assert count_stored_bytes().objects_counted == 0 and stored_bytes(tenant) == 12


@pytest.mark.django_db
def test_a_deleted_object_never_counted_is_not_taken_off(tenant):
    schedule = report_schedule(tenant)
    counted = published(schedule, b"a" * 10)
    count_stored_bytes()
    uncounted = published(schedule, b"b" * 20)
    finished_days_ago(uncounted, 10)
    cleanup_pass()  # counts it, then deletes it: in and out
    assert StoredObject.objects.get(run=uncounted).state == "deleted"
    assert stored_bytes(tenant) == 10 and StoredObject.objects.get(run=counted).counted


@pytest.mark.django_db
def test_past_the_quota_staging_is_refused__below_it_accepted_again(tenant):
    tenant.max_stored_bytes = 100
    tenant.save()
    schedule = report_schedule(tenant)
    first = published(schedule, b"x" * 100)
    count_stored_bytes()
    run = start_run(schedule)
    with pytest.raises(QuotaExceeded) as refused:
        stage(run, b"y")
    assert refused.value.details == {"quota": "maxStoredBytes", "limit": 100, "storedBytes": 100}
    assert not StoredObject.objects.filter(run=run).exists()
    finished_days_ago(first, 10)
    cleanup_pass()
    assert stored_bytes(tenant) == 0
    publish(run, stage(run, b"y"))


@pytest.mark.django_db(transaction=True)
def test_concurrent_counting_and_deleting__every_byte_counted_once(tenant, settings):
    """Cleanup passes on several connections at once (counting and deleting the same objects
    as they go): the tenant's figure ends equal to the bytes its live objects hold."""
    settings.CLEANUP_BATCH_SIZE = 3
    schedule = report_schedule(tenant)
    runs = [published(schedule, b"x" * (i + 1)) for i in range(40)]
    for run in runs[::2]:
        finished_days_ago(run, 10)
    barrier = threading.Barrier(4)

    def pass_on_its_own_connection():
        try:
            barrier.wait()
            for _ in range(5):
                cleanup_pass(batch_size=3, max_batches=2)
        finally:
            connection.close()

    with ThreadPoolExecutor(4) as pool:
        for future in [pool.submit(pass_on_its_own_connection) for _ in range(4)]:
            future.result()
    for _ in range(20):  # whatever the threads left to do
        if not any(cleanup_pass().as_dict().values()):
            break
    live = StoredObject.objects.filter(state__in=["staged", "referenced"])
    assert live.count() == 20 and not live.filter(counted=False).exists()
    assert stored_bytes(tenant) == sum(live.values_list("size", flat=True)) == sum(range(2, 41, 2))
