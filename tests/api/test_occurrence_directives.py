"""Occurrence directives through the API: skip, hold and note on a coming instant, applied by
the transaction that materializes it (the scan, the armed timer), release of a held run, the
listing of coming occurrences, and hostile instants."""

import time
from datetime import datetime, timedelta

from kernel.clock import authority_now, instant
from runs import authority
from runs.loops import scan_pass
from runs.models import PendingReason, Run, RunState, SkipReason
from schedules.models import AuditEntry, MAX_DIRECTIVES, OccurrenceDirective, Schedule
from tests.api.conftest import create_schedule
from tests.authority_steps import LEAD

HOURLY = {"kind": "interval", "everySeconds": 3600}


def _hourly_from(client, anchor, **extra):
    """An hourly schedule whose first instant is ``anchor``."""
    return create_schedule(client, recurrence={**HOURLY, "anchor": instant(anchor)}, **extra)


def _put(client, schedule_id, at, body):
    return client.put(f"/api/v1/schedules/{schedule_id}/occurrences/{at}", body, format="json")


def _code(response):
    return response.json()["error"]["code"]


def _wait_until(at):
    time.sleep(max(0.0, (at - authority_now()).total_seconds()) + 0.05)


def test_directives__each_applied_by_the_scan_that_materializes_its_instant(client):
    first = authority_now().replace(microsecond=0) + LEAD
    skipped, held, noted = (_hourly_from(client, first, name=name)["scheduleId"] for name in ("a", "b", "c"))
    at = instant(first)
    for sid, action in ((skipped, "skip"), (held, "hold"), (noted, "note")):
        response = _put(client, sid, at, {"action": action, "note": f"{action} it"})
        assert response.status_code == 200, response.content
        body = response.json()
        assert body["at"] == at and body["directive"]["action"] == action
        assert body["directive"]["note"] == f"{action} it" and body["directive"]["createdBy"] == "acme"

    _wait_until(first)
    scan_pass()

    run = Run.objects.get(schedule_id=skipped)
    assert (run.state, run.skip_reason, run.note) == (RunState.SKIPPED, SkipReason.DIRECTIVE, "skip it")
    run = Run.objects.get(schedule_id=noted)
    assert (run.state, run.note) == (RunState.QUEUED, "note it")
    held_run = Run.objects.get(schedule_id=held)
    assert (held_run.state, held_run.pending_reason) == (RunState.PENDING, PendingReason.HELD)
    body = client.get(f"/api/v1/runs/{held_run.id}").json()
    assert (body["state"], body["pendingReason"], body["note"]) == ("pending", "held", "hold it")
    assert client.get(f"/api/v1/runs/{Run.objects.get(schedule_id=skipped).id}").json()["skipReason"] == "directive"

    # Never claimed until released (the noted one is the only claimable run).
    claimed = authority.claim(worker_label="w")
    assert claimed is not None and claimed.schedule_id == noted
    assert authority.claim(worker_label="w") is None

    response = client.post(f"/api/v1/runs/{held_run.id}/release")
    assert response.status_code == 200, response.content
    assert (response.json()["state"], response.json()["pendingReason"]) == ("queued", None)
    assert authority.claim(worker_label="w").id == held_run.id
    assert _code(client.post(f"/api/v1/runs/{held_run.id}/release")) == "invalid_state"

    # Written after materialization: refused, and removing an applied directive too.
    response = _put(client, noted, at, {"action": "skip"})
    assert (response.status_code, _code(response)) == (409, "invalid_state")
    assert client.delete(f"/api/v1/schedules/{noted}/occurrences/{at}").status_code == 409
    actions = set(AuditEntry.objects.filter(schedule_id=held).values_list("action", flat=True))
    assert {"hold", "release"} <= actions


