"""Capacity in the API: job-type statistics, the forecast, admission of strict schedules,
jitter, backfill."""

from datetime import datetime, timedelta, timezone

import pytest

from kernel.clock import authority_now, instant
from runs.authority import release_backfill
from runs.capacity.live import slots_report
from runs.models import PendingReason, Run, RunState
from schedules.jitter import jitter_offset, jittered
from schedules.models import Schedule
from tests.api.conftest import CRON_BODY, assert_error, create_schedule
from tests.authority_steps import make_due

UTC = timezone.utc
DAILY_9 = {"kind": "cron", "cron": "0 9 * * *", "timezone": "UTC"}


def _wave(client, n: int, recurrence=DAILY_9, **fields):
    for i in range(n):
        create_schedule(client, name=f"wave-{i}", recurrence=recurrence, params={"seconds": 0}, **fields)


LOOSE = {"startDeadlineSeconds": 86400}  # a strict wave: the claim serves it as first as a new strict schedule


def _strict(client, **fields):
    body = {**CRON_BODY, "name": "strict", "recurrence": DAILY_9, **fields}
    return client.post("/api/v1/schedules", body)


def test_job_types__carry_runtime_statistics_of_accepted_attempts(client, tenant):
    from tests.authority_steps import succeeded_run

    run = succeeded_run(tenant)
    [report] = [t for t in client.get("/api/v1/job-types").json()["results"] if t["name"] == "report.sales"]
    stats = report["statistics"]
    assert (stats["windowSeconds"], stats["samples"]) == (7 * 86400, 1)
    attempt = Run.objects.get(id=run.id).accepted_attempt
    took = round((attempt.finished_at - attempt.started_at).total_seconds(), 3)
    assert stats["durationSeconds"] == {"p50": took, "p95": took, "p99": took, "mean": took}
    assert stats["expectedDurationSeconds"] == took and stats["queueDelaySeconds"]["p99"] >= 0


def test_forecast__operator_sees_minutes_slots_and_needs(client, operator):
    _wave(client, 40)
    slots_report("embedded:test:1", {"short": 10})
    response = operator.get("/api/v1/capacity/forecast", {"from": "2030-01-07T08:58:30Z", "to": "2030-01-07T09:05:00Z"})
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["from"], body["scope"], body["objectiveSeconds"]) == ("2030-01-07T08:58:00Z", "installation", 10.0)
    assert body["classes"]["short"] == {"liveSlots": 10, "busySlots": 0, "freeSlots": 10, "processes": 1,
                                        "requiredSlots": 14}
    assert body["minutes"] == [{
        "minute": "2030-01-07T09:00:00Z", "resourceClass": "short", "due": 40, "slotSeconds": 200.0,
        "liveSlots": 10, "lateness": {"p50": 5.0, "p99": 15.0}, "feasible": False, "slotsNeeded": 14,
    }]


def test_forecast__tenant_sees_its_own_share_only(client, other_client):
    _wave(client, 5)
    _wave(other_client, 7)
    body = client.get("/api/v1/capacity/forecast", {"from": "2030-01-07T09:00:00Z"}).json()
    assert body["scope"] == "tenant" and body["classes"] is None
    assert [(m["due"], m["liveSlots"], m["slotsNeeded"]) for m in body["minutes"]] == [(5, None, None)]


@pytest.mark.parametrize("query, field", [
    ({"from": "2030-01-07T00:00:00Z", "to": "2030-01-14T00:01:00Z"}, "to"),
    ({"from": "2030-01-07T00:00:00Z", "to": "2030-01-06T00:00:00Z"}, "to"),
    ({"from": "tomorrow"}, "from"),
    ({"resourceClass": "huge"}, "resourceClass"),
    ({"limit": "3"}, "limit"),
])
def test_forecast__bad_queries_are_400(operator, query, field):
    assert_error(operator.get("/api/v1/capacity/forecast", query), 400, "invalid_request", field)


def test_forecast__worker_token_is_403_and_anonymous_401(worker_client, anonymous):
    assert_error(worker_client.get("/api/v1/capacity/forecast"), 403, "forbidden")
    assert_error(anonymous.get("/api/v1/capacity/forecast"), 401, "unauthenticated")


def test_admission__feasible_strict_schedule_is_accepted(client):
    _wave(client, 40)
    slots_report("embedded:test:1", {"short": 10})
    response = _strict(client, startDeadlineSeconds=30)
    assert response.status_code == 201, response.content
    assert (response.json()["startDeadlineSeconds"], response.json()["jitterSeconds"]) == (30, 0)


