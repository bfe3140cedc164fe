"""Group commit: completions a worker process has ready at once are published in one
transaction, each fence-checked and refused on its own; a group cut off mid-transaction
leaves nothing behind, and repeating it publishes every completion once."""

import time
from datetime import timedelta

import psycopg
import pytest
from django.conf import settings
from django.db import OperationalError, connection
from django.test.utils import CaptureQueriesContext

from kernel.errors import StaleFence
from runs import authority
from runs.models import Attempt, EffectIntent, ObjectState, Run, RunState, StoredObject
from tests.authority_steps import create_schedule, expire_lease, make_due
from workers.uploads import stage_results

pytestmark = pytest.mark.django_db(transaction=True)


def claimed(tenant, n: int, **schedule_kw) -> list[Run]:
    """n runs of n schedules, claimed by one worker (one batch)."""
    for i in range(n):
        make_due(create_schedule(tenant, name=f"g{i}", overlapPolicy="allow", **schedule_kw))
    authority.materialize_due()
    runs = authority.claim_many(n=n, worker_label="w")
    assert len(runs) == n
    return runs


def staged(runs) -> list[authority.Success]:
    uploads = [authority.Upload(r.id, r.current_attempt_id, r.fence, f"out {r.id}".encode(), "text/plain")
               for r in runs]
    return [authority.Success(r.id, r.current_attempt_id, r.fence, obj)
            for r, obj in zip(runs, stage_results(uploads))]


def test_complete_many__successes_in_one_group_commit__the_rest_each_alone__answers_in_order(tenant):
    """The worker's one entry point: succeeded attempts take the group commit, a failure and
    a stale completion are judged by the single completion; one answer per outcome, in order."""
    runs = claimed(tenant, 4)
    [first, stale, failing, last] = runs
    group = {s.run_id: s for s in staged([first, stale, last])}
    expire_lease(stale.id)
    authority.sweep_expired_leases()
    authority.claim(worker_label="other")  # the run now belongs to a new attempt
    outcomes = [
        authority.Outcome(r.id, r.current_attempt_id, r.fence, "succeeded", group[r.id].stored) for r in (first, stale)
    ] + [
        authority.Outcome(failing.id, failing.current_attempt_id, failing.fence, "failed", error="boom"),
        authority.Outcome(last.id, last.current_attempt_id, last.fence, "succeeded", group[last.id].stored),
    ]

    with CaptureQueriesContext(connection) as sent:
        answers = authority.complete_many(outcomes)

    assert isinstance(answers[1], StaleFence)
    assert [answers[i].state for i in (0, 2, 3)] == [RunState.SUCCEEDED, RunState.FAILED, RunState.SUCCEEDED]
    assert [Run.objects.get(id=r.id).state for r in (first, failing, last)] == [
        RunState.SUCCEEDED, RunState.FAILED, RunState.SUCCEEDED]
    # The group's transaction and the failure's; the stale one's refusal rolls back.
    assert [q["sql"] for q in sent.captured_queries].count("COMMIT") == 2


def test_group__one_stale_completion__refused_alone_the_others_published(tenant):
    runs = claimed(tenant, 5)
    group = staged(runs)
    late = runs[2]
    expire_lease(late.id)
    authority.sweep_expired_leases()
    retry = authority.claim(worker_label="other")  # the run now belongs to a new attempt
    assert retry.id == late.id and retry.fence == late.fence + 1

    answers = authority.complete_succeeded(group)

    assert isinstance(answers[2], StaleFence)
    assert [a.state for i, a in enumerate(answers) if i != 2] == [RunState.SUCCEEDED] * 4
    for run, success in zip(runs, group):
        stored = Run.objects.get(id=run.id)
        if run.id == late.id:
            assert stored.state == RunState.RUNNING and stored.current_attempt_id == retry.current_attempt_id
            assert StoredObject.objects.get(key=success.stored.key).state == ObjectState.STAGED
        else:
            assert stored.state == RunState.SUCCEEDED and stored.result_key == success.stored.key
            assert stored.result_checksum == success.stored.checksum
            assert Attempt.objects.get(id=run.current_attempt_id).state == "succeeded"
            assert StoredObject.objects.get(key=success.stored.key).state == ObjectState.REFERENCED