def test_directive__written_after_a_timer_was_armed__still_applied(client):
    """An armed timer read the schedule before the directive: its guarded write is refused
    (directive_seq moved) and the locking path applies the directive."""
    import pytest
    from django.conf import settings
    from django.db import connection
    from runs.timers import Timers, fire

    if connection.vendor != "postgresql":
        pytest.skip("armed timers are PostgreSQL's: the embedded SQLite fires through the locking path")
    first = authority_now().replace(microsecond=0) + LEAD
    sid = _hourly_from(client, first, overlapPolicy="allow")["scheduleId"]
    timers = Timers()
    timers.load(range(settings.DUE_BUCKETS))
    assert sid in timers.armed
    assert _put(client, sid, instant(first), {"action": "skip"}).status_code == 200

    _wait_until(first)
    fire(timers, timers.pop_due())

    run = Run.objects.get(schedule_id=sid)
    assert (run.state, run.skip_reason) == (RunState.SKIPPED, SkipReason.DIRECTIVE)


def test_occurrences__lists_coming_instants_with_their_directives_and_pages(client):
    first = authority_now().replace(microsecond=0) + timedelta(hours=1)
    sid = _hourly_from(client, first)["scheduleId"]
    second = instant(first + timedelta(hours=1))
    assert _put(client, sid, second, {"action": "hold"}).status_code == 200

    page = client.get(f"/api/v1/schedules/{sid}/occurrences?limit=2").json()
    assert [o["at"] for o in page["results"]] == [instant(first), second]
    assert page["results"][0]["directive"] is None and page["results"][1]["directive"]["action"] == "hold"
    assert page["results"][0]["local"] is not None
    following = client.get(f"/api/v1/schedules/{sid}/occurrences?limit=2&cursor={page['nextCursor']}").json()
    assert following["results"][0]["at"] == instant(first + timedelta(hours=2))

    assert client.delete(f"/api/v1/schedules/{sid}/occurrences/{second}").status_code == 204
    assert client.get(f"/api/v1/schedules/{sid}/occurrences?limit=2").json()["results"][1]["directive"] is None
    assert client.delete(f"/api/v1/schedules/{sid}/occurrences/{second}").status_code == 404


def test_occurrences__end_after_occurrences__lists_only_the_instants_left_and_refuses_directives_past_them(client):
    first = authority_now().replace(microsecond=0) + LEAD
    sid = _hourly_from(client, first, endAfterOccurrences=3)["scheduleId"]
    _wait_until(first)
    scan_pass()  # the first of three materialized
    [run] = Run.objects.filter(schedule_id=sid)
    second, third, fourth = (instant(first + timedelta(hours=h)) for h in (1, 2, 3))

    listed = client.get(f"/api/v1/schedules/{sid}/occurrences?from={instant(first)}&limit=10").json()["results"]
    assert [o["at"] for o in listed] == [instant(first), second, third]
    assert listed[0]["runId"] == run.id and listed[1]["runId"] is None
    assert client.get(f"/api/v1/schedules/{sid}/occurrences?from={fourth}").json()["results"] == []

    assert _put(client, sid, third, {"action": "skip"}).status_code == 200
    response = _put(client, sid, fourth, {"action": "skip"})
    assert (response.status_code, _code(response)) == (400, "not_an_occurrence"), response.content
    assert "endAfterOccurrences" in response.json()["error"]["message"]
    assert not OccurrenceDirective.objects.filter(schedule_id=sid, instant=first + timedelta(hours=3)).exists()

    # Paused, the instants left count from where it resumes.
    assert client.post(f"/api/v1/schedules/{sid}/pause", {}, format="json").status_code == 200
    listed = client.get(f"/api/v1/schedules/{sid}/occurrences?from={instant(first)}&limit=10").json()["results"]
    assert [o["at"] for o in listed] == [instant(first), second, third]


