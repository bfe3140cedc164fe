"""Drill: the authority's PostgreSQL stops for 15 s while a few hundred runs are in flight,
then starts again. Every process reconnects by itself; nothing is lost or doubled; and no
attempt is wasted: a worker whose lease outlives the outage keeps heartbeating and retrying
its completion until the database answers."""

import time

import pytest
from django.db import connection

from runs.models import Attempt, AttemptState, Run
from schedules.models import JobType
from tests.chaos.system import Load
from tests.recovery.drills import integrity

pytestmark = pytest.mark.slow

BURST = 240
OUTAGE_SECONDS = 15
LEASE_SECONDS = 45  # outlives the outage (the chaos suite's own leases are 3 s)


def test_drill__database_restart_mid_burst__nothing_lost_no_attempt_wasted(primary, chaos):
    load = Load(chaos.tenant())
    JobType.objects.filter(name="demo.sleep").update(default_lease_seconds=LEASE_SECONDS)
    chaos.burst(BURST, seconds=(0.3, 1.2), load=load)
    chaos.start(workers=2, concurrency=4)
    chaos.wait_terminal(load, BURST // 4)
    running = chaos.wait_running(chaos.worker_label("worker-1"))  # a worker is mid-job right now

    primary.stop("fast")  # sessions cut, every process loses its connection
    down_at = time.monotonic()
    time.sleep(OUTAGE_SECONDS)
    primary.start()
    outage = time.monotonic() - down_at
    connection.close()  # this test process reconnects too

    chaos.settle(load)
    report = chaos.check(load)  # every run terminal, one occurrence and one result each
    attempts = Attempt.objects.filter(run_id__in=load.run_ids)
    wasted = attempts.exclude(state=AttemptState.SUCCEEDED).count()
    # Leases outlive the outage: the attempts in flight during it complete themselves.
    assert wasted == 0, list(attempts.exclude(state=AttemptState.SUCCEEDED).values_list("run_id", "state", "error"))
    assert all(Run.objects.get(id=a.run_id).accepted_attempt_id == a.id for a in running)
    checked = integrity(primary.url(), chaos.processes.env)
    chaos.figures(
        "recovery: database restart mid-burst", report, faults=1, outage_s=round(outage, 1),
        in_flight_at_stop=len(running), attempts=attempts.count(), wasted_attempts=wasted,
        max_fence=checked["found"]["max_fence"],
    )