def test_admission__an_ordinary_wave_does_not_delay_a_strict_schedule(client):
    """The claim serves strict runs first: 40 ordinary runs due with it wait, it does not."""
    _wave(client, 40)
    slots_report("embedded:test:1", {"short": 10})
    assert _strict(client, startDeadlineSeconds=1).status_code == 201


def test_admission__infeasible_strict_schedule_is_409_and_nothing_is_created(client):
    slots_report("embedded:test:1", {"short": 10})
    _wave(client, 40, **LOOSE)
    error = assert_error(_strict(client, startDeadlineSeconds=10), 409, "deadline_infeasible")
    details = error["details"]
    # 41 strict five-second runs on 10 slots start at 0, 5, 10, 15, 20 s; served last of its
    # tenant's strict runs due at 09:00, it starts at 20 s.
    assert details["predictedP99Seconds"] == 20 and details["liveSlots"] == 10
    assert details["resourceClass"] == "short" and details["startDeadlineSeconds"] == 10
    assert details["instant"].endswith("T09:00:00Z")
    assert details["slotsNeeded"] == 14  # 41 runs and it: three waves of 14 by 10 s
    assert details["suggestedJitterSeconds"] is not None
    assert not Schedule.objects.filter(name="strict").exists()
    # The suggested jitter makes it feasible, whatever id the new schedule draws.
    response = _strict(client, startDeadlineSeconds=10, jitterSeconds=details["suggestedJitterSeconds"])
    assert response.status_code == 201, response.content


def test_admission__editing_into_an_infeasible_promise_is_409_and_leaves_the_schedule(client):
    slots_report("embedded:test:1", {"short": 10})
    _wave(client, 40, **LOOSE)
    schedule = _strict(client).json()
    response = client.patch(f"/api/v1/schedules/{schedule['scheduleId']}",
                            {"expectedRevision": 1, "startDeadlineSeconds": 5})
    assert_error(response, 409, "deadline_infeasible")
    assert client.get(f"/api/v1/schedules/{schedule['scheduleId']}").json()["revision"] == 1
    ordinary = client.patch(f"/api/v1/schedules/{schedule['scheduleId']}",
                            {"expectedRevision": 1, "startDeadlineSeconds": None})
    assert ordinary.status_code == 200 and ordinary.json()["startDeadlineSeconds"] is None


def _congested_hour(client):
    """40 strict five-second runs due at one instant 2-3 hours from now on 10 slots: a new
    strict hourly schedule due then too starts 20 s late. Answers that instant."""
    slots_report("embedded:test:1", {"short": 10})
    congested = (authority_now() + timedelta(hours=3)).replace(minute=0, second=0, microsecond=0)
    _wave(client, 40, recurrence={"kind": "cron", "cron": f"0 {congested.hour} * * *", "timezone": "UTC"}, **LOOSE)
    return congested


HOURLY = {"kind": "cron", "cron": "0 * * * *", "timezone": "UTC"}


def test_admission__reads_the_candidate_in_its_window_and_under_its_calendars(client):
    """The candidate's instants are those the scanner will materialize: a calendar skipping
    the congested day, a window closing before the congested instant, or a count ending
    before it leave it nothing to be late at; bare, its rule is refused there."""
    congested = _congested_hour(client)
    error = assert_error(_strict(client, recurrence=HOURLY, startDeadlineSeconds=10), 409, "deadline_infeasible")
    assert error["details"]["instant"] == instant(congested)
    holiday = client.post("/api/v1/calendars", {"name": "holiday", "timezone": "UTC",
                                                "excludeDates": [congested.date().isoformat()]}).json()
    admitted = {
        "calendar skip": {"calendar": {"calendarIds": [holiday["calendarId"]], "policy": "skip"}},
        "activeUntil": {"activeUntil": instant(congested - timedelta(minutes=1))},
        "endAfterOccurrences": {"endAfterOccurrences": 2},
        "activeFrom": {"activeFrom": instant(congested + timedelta(minutes=1))},
    }
    for case, fields in admitted.items():
        response = _strict(client, recurrence=HOURLY, startDeadlineSeconds=10, name=case, **fields)
        assert response.status_code == 201, (case, response.content)


def test_admission__an_edit_is_read_under_the_calendar_and_window_it_would_store(client):
    congested = _congested_hour(client)
    schedule = _strict(client, recurrence=HOURLY).json()  # ordinary: nothing to admit
    path = f"/api/v1/schedules/{schedule['scheduleId']}"
    assert_error(client.patch(path, {"expectedRevision": 1, "startDeadlineSeconds": 10}), 409, "deadline_infeasible")
    until = instant(congested - timedelta(minutes=1))
    response = client.patch(path, {"expectedRevision": 1, "startDeadlineSeconds": 10, "activeUntil": until})
    assert response.status_code == 200, response.content
    # Reopening the window puts the congested instant back among its own: refused, nothing stored.
    assert_error(client.patch(path, {"expectedRevision": 2, "activeUntil": None}), 409, "deadline_infeasible")
    assert client.get(path).json()["activeUntil"] == until