def test_directive__hostile_instants_and_bodies__4xx_nothing_written(client, other_client):
    first = authority_now().replace(microsecond=0) + timedelta(hours=1)
    sid = _hourly_from(client, first)["scheduleId"]
    off_rule = instant(first + timedelta(minutes=1))
    cases = [
        (off_rule, {"action": "skip"}, 400, "not_an_occurrence"),
        ("9999-12-30T00:00:00Z", {"action": "skip"}, 400, "invalid_request"),
        ("10000-01-01T00:00:00Z", {"action": "skip"}, 400, "invalid_request"),
        ("not-an-instant", {"action": "skip"}, 400, "invalid_request"),
        ("2026-01-01 00:00:00", {"action": "skip"}, 400, "invalid_request"),
        (instant(first), {"action": "explode"}, 400, "invalid_request"),
        (instant(first), {"action": "note", "note": "x" * 501}, 400, "invalid_request"),
        (instant(first), {"action": "note", "note": "a\nb"}, 400, "invalid_request"),
        (instant(first), {"action": "note", "extra": 1}, 400, "invalid_request"),
    ]
    for at, body, status, code in cases:
        response = _put(client, sid, at, body)
        assert (response.status_code, _code(response)) == (status, code), (at, body, response.content)
    hourly = create_schedule(client, recurrence={"kind": "cron", "cron": "0 * * * *", "timezone": "UTC"})
    passed = instant(authority_now().replace(minute=0, second=0, microsecond=0))
    response = _put(client, hourly["scheduleId"], passed, {"action": "skip"})
    assert (response.status_code, _code(response)) == (409, "invalid_state")
    response = _put(other_client, sid, instant(first), {"action": "skip"})
    assert (response.status_code, _code(response)) == (404, "not_found")
    assert other_client.get(f"/api/v1/schedules/{sid}/occurrences").status_code == 404
    assert client.get(f"/api/v1/schedules/{sid}/occurrences?from={instant(first)}"
                      f"&to={instant(first + timedelta(days=367))}").status_code == 400
    assert not OccurrenceDirective.objects.exists()


def test_directive__at_most_max_directives_per_schedule(client):
    first = authority_now().replace(microsecond=0) + timedelta(hours=1)
    sid = _hourly_from(client, first)["scheduleId"]
    schedule = Schedule.objects.get(id=sid)
    now = authority_now()
    OccurrenceDirective.objects.bulk_create([
        OccurrenceDirective(schedule=schedule, tenant_id=schedule.tenant_id, instant=first + timedelta(hours=n),
                            action="note", created_at=now, actor_kind="api", actor="acme")
        for n in range(1, MAX_DIRECTIVES + 1)
    ])
    response = _put(client, sid, instant(first), {"action": "skip"})
    assert (response.status_code, _code(response)) == (429, "quota_exceeded")
    # Replacing one already there is no new directive.
    assert _put(client, sid, instant(first + timedelta(hours=1)), {"action": "skip"}).status_code == 200


def test_retention__deletes_directives_of_past_instants_the_scanner_is_behind(client):
    from runs.retention import cleanup_pass

    now = authority_now().replace(microsecond=0)
    behind, late = (_hourly_from(client, now + timedelta(hours=1), name=n)["scheduleId"] for n in ("a", "b"))
    future = now + timedelta(hours=1)
    for sid in (behind, late):
        schedule = Schedule.objects.get(id=sid)
        OccurrenceDirective.objects.bulk_create([
            OccurrenceDirective(schedule=schedule, tenant_id=schedule.tenant_id, instant=at, action="skip",
                                created_at=now, actor_kind="api", actor="acme")
            for at in (now - timedelta(hours=1), future)])
    # `late`: the scanner has not materialized its past instant yet; its directive must stay.
    Schedule.objects.filter(id=late).update(next_run_at=now - timedelta(hours=1))

    assert cleanup_pass().directives_deleted == 1
    left = set(OccurrenceDirective.objects.values_list("schedule_id", "instant"))
    assert left == {(behind, future), (late, now - timedelta(hours=1)), (late, future)}


# --- Edits: directives survive, dry runs, the revision's diff -------------------------------

DAILY_NINE = {"kind": "cron", "cron": "0 9 * * *", "timezone": "UTC"}


def _patch(client, sid, body):
    return client.patch(f"/api/v1/schedules/{sid}", body, format="json")


