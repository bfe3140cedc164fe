"""Drill: a pg_dump taken mid-burst is restored into a fresh server and the system is
started on it: restore testing must include outbox and request-key records, not only
schedule rows (docs/operations.md, "Restore").

Everything the dump held comes back (schedules, occurrences, attempts, fences, outbox rows,
request keys); a replayed Idempotency-Key returns the original result; no (schedule,
instant) gets a second occurrence; runs that were in flight continue with higher fences;
results published before the dump still download. What the old server did after the dump
is lost with it, and is redone: that is a restore's recovery point.
"""

import hashlib
import urllib.request

import pytest

from runs.models import Attempt, Outbox, Run, RunState
from schedules.models import RequestKey, Schedule
from tests.factories import api_client
from tests.recovery.clusters import django_on
from tests.recovery.drills import integrity

pytestmark = pytest.mark.slow

BURST = 120
SCHEDULE = {"name": "restored-report", "jobType": "demo.sleep", "params": {"seconds": 0},
            "recurrence": {"kind": "cron", "cron": "0 0 1 1 *"}, "overlapPolicy": "allow"}


def test_drill__dump_mid_burst_restored__every_record_and_promise_survives(primary, clusters, chaos):
    load = chaos.due_schedules(12, every_seconds=10, backlog=3)
    chaos.burst(BURST, load=load)
    client = api_client(load.tenant)
    requests = idempotent_requests(client, load)
    chaos.start(workers=2, concurrency=4)
    chaos.wait_terminal(load, BURST // 3)

    before = records()
    backup = primary.root / "scheduler.dump"
    dump_seconds = primary.dump(backup)
    chaos.wait_terminal(load, BURST // 2)  # the old server works on: the restore will lose this
    succeeded_on_old = Run.objects.filter(state=RunState.SUCCEEDED).count()
    chaos.processes.stop_all()
    primary.stop("immediate")  # the disaster

    restored = clusters("restored")
    restored.start()
    restore_seconds = restored.restore(backup)
    chaos.processes.env["DATABASE_URL"] = restored.url()
    with django_on(restored.url()):
        at_restore = integrity(restored.url(), chaos.processes.env)  # the backup itself keeps every invariant
        assert_contains(records(), before)
        in_flight = dict(Run.objects.filter(state=RunState.RUNNING).values_list("id", "fence"))
        assert in_flight, "the dump was taken with runs in flight"
        succeeded_in_dump = Run.objects.filter(state=RunState.SUCCEEDED).count()

        chaos.start(workers=2, concurrency=4)
        for path, body, key, original in requests:
            replay = client.post(path, body, format="json", HTTP_IDEMPOTENCY_KEY=key)
            assert replay.status_code in (200, 201) and replay.json() == original | _changing(replay.json())
        chaos.close_window(load)
        chaos.settle(load)

        report = chaos.check(load)  # nothing lost or doubled, fences increasing, one result each
        final_fences = dict(Run.objects.filter(id__in=in_flight).values_list("id", "fence"))
        assert all(final_fences[run_id] > fence for run_id, fence in in_flight.items())
        downloaded = download_all(client, before["results"])
        after = integrity(restored.url(), chaos.processes.env)
    chaos.figures(
        "recovery: pg_dump mid-burst, restored", report, faults=1, in_flight_at_dump=len(in_flight),
        dump_s=round(dump_seconds, 1), restore_s=round(restore_seconds, 1),
        restored_rows=sum(at_restore["found"][k] for k in ("schedules", "runs", "attempts", "outbox", "request_keys")),
        redone_after_restore=succeeded_on_old - succeeded_in_dump, replayed_keys=len(requests),
        downloads=downloaded, max_fence=f"{at_restore['found']['max_fence']}->{after['found']['max_fence']}",
    )


def idempotent_requests(client, load) -> list[tuple]:
    """A schedule created and a run requested with Idempotency-Keys: (path, body, key, the
    original response) of each."""
    created = client.post("/api/v1/schedules", SCHEDULE, format="json", HTTP_IDEMPOTENCY_KEY="drill-create")
    assert created.status_code == 201, created.content
    schedule_id = created.json()["scheduleId"]
    run_path, run_body = f"/api/v1/schedules/{schedule_id}/runs", {"params": {"seconds": 0.3}}
    requested = client.post(run_path, run_body, format="json", HTTP_IDEMPOTENCY_KEY="drill-run")
    assert requested.status_code == 201, requested.content
    load.schedule_ids.append(schedule_id)
    load.run_ids.append(requested.json()["runId"])
    return [("/api/v1/schedules", SCHEDULE, "drill-create", created.json()),
            (run_path, run_body, "drill-run", requested.json())]


def _changing(body: dict) -> dict:
    """Fields of a replayed response that describe the resource now, not the request."""
    return {key: body[key] for key in ("state", "attempt", "attempts", "startedAt", "finishedAt", "result",
                                       "effects", "nextRunAt", "nextRunAtLocal") if key in body}


def records() -> dict:
    """What must survive a backup: every record, and per run its fence and state."""
    return {
        "schedules": set(Schedule.objects.values_list("id", flat=True)),
        "runs": dict(Run.objects.values_list("id", "fence")),
        "attempts": set(Attempt.objects.values_list("id", flat=True)),
        "outbox": set(Outbox.objects.values_list("id", flat=True)),
        "request_keys": set(RequestKey.objects.values_list("tenant_id", "scope", "key", "resource_id")),
        "results": dict(Run.objects.filter(state=RunState.SUCCEEDED).values_list(
            "id", "result_checksum")),
    }


def assert_contains(restored: dict, before: dict) -> None:
    for kind in ("schedules", "attempts", "outbox", "request_keys"):
        missing = before[kind] - restored[kind]
        assert not missing, f"{len(missing)} {kind} missing after the restore, e.g. {sorted(missing)[:3]}"
    assert all(restored["runs"].get(run_id, -1) >= fence for run_id, fence in before["runs"].items())
    assert all(restored["results"].get(run_id) == checksum for run_id, checksum in before["results"].items())


def download_all(client, results: dict[str, str]) -> int:
    """Download every result published before the dump through the API; count them."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # 127.0.0.1, never a proxy
    for run_id, checksum in results.items():
        link = client.get(f"/api/v1/runs/{run_id}/result")
        assert link.status_code == 200, link.content
        with opener.open(link.json()["url"], timeout=10) as response:
            assert "sha256:" + hashlib.sha256(response.read()).hexdigest() == checksum
    return len(results)