def test_group__repeated__answered_with_the_saved_runs(tenant):
    group = staged(claimed(tenant, 3))
    first = authority.complete_succeeded(group)
    again = authority.complete_succeeded(group)
    assert again == first and {a.state for a in again} == {RunState.SUCCEEDED}


def test_group__costs_the_same_statements_whatever_its_size(tenant):
    costs = []
    for n in (1, 12):
        group = staged(claimed(tenant, n))
        with CaptureQueriesContext(connection) as queries:
            answers = authority.complete_succeeded(group)
        assert {a.state for a in answers} == {RunState.SUCCEEDED}
        costs.append(len([q for q in queries.captured_queries
                          if q["sql"] not in ("BEGIN", "BEGIN IMMEDIATE", "COMMIT")]))
    # PostgreSQL: lock the schedules, lock and read the completions, publish. The embedded
    # SQLite takes no row locks and publishes with three statements (it has no writing WITH).
    assert costs == ([3, 3] if connection.vendor == "postgresql" else [4, 4])


def test_group__creates_each_publication_s_effect_intents(tenant):
    runs = claimed(tenant, 3, effects={"email": {"to": ["ops@example.com"]}})
    authority.complete_succeeded(staged(runs))
    intents = EffectIntent.objects.filter(run_id__in=[r.id for r in runs])
    assert sorted(i.action for i in intents) == sorted(f"send-{r.id}" for r in runs)
    assert {i.target["to"][0] for i in intents} == {"ops@example.com"}


def test_group__a_guarded_schedule_s_completion__releases_its_guard_through_complete(tenant):
    schedule = create_schedule(tenant, name="guarded", overlapPolicy="skip")
    make_due(schedule, ago=timedelta(seconds=2))
    authority.materialize_due()
    [run] = authority.claim_many(n=1, worker_label="w")
    assert run.holds_guard

    [answer] = authority.complete_succeeded(staged([run]))

    assert answer.state == RunState.SUCCEEDED
    assert Run.objects.get(id=run.id).holds_guard is False
    assert type(schedule).objects.get(id=schedule.id).active_run_id is None


def test_group__cut_by_pg_terminate_backend__nothing_committed_and_a_repeat_publishes_all(tenant, sessions):
    """Another session holds one run's row, so the group waits inside its transaction (its
    schedule locks taken); its backend is then terminated. Nothing of the group may stay."""
    runs = claimed(tenant, 4)
    group = staged(runs)
    blocker = psycopg.connect(_dsn(), autocommit=False)
    blocker.execute("SELECT 1 FROM runs_run WHERE id = %s FOR UPDATE", [runs[3].id])
    worker = sessions("worker")
    pid = worker.call(lambda: connection.cursor().connection.info.backend_pid)

    cut = worker.submit(authority.complete_succeeded, group)
    _wait_until_waiting_for_a_lock(pid)
    with psycopg.connect(_dsn(), autocommit=True) as admin:
        assert admin.execute("SELECT pg_terminate_backend(%s)", [pid]).fetchone()[0]
    with pytest.raises(OperationalError):
        cut.result(30)
    blocker.rollback()
    blocker.close()

    assert set(Run.objects.filter(id__in=[r.id for r in runs]).values_list("state", flat=True)) == {"running"}
    assert set(StoredObject.objects.filter(run_id__in=[r.id for r in runs]).values_list("state", flat=True)) == {
        "staged"}
    worker.call(lambda: connection.close())  # the proxy must resolve in the worker thread
    answers = worker.call(authority.complete_succeeded, group)
    assert {a.state for a in answers} == {RunState.SUCCEEDED}
    assert Run.objects.filter(id__in=[r.id for r in runs], state="succeeded").count() == 4


def _dsn() -> str:
    db = settings.DATABASES["default"]
    return f"host={db['HOST']} port={db['PORT']} user={db['USER']} dbname={db['NAME']}"


def _wait_until_waiting_for_a_lock(pid: int, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    with psycopg.connect(_dsn(), autocommit=True) as watcher:
        while time.monotonic() < deadline:
            row = watcher.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone()
            if row and row[0] == "Lock":
                return
            time.sleep(0.02)
    raise AssertionError("the group never waited for the blocked row")