def test_edit__keeps_directives_the_new_rule_produces__orphans_the_others(client):
    sid = create_schedule(client, recurrence=DAILY_NINE)["scheduleId"]
    page = client.get(f"/api/v1/schedules/{sid}/occurrences?limit=3").json()["results"]
    first, second = page[1]["at"], page[2]["at"]
    assert _put(client, sid, first, {"action": "skip", "note": "holiday"}).status_code == 200
    assert _put(client, sid, second, {"action": "hold"}).status_code == 200

    # 09:00 UTC every day, then 09:00 UTC on the same days spelled in another zone and
    # dialect: every instant kept.
    same = {"kind": "cron", "cron": "0 10 * * *", "timezone": "Africa/Lagos", "dialect": "and"}
    body = _patch(client, sid, {"expectedRevision": 1, "recurrence": same}).json()
    assert body["orphanedDirectives"] == [] and body["instantsDiff"] == {"added": [], "removed": []}

    # 09:00 Lagos time is 08:00 UTC: both directives lose their instant.
    moved = {"kind": "cron", "cron": "0 9 * * *", "timezone": "Africa/Lagos"}
    body = _patch(client, sid, {"expectedRevision": 2, "recurrence": moved}).json()
    assert [o["at"] for o in body["orphanedDirectives"]] == [first, second]
    assert body["orphanedDirectives"][0]["directive"]["note"] == "holiday"
    assert first in body["instantsDiff"]["removed"] and body["instantsDiff"]["added"]
    orphaned = client.get(f"/api/v1/schedules/{sid}/occurrences?orphaned=true").json()["results"]
    assert [o["at"] for o in orphaned] == [first, second] and orphaned[0]["orphanedAt"]
    assert all(o["directive"] is None for o in client.get(f"/api/v1/schedules/{sid}/occurrences").json()["results"])

    # Back to 09:00 UTC: adopted again; an orphaned directive can be removed any time.
    body = _patch(client, sid, {"expectedRevision": 3, "recurrence": DAILY_NINE}).json()
    assert body["orphanedDirectives"] == []
    assert client.get(f"/api/v1/schedules/{sid}/occurrences?orphaned=true").json()["results"] == []
    revisions = client.get(f"/api/v1/schedules/{sid}/revisions").json()["results"]
    assert [r["revision"] for r in revisions] == [4, 3, 2, 1]
    assert revisions[1]["instantsDiff"]["removed"][0] == page[0]["at"] and revisions[-1]["instantsDiff"] is None


def test_edit__calendar_policies__orphan_the_directives_of_instants_they_skip_or_move(client):
    """A directive follows the instant, not the slot: a calendar that moves or skips its
    instant orphans it; a directive on the moved instant is kept until a policy drops it."""
    weekly = {"kind": "cron", "cron": "0 9 * * 3", "timezone": "UTC"}  # Wednesdays
    sid = create_schedule(client, recurrence=weekly)["scheduleId"]
    page = client.get(f"/api/v1/schedules/{sid}/occurrences?limit=3").json()["results"]
    first, second = page[1]["at"], page[2]["at"]
    assert _put(client, sid, first, {"action": "skip", "note": "founders day"}).status_code == 200
    assert _put(client, sid, second, {"action": "hold"}).status_code == 200
    calendar_id = client.post("/api/v1/calendars", {"name": "founders", "excludeDates": [first[:10]]},
                              format="json").json()["calendarId"]

    # Shifted after: the first Wednesday's instant moves to Thursday; its directive is orphaned.
    body = _patch(client, sid, {"expectedRevision": 1,
                                "calendar": {"calendarIds": [calendar_id], "policy": "shift_after"}}).json()
    assert [o["at"] for o in body["orphanedDirectives"]] == [first]
    thursday = (datetime.fromisoformat(first.replace("Z", "+00:00")) + timedelta(days=1))
    assert thursday.isoformat().replace("+00:00", "Z") in body["instantsDiff"]["added"]
    assert _put(client, sid, instant(thursday), {"action": "note", "note": "moved"}).status_code == 200

    # Skipped instead: the moved instant is gone too, and its directive orphaned.
    body = _patch(client, sid, {"expectedRevision": 2,
                                "calendar": {"calendarIds": [calendar_id], "policy": "skip"}}).json()
    assert [o["at"] for o in body["orphanedDirectives"]] == [instant(thursday)]
    orphaned = client.get(f"/api/v1/schedules/{sid}/occurrences?orphaned=true").json()["results"]
    assert [o["at"] for o in orphaned] == [first, instant(thursday)]

    # No calendar: the Wednesday's directive is adopted back, Thursday's stays orphaned.
    body = _patch(client, sid, {"expectedRevision": 3, "calendar": None}).json()
    assert body["orphanedDirectives"] == []
    orphaned = client.get(f"/api/v1/schedules/{sid}/occurrences?orphaned=true").json()["results"]
    assert [o["at"] for o in orphaned] == [instant(thursday)]
    coming = {o["at"]: o["directive"] for o in client.get(f"/api/v1/schedules/{sid}/occurrences?limit=3").json()[
        "results"]}
    assert coming[first]["note"] == "founders day" and coming[second]["action"] == "hold"


