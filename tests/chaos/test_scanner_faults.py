"""Scanners die right after committing, or run two at a time with two relays: every due
instant still becomes exactly one occurrence, and every committed intent is dispatched."""

import signal
from datetime import timedelta

import pytest

from kernel.clock import authority_now
from runs.models import Outbox, OutboxKind, Run, RunState
from schedules.models import Schedule
from tests.e2e.processes import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

MOSTLY_RUN_ALL = (
    {"misfirePolicy": "run_all", "overlapPolicy": "allow"},
    {"misfirePolicy": "run_all", "overlapPolicy": "allow"},
    {"misfirePolicy": "run_all", "overlapPolicy": "buffer_one"},
    {"misfirePolicy": "latest_only", "misfireGraceSeconds": 5, "overlapPolicy": "allow"},
)


def test_chaos__scanner_killed_right_after_materialization_commit__nothing_lost_or_doubled(chaos):
    load = chaos.due_schedules(48, every_seconds=10, backlog=4, policies=MOSTLY_RUN_ALL)
    doomed = chaos.scanner("scan-doomed", failpoints="after_materialize_commit", batch_size=16)
    assert doomed.wait(timeout=60) == -signal.SIGKILL

    # Its one batch committed (occurrences, intents, next_run_at) and nothing was relayed.
    committed = list(load.runs())
    batch = {r.schedule_id for r in committed}
    assert len(batch) == 16
    assert Schedule.objects.filter(id__in=batch, next_run_at__gt=load.window_start).count() == 16
    queued = [r.id for r in committed if r.state == RunState.QUEUED]
    intents = Outbox.objects.filter(kind=OutboxKind.DISPATCH, run_id__in=queued)
    assert intents.count() == len(queued) > 0 and not intents.filter(published_at__isnull=False).exists()

    chaos.start(workers=2, concurrency=4)  # a fresh scanner and the relay, sweeper, workers
    wait_until(lambda: not Run.objects.filter(id__in=queued).exclude(state=RunState.SUCCEEDED).exists(),
               timeout=60, message="the dead scanner's committed runs to succeed")
    chaos.close_window(load)
    chaos.settle(load)

    report = chaos.check(load)
    assert report.by_state[RunState.SKIPPED] > 0  # misfire and overlap records are part of the check
    assert set(report.by_state) <= {RunState.SUCCEEDED, RunState.SKIPPED}
    chaos.figures("scanner SIGKILL after materialize commit", report, faults=1,
                  committed_by_dead_scanner=len(committed), its_queued_runs=len(queued),
                  due_instants=report.instants)


def test_chaos__two_scanners_and_two_relays_all_along__each_instant_once(chaos):
    load = chaos.due_schedules(30, every_seconds=6, backlog=3)
    chaos.burst(120, load=load)
    # Small batches: a scanner's pass over a due moment spans the other's polls, so they contend.
    chaos.start(workers=2, concurrency=4, scanners=2, relays=2, scan_batch=2)
    # Past the backlog, two more due moments while both scanners are up.
    later = load.window_start + timedelta(seconds=6 * 3 + 14)
    wait_until(lambda: authority_now() > later, timeout=60, message="two more due moments")
    chaos.close_window(load, scanners=("scan-1", "scan-2"))
    chaos.settle(load)

    report = chaos.check(load)
    batches = {name: chaos.count_in_logs(r"scan: schedules=", name) for name in ("scan-1", "scan-2")}
    published = {
        name: sum(int(n) for n in chaos.find_in_logs(r"relay: (\d+)", name))
        for name in ("relay-1", "relay-2")
    }
    intents = Outbox.objects.filter(kind=OutboxKind.DISPATCH, run__schedule_id__in=load.schedule_ids)
    assert not intents.filter(published_at__isnull=True).exists()
    chaos.figures(
        "two scanners, two relays", report, faults=0, due_instants=report.instants,
        scan_passes_by_scanner="/".join(str(n) for n in batches.values()),
        hints_by_relay="/".join(str(n) for n in published.values()),
        intents=intents.count(),
    )
