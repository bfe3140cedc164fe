"""POST /api/v1/runs/{runId}/replay: a failed occurrence runs again as a new attempt with a
higher fence, executed by the real runtime; refused on any other state, another tenant's
run, hostile notes; recorded on the run and its first attempt."""

import io

import pytest
from django.core.management import call_command

from runs import authority
from runs.models import Attempt, EffectIntent, Outbox, Run, RunState
from schedules.models import ApiToken, JobType
from tests.authority_steps import create_schedule, expire_lease, publish, report_schedule, stage, start_run
from workers.intake import claim_and_execute
from workers.jobs import framework
from workers.jobs.framework import PermanentJobError, scheduler_job

pytestmark = pytest.mark.django_db


def failed_run(schedule) -> Run:
    """A run whose first attempt failed for good (a permanent failure)."""
    run = start_run(schedule)
    return authority.complete(run_id=run.id, attempt_id=run.current_attempt_id, fence=run.fence, outcome="failed",
                              error="upstream down", retryable=False)


def replay(client, run_id, body=None):
    return client.post(f"/api/v1/runs/{run_id}/replay", body if body is not None else {"note": "upstream fixed"},
                       format="json")


def test_replay__a_failed_run_is_queued_again_and_its_next_attempt_gets_a_higher_fence(tenant, client):
    run = failed_run(report_schedule(tenant, effects={"email": {"to": ["sales@example.com"]}}))
    dispatches = Outbox.objects.filter(run=run).count()

    response = replay(client, run.id)

    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["runId"], body["state"], body["pendingReason"], body["finishedAt"], body["error"]) == (
        run.id, "queued", None, None, None)
    assert (body["attempt"], body["maxAttempts"]) == (1, 1 + 3)  # a fresh retry budget
    actor = ApiToken.objects.get(tenant=tenant).name
    [recorded] = body["replays"]
    assert (recorded["actor"], recorded["note"], recorded["afterAttempt"]) == (actor, "upstream fixed", 1)
    assert [a["replay"] for a in body["attempts"]] == [None]
    assert Outbox.objects.filter(run=run).count() == dispatches + 1  # a dispatch intent of its own

    again = authority.claim(worker_label="replayer")
    assert (again.id, again.fence, again.attempt_count) == (run.id, 2, 2)
    publish(again, stage(again, b"region,total\nus,42\n"))
    shown = client.get(f"/api/v1/runs/{run.id}").json()
    assert shown["state"] == "succeeded" and shown["result"] is not None
    assert [(a["number"], a["state"]) for a in shown["attempts"]] == [(1, "failed"), (2, "succeeded")]
    assert shown["attempts"][1]["replay"] == {"at": recorded["at"], "actor": actor, "note": "upstream fixed"}
    assert [e["action"] for e in shown["effects"]] == [f"send-{run.id}"]  # the occurrence's effect identity
    assert EffectIntent.objects.filter(run=run).count() == 1


@pytest.mark.parametrize("state", ["queued", "running", "succeeded", "canceled"])
def test_replay__any_state_but_failed_is_409_invalid_state(tenant, client, state):
    schedule = create_schedule(tenant)
    run, _ = authority.run_once(tenant=tenant, schedule_id=schedule.id)
    if state != "queued":
        run = authority.claim(worker_label="w")
    if state == "succeeded":
        publish(run, stage(run, b"x"))
    if state == "canceled":
        authority.run_cancel(tenant=tenant, run_id=run.id)
        expire_lease(run.id)
        authority.sweep_expired_leases()
    assert Run.objects.get(id=run.id).state == state

    response = replay(client, run.id)

    assert response.status_code == 409 and response.json()["error"]["code"] == "invalid_state", response.content
    assert Run.objects.get(id=run.id).state == state and Run.objects.get(id=run.id).replays is None


def test_replay__another_tenant_s_run_or_no_such_run_is_404(tenant, other_client, client):
    run = failed_run(create_schedule(tenant))
    for run_id in (run.id, "run_missing", "run%00x", "%E2%80%AE" * 40):
        response = replay(other_client if run_id == run.id else client, run_id)
        assert response.status_code == 404 and response.json()["error"]["code"] == "not_found", (run_id, response)
    assert Run.objects.get(id=run.id).state == RunState.FAILED