def test_admission__no_live_slots_refuses_a_strict_promise(client):
    error = assert_error(_strict(client, startDeadlineSeconds=60), 409, "deadline_infeasible")
    assert error["details"]["predictedP99Seconds"] is None and error["details"]["liveSlots"] == 0
    assert _strict(client).status_code == 201  # an ordinary schedule is never refused


@pytest.mark.parametrize("fields, field", [
    ({"jitterSeconds": -1}, "jitterSeconds"), ({"jitterSeconds": 3601}, "jitterSeconds"),
    ({"jitterSeconds": 1.5}, "jitterSeconds"), ({"startDeadlineSeconds": 0}, "startDeadlineSeconds"),
])
def test_schedule_fields__out_of_bounds_are_400(client, fields, field):
    assert_error(_strict(client, **fields), 400, "invalid_request", field)


def test_jitter__deterministic_bounded_and_shown_by_preview(client):
    schedule = create_schedule(client, recurrence={"kind": "cron", "cron": "* * * * *"}, jitterSeconds=45)
    first = client.get(f"/api/v1/schedules/{schedule['scheduleId']}/preview", {"count": 20,
                       "after": "2030-01-07T00:00:00Z"}).json()["instants"]
    again = client.get(f"/api/v1/schedules/{schedule['scheduleId']}/preview", {"count": 20,
                       "after": "2030-01-07T00:00:00Z"}).json()["instants"]
    assert first == again
    offsets = [(_at(i["dueAt"]) - _at(i["at"])).total_seconds() for i in first]
    assert all(0 <= o <= 45 and o == int(o) for o in offsets) and len(set(offsets)) > 5
    at = _at(first[0]["at"])
    assert offsets[0] == jitter_offset(schedule["scheduleId"], at, 45)


def test_jitter__no_due_instant_past_the_last_renderable_one_is_shown_or_stored(client):
    from schedules.recurrence import LATEST

    body = create_schedule(client, recurrence={"kind": "cron", "cron": "* * * * *"}, jitterSeconds=3600)
    preview = client.get(f"/api/v1/schedules/{body['scheduleId']}/preview",
                         {"count": 30, "after": "9999-12-30T23:29:00Z"})
    assert preview.status_code == 200, preview.content
    dues = [_at(i["dueAt"]) for i in preview.json()["instants"]]
    assert len(dues) == 30 and max(dues) == LATEST  # an offset past the end stops at it
    assert all(_at(i["at"]) <= due <= LATEST for i, due in zip(preview.json()["instants"], dues))
    # Materializing and the forecast take the same jittered(): their due instants stop there too.
    last = datetime(9999, 12, 30, 23, 59, tzinfo=UTC)
    assert jittered(body["scheduleId"], last, 3600) == min(last + timedelta(seconds=jitter_offset(
        body["scheduleId"], last, 3600)), LATEST)


def test_jitter__materialized_occurrence_keeps_its_nominal_instant_and_waits_until_due(client, tenant):
    from runs import authority

    body = create_schedule(client, recurrence={"kind": "cron", "cron": "* * * * *"}, jitterSeconds=3600)
    schedule = Schedule.objects.get(id=body["scheduleId"])
    instant = make_due(schedule, ago=timedelta(0))
    offset = jitter_offset(schedule.id, instant, 3600)
    assert offset > 0  # this instant's draw; 0 would be a 1-in-3601 coincidence
    authority.materialize_due()
    run = Run.objects.get(schedule=schedule, scheduled_at=instant)
    assert run.due_at == instant + timedelta(seconds=offset)
    assert (run.state, run.pending_reason) == (RunState.PENDING, PendingReason.NOT_DUE)
    view = client.get(f"/api/v1/runs/{run.id}").json()
    assert _at(view["scheduledAt"]) == instant and _at(view["dueAt"]) == run.due_at
    Run.objects.filter(id=run.id).update(due_at=authority_now() - timedelta(seconds=1))  # time passes
    assert authority.promote_due_runs() == 1
    assert Run.objects.get(id=run.id).state == RunState.QUEUED


