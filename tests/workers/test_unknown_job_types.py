"""Mixed deployments during a rollout: a worker claims only runs of the job types it has code
for; a run of another type stays queued for a worker that has it, the hint that found it goes
back to the relay, and /metrics shows the mismatch. Two registries stand for the old and the
new deployment: the process's own (every job declared) and the same without demo.sleep."""

import re
from datetime import timedelta

import pytest
from django.test import Client

from kernel.clock import authority_now
from runs import authority
from runs.authority.unknown_job_types import REOFFER_MAX_SECONDS
from runs.models import Outbox, Run, RunState
from runs.relay import relay_pass
from schedule_services.lifecycle import schedule_create
from scheduler_project.http.schedule_requests import schedule_spec
from workers.embedded_pool import EmbeddedDispatcher
from workers.intake import claim_and_execute
from workers.jobs import framework

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("file_objects")]


def queued_sleeps(tenant, n: int) -> list[str]:
    schedule, _ = schedule_create(tenant=tenant, spec=schedule_spec({
        "name": "s", "jobType": "demo.sleep", "params": {"seconds": 0}, "overlapPolicy": "allow",
        "recurrence": {"kind": "cron", "cron": "0 9 * * *"}}))
    return [authority.run_once(tenant=tenant, schedule_id=schedule.id)[0].id for _ in range(n)]


def unknown_metric(job_type: str = "demo.sleep", resource_class: str = "short") -> float:
    text = Client().get("/metrics").content.decode()
    found = re.search(rf'^scheduler_unknown_job_type_runs_total\{{job_type="{re.escape(job_type)}",'
                      rf'resource_class="{resource_class}"\}} (\S+)$', text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


@pytest.fixture
def old_deployment(monkeypatch):
    """This process's registry without demo.sleep, as a worker of the previous release has it
    (the URLs, whose API docs read the registry, are loaded first, with the whole registry)."""
    unknown_metric()
    monkeypatch.setattr(framework, "JOBS", {k: v for k, v in framework.JOBS.items() if k != "demo.sleep"})
    return monkeypatch


def test_claim_many__a_run_of_a_job_type_the_worker_lacks_stays_queued_for_one_that_has_it(tenant):
    [run_id] = queued_sleeps(tenant, 1)
    old = [name for name in framework.declared_jobs() if name != "demo.sleep"]

    assert authority.claim_many(n=4, worker_label="old", job_types=old) == []
    run = Run.objects.get(id=run_id)
    assert (run.state, run.attempt_count, run.fence) == (RunState.QUEUED, 0, 0)

    claimed = authority.claim_many(n=4, worker_label="new", job_types=list(framework.declared_jobs()))
    assert [r.id for r in claimed] == [run_id]
    assert claimed[0].current_attempt.worker_label == "new"


def test_claim_and_execute__old_worker_hands_the_hint_back_and_counts_it__new_worker_runs_it(
        tenant, old_deployment):
    run_ids = queued_sleeps(tenant, 2)
    assert relay_pass(lambda hints: None) == (2, 0)  # the hints went out to the broker
    before = unknown_metric()

    assert claim_and_execute(resource_classes=["short"], worker_label="old", limit=4) == []

    assert unknown_metric() == before + 2
    assert set(Run.objects.values_list("state", flat=True)) == {RunState.QUEUED}
    rows = list(Outbox.objects.filter(run_id__in=run_ids))
    assert all(r.published_at is None and r.processed_at is None for r in rows)  # handed back
    assert all(r.relay_until > authority_now() for r in rows)  # after a delay, not in a loop
    assert relay_pass(lambda hints: None) == (0, 0)
    Outbox.objects.update(relay_until=authority_now() - timedelta(seconds=1))
    sent = []
    assert relay_pass(sent.extend) == (2, 0)
    assert sorted(h.run_id for h in sent) == sorted(run_ids)

    old_deployment.undo()  # the hint reaches a worker of the new release
    outcomes = claim_and_execute(resource_classes=["short"], worker_label="new", limit=4)
    assert sorted(o.run_id for o in outcomes) == sorted(run_ids)
    assert {o.outcome for o in outcomes} == {"succeeded"}
    assert unknown_metric() == before + 2  # nothing passed over any more


def test_pass_over__a_hint_handed_back_again_waits_longer__at_most_the_cap(tenant):
    [run_id] = queued_sleeps(tenant, 1)
    relay_pass(lambda hints: None)
    others = [name for name in framework.declared_jobs() if name != "demo.sleep"]
    for attempts, expected in ((3, 3), (1000, REOFFER_MAX_SECONDS)):
        Outbox.objects.update(publish_attempts=attempts, published_at=authority_now())
        now = authority_now()
        assert authority.pass_over(spare=1, resource_classes=["short"], job_types=others, reoffer=True) == {
            "demo.sleep": 1}
        delay = (Outbox.objects.get(run_id=run_id).relay_until - now).total_seconds()
        assert expected - 1 < delay <= expected + 1


def test_embedded_dispatcher__claims_only_its_job_types_and_counts_the_others(tenant, old_deployment):
    [run_id] = queued_sleeps(tenant, 1)
    before = unknown_metric()
    dispatcher = EmbeddedDispatcher({"short": 2})
    try:
        assert dispatcher.dispatch_once() == 0
        assert dispatcher.dispatch_once() == 0  # counted once per UNKNOWN_CHECK_SECONDS, not per poll
        assert unknown_metric() == before + 1
        assert Run.objects.get(id=run_id).state == RunState.QUEUED

        old_deployment.undo()
        assert dispatcher.dispatch_once() == 1
    finally:
        for executor in dispatcher.executors.values():
            executor.shutdown(wait=True)
    assert Run.objects.get(id=run_id).state == RunState.SUCCEEDED


def test_pass_over__reads_a_bounded_window_of_the_queue__a_run_further_back_is_found_once_it_drains(
    tenant, monkeypatch
):
    """A partial claim must not read a whole backlog: pass_over looks among the first
    PASS_OVER_WINDOW claimable runs only."""
    from runs.authority import unknown_job_types

    monkeypatch.setattr(unknown_job_types, "PASS_OVER_WINDOW", 3)
    known = queued_sleeps(tenant, 3)
    [unknown] = queued_sleeps(tenant, 1)
    Run.objects.filter(id=unknown).update(job_type="billing.export")
    types = list(framework.declared_jobs())

    assert authority.pass_over(spare=4, resource_classes=["short"], job_types=types, reoffer=False) == {}
    assert [r.id for r in authority.claim_many(n=3, worker_label="w", job_types=types)] == known
    assert authority.pass_over(spare=4, resource_classes=["short"], job_types=types, reoffer=False) == {
        "billing.export": 1}