def test_calendar_edit__orphans_the_directives_of_instants_it_now_skips__and_adopts_them_back(client):
    calendar = client.post("/api/v1/calendars", {"name": "closures", "excludeDates": []}, format="json").json()
    weekly = {"kind": "cron", "cron": "0 9 * * 3", "timezone": "UTC"}
    sid = create_schedule(client, recurrence=weekly,
                          calendar={"calendarIds": [calendar["calendarId"]], "policy": "skip"})["scheduleId"]
    first, second = (o["at"] for o in client.get(f"/api/v1/schedules/{sid}/occurrences?limit=3").json()["results"][1:])
    assert _put(client, sid, first, {"action": "skip", "note": "inventory"}).status_code == 200
    assert _put(client, sid, second, {"action": "note", "note": "quarter end"}).status_code == 200
    path = f"/api/v1/calendars/{calendar['calendarId']}"

    edited = client.patch(path, {"expectedRevision": 1, "excludeDates": [first[:10]]}, format="json")

    assert edited.status_code == 200, edited.content
    orphaned = client.get(f"/api/v1/schedules/{sid}/occurrences?orphaned=true").json()["results"]
    assert [(o["at"], o["directive"]["note"]) for o in orphaned] == [(first, "inventory")]
    coming = [o["at"] for o in client.get(f"/api/v1/schedules/{sid}/occurrences?limit=3").json()["results"]]
    assert first not in coming and second in coming
    assert client.patch(path, {"expectedRevision": 2, "excludeDates": []}, format="json").status_code == 200
    assert client.get(f"/api/v1/schedules/{sid}/occurrences?orphaned=true").json()["results"] == []
    coming = {o["at"]: o["directive"] for o in client.get(f"/api/v1/schedules/{sid}/occurrences?limit=3").json()[
        "results"]}
    assert coming[first]["note"] == "inventory" and coming[second]["note"] == "quarter end"


def test_edit__dry_run__answers_the_would_be_schedule_and_diff__stores_nothing(client):
    sid = create_schedule(client, recurrence=DAILY_NINE)["scheduleId"]
    at = client.get(f"/api/v1/schedules/{sid}/occurrences?limit=1").json()["results"][0]["at"]
    assert _put(client, sid, at, {"action": "note", "note": "n"}).status_code == 200
    audit_before = AuditEntry.objects.count()
    hourly = {"kind": "cron", "cron": "30 9 * * *", "timezone": "UTC"}

    response = _patch(client, sid, {"expectedRevision": 1, "recurrence": hourly, "name": "new", "dryRun": True})

    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["revision"], body["name"], body["dryRun"]) == (2, "new", True)
    assert len(body["instantsDiff"]["added"]) == len(body["instantsDiff"]["removed"]) == 30
    assert [o["at"] for o in body["orphanedDirectives"]] == [at]
    stored = client.get(f"/api/v1/schedules/{sid}").json()
    assert (stored["revision"], stored["name"]) == (1, "sales-report")
    assert AuditEntry.objects.count() == audit_before
    assert client.get(f"/api/v1/schedules/{sid}/occurrences?orphaned=true").json()["results"] == []
    assert _code(_patch(client, sid, {"expectedRevision": 1, "dryRun": "yes"})) == "invalid_request"
    assert _code(_patch(client, sid, {"expectedRevision": 5, "dryRun": True})) == "revision_conflict"