def test_backfill__creates_past_instants_once_and_releases_100_per_cycle(client):
    schedule = create_schedule(client, recurrence={"kind": "cron", "cron": "* * * * *"})
    url = f"/api/v1/schedules/{schedule['scheduleId']}/backfill"
    body = {"from": "2026-01-01T00:00:00Z", "to": "2026-01-01T04:00:00Z"}
    response = client.post(url, body)
    assert response.status_code == 200, response.content
    assert response.json() == {"instants": 240, "created": 240, "existing": 0}
    assert client.post(url, body).json() == {"instants": 240, "created": 0, "existing": 240}
    runs = Run.objects.filter(schedule_id=schedule["scheduleId"])
    assert runs.count() == 240 and runs.filter(pending_reason=PendingReason.BACKFILL).count() == 240
    assert release_backfill() == 100
    queued = runs.filter(state=RunState.QUEUED).order_by("scheduled_at")
    assert queued.count() == 100 and queued.first().scheduled_at == datetime(2026, 1, 1, tzinfo=UTC)
    assert release_backfill() == 100 and release_backfill() == 40 and release_backfill() == 0


def test_backfill__stops_at_the_schedule_s_next_instant__which_the_scanner_then_materializes(client):
    """A backfill reaching past a late schedule's next instant leaves that instant (and the
    rest) to the scanner: both writing it would break the one-run-per-instant key."""
    from runs import authority

    schedule = create_schedule(client, recurrence={"kind": "cron", "cron": "* * * * *"})
    row = Schedule.objects.get(id=schedule["scheduleId"])
    due = make_due(row, ago=timedelta(minutes=3)).replace(second=0, microsecond=0)
    Schedule.objects.filter(id=row.id).update(next_run_at=due)  # the scanner is 3 minutes late
    body = {"from": (due - timedelta(minutes=5)).isoformat(), "to": authority_now().isoformat()}

    response = client.post(f"/api/v1/schedules/{row.id}/backfill", body)

    assert response.status_code == 200, response.content
    assert response.json()["instants"] == 5  # the five before the next instant
    authority.materialize_due()  # its misfire policy writes the instants from `due` on: no conflict
    instants = list(Run.objects.filter(schedule=row).values_list("scheduled_at", flat=True))
    assert len(instants) == len(set(instants)) and due in instants


def test_backfill__of_a_paused_schedule__refused_until_it_resumes(client):
    schedule = create_schedule(client, recurrence={"kind": "cron", "cron": "* * * * *"})
    assert client.post(f"/api/v1/schedules/{schedule['scheduleId']}/pause", {}).status_code == 200
    response = client.post(f"/api/v1/schedules/{schedule['scheduleId']}/backfill",
                           {"from": "2026-01-01T00:00:00Z", "to": "2026-01-01T01:00:00Z"})
    assert_error(response, 409, "invalid_state")
    assert not Run.objects.exists()


@pytest.mark.parametrize("body, status, field", [
    ({"from": "2026-01-01T00:00:00Z", "to": "2026-01-01T16:41:00Z"}, 400, "to"),  # 1,001 instants
    ({"from": "2026-01-01T00:00:00Z", "to": "2099-01-01T00:00:00Z"}, 400, "to"),  # the future
    ({"from": "2026-01-02T00:00:00Z", "to": "2026-01-01T00:00:00Z"}, 400, "to"),
    ({"from": "2026-01-01T00:00:00Z"}, 400, "to"),
    ({"from": "2026-01-01T00:00:00Z", "to": "2026-01-01T01:00:00Z", "extra": 1}, 400, "extra"),
])
def test_backfill__bounds(client, body, status, field):
    schedule = create_schedule(client, recurrence={"kind": "cron", "cron": "* * * * *"})
    assert_error(client.post(f"/api/v1/schedules/{schedule['scheduleId']}/backfill", body), status,
                 "invalid_request", field)
    assert not Run.objects.exists()


def test_backfill__of_another_tenants_schedule_is_404(client, other_client):
    schedule = create_schedule(client)
    response = other_client.post(f"/api/v1/schedules/{schedule['scheduleId']}/backfill",
                                 {"from": "2026-01-01T00:00:00Z", "to": "2026-01-02T00:00:00Z"})
    assert_error(response, 404, "not_found")


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_backfill__of_a_once_schedule_whose_instant_passed__creates_that_instant(client):
    """No next instant (not paused): the scanner writes nothing, so the range is not cut short."""
    schedule = create_schedule(client, recurrence={"kind": "once", "at": "2025-06-01T00:00:00Z"})
    assert schedule["nextRunAt"] is None
    url = f"/api/v1/schedules/{schedule['scheduleId']}/backfill"
    body = {"from": "2025-01-01T00:00:00Z", "to": "2026-01-01T00:00:00Z"}
    assert client.post(url, body).json() == {"instants": 1, "created": 1, "existing": 0}
    assert Run.objects.get().scheduled_at == datetime(2025, 6, 1, tzinfo=UTC)