@pytest.mark.parametrize("body", [
    {"note": "x" * 501}, {"note": "line\nbreak"}, {"note": "bell\x07"}, {"note": "\u202eevil"}, {"note": "nul\x00"},
    '{"note": "\\ud800"}', {"note": 42}, {"note": None}, {"note": ["a"]}, {"note": "ok", "extra": 1},
])
def test_replay__a_hostile_note_is_400_and_changes_nothing(tenant, client, body):
    run = failed_run(create_schedule(tenant))
    if isinstance(body, str):  # raw JSON: a lone surrogate no client library would encode
        response = client.post(f"/api/v1/runs/{run.id}/replay", body, content_type="application/json")
    else:
        response = replay(client, run.id, body)
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid_request", error
    assert isinstance(body, str) or error["details"]["field"] in ("note", "extra"), error  # raw: the body is refused
    assert Run.objects.get(id=run.id).state == RunState.FAILED


def test_replay__an_empty_body_or_no_note_is_accepted(tenant, client):
    run = failed_run(create_schedule(tenant))
    response = client.post(f"/api/v1/runs/{run.id}/replay")
    assert response.status_code == 200, response.content
    assert response.json()["replays"][0]["note"] == ""


def test_replay__a_run_of_a_deleted_schedule_is_409(tenant, client):
    schedule = create_schedule(tenant)
    run = failed_run(schedule)
    assert client.delete(f"/api/v1/schedules/{schedule.id}").status_code in (200, 204)
    response = replay(client, run.id)
    assert response.status_code == 409 and response.json()["error"]["code"] == "invalid_state"


@pytest.fixture
def flaky_job(monkeypatch, tenant):
    """A job that fails for good while ``broken["now"]`` is set, declared for this test only."""
    monkeypatch.setattr(framework, "JOBS", dict(framework.JOBS))
    broken = {"now": True}

    def until_fixed(ctx):
        if broken["now"]:
            raise PermanentJobError("upstream down")
        return f"fence {ctx.fence}".encode()

    scheduler_job("replay.until_fixed", max_attempts=2, initial_delay_seconds=0, max_delay_seconds=0)(until_fixed)
    call_command("sync_job_types", stdout=io.StringIO())
    tenant.allowed_job_types.add(JobType.objects.get(name="replay.until_fixed"))
    return broken


def test_replay__the_real_runtime_executes_the_replayed_attempt_which_publishes_once(tenant, client, flaky_job):
    schedule = create_schedule(tenant, job_type="replay.until_fixed", params={})
    run, _ = authority.run_once(tenant=tenant, schedule_id=schedule.id)
    [first] = claim_and_execute(resource_classes=["short"], worker_label="w1")
    assert first.outcome == "failed" and Run.objects.get(id=run.id).state == RunState.FAILED

    flaky_job["now"] = False
    assert replay(client, run.id).status_code == 200
    [second] = claim_and_execute(resource_classes=["short"], worker_label="w2")

    assert (second.run_id, second.outcome) == (run.id, "succeeded")
    run.refresh_from_db()
    assert (run.state, run.fence, run.accepted_attempt.number, run.attempt_count) == (RunState.SUCCEEDED, 2, 2, 2)
    assert list(Attempt.objects.filter(run=run).order_by("number").values_list("state", "fence")) == [
        ("failed", 1), ("succeeded", 2)]
    assert replay(client, run.id).status_code == 409  # succeeded now: its result was written once
    assert claim_and_execute(resource_classes=["short"], worker_label="w3") == []


def test_replay__fails_again_then_replays_again_each_recorded_on_its_first_attempt(tenant, client, flaky_job):
    schedule = create_schedule(tenant, job_type="replay.until_fixed", params={})
    run, _ = authority.run_once(tenant=tenant, schedule_id=schedule.id)
    claim_and_execute(resource_classes=["short"], worker_label="w1")
    assert replay(client, run.id, {"note": "first try"}).status_code == 200
    claim_and_execute(resource_classes=["short"], worker_label="w2")
    assert Run.objects.get(id=run.id).state == RunState.FAILED
    flaky_job["now"] = False
    body = replay(client, run.id, {"note": "second try"}).json()
    claim_and_execute(resource_classes=["short"], worker_label="w3")

    shown = client.get(f"/api/v1/runs/{run.id}").json()
    assert shown["state"] == "succeeded" and shown["maxAttempts"] == 2 + 2
    assert [(r["note"], r["afterAttempt"]) for r in shown["replays"]] == [("first try", 1), ("second try", 2)]
    assert [(a["number"], a["state"], (a["replay"] or {}).get("note")) for a in shown["attempts"]] == [
        (1, "failed", None), (2, "failed", "first try"), (3, "succeeded", "second try")]
    assert body["replays"][-1]["note"] == "second try"
