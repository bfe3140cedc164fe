"""Three real scanner processes share the due buckets through the directory: one is
SIGKILLed and its buckets are served again within its lease; a fourth joins and the
buckets rebalance. Every due instant of the window becomes exactly one occurrence."""

from datetime import timedelta

import pytest
from django.conf import settings
from django.db.models import F, Max

from runs import scan_directory
from runs.models import Run
from schedules.models import Schedule
from kernel.clock import authority_now
from tests.chaos.invariants import due_instants
from tests.chaos.system import ChaosSystem
from tests.child_env import database_url_of_test_db
from tests.e2e.processes import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

LEASE = 3  # seconds; renewed every 0.6 s
EVERY = 2  # each schedule is due every two seconds
RUN_ALL = ({"misfirePolicy": "run_all", "overlapPolicy": "allow"},)


def scanner_of(processes, name: str) -> str | None:
    pid = processes.children[name].pid
    return next((s for s in scan_directory.assignments() if f":{pid}:" in s), None)


def balanced(processes, names) -> dict[str, list[int]] | None:
    """The live scanners' buckets when exactly ``names`` hold a fair partition of them all."""
    held = scan_directory.assignments()
    ids = {name: scanner_of(processes, name) for name in names}
    if None in ids.values() or set(held) != set(ids.values()):
        return None
    buckets = sorted(b for bs in held.values() for b in bs)
    sizes = [len(bs) for bs in held.values()]
    if buckets != list(range(settings.DUE_BUCKETS)) or max(sizes) - min(sizes) > 1:
        return None
    return {name: held[ids[name]] for name in names}


def test_directory__scanner_killed_and_one_joining__buckets_move_and_each_instant_once(processes):
    processes.env["DATABASE_URL"] = database_url_of_test_db()
    chaos = ChaosSystem(processes, redis_server=None)
    load = chaos.due_schedules(160, every_seconds=EVERY, backlog=0, policies=RUN_ALL)

    def scanner(name):
        processes.manage(name, "scan", "--interval", "1", SCAN_LEASE_SECONDS=str(LEASE), PGAPPNAME=name)

    for name in ("scan-1", "scan-2", "scan-3"):
        scanner(name)
    before = wait_until(lambda: balanced(processes, ["scan-1", "scan-2", "scan-3"]), timeout=30,
                        message="three scanners to share the buckets")
    orphaned = before["scan-2"]
    buckets_of = dict(Schedule.objects.filter(id__in=load.recurring_ids).values_list("id", "bucket"))
    orphaned_schedules = [s for s, b in buckets_of.items() if b in orphaned]
    assert orphaned_schedules

    chaos.kill("scan-2")
    killed_at = authority_now()
    after = wait_until(lambda: balanced(processes, ["scan-1", "scan-3"]), timeout=LEASE + 5,
                       message="the survivors to take the dead scanner's buckets")
    taken_after = (authority_now() - killed_at).total_seconds()
    assert taken_after <= LEASE + LEASE / 5 + 1.0, taken_after
    assert sorted(after["scan-1"] + after["scan-3"]) == list(range(settings.DUE_BUCKETS))

    # Instants of its buckets due after the kill were materialized no later than the lease allows.
    wait_until(lambda: authority_now() > killed_at + timedelta(seconds=LEASE + 3), timeout=15, message="time")
    late = Run.objects.filter(schedule_id__in=orphaned_schedules, scheduled_at__gt=killed_at).aggregate(
        worst=Max(F("created_at") - F("scheduled_at")))["worst"]
    assert late is not None and late.total_seconds() <= LEASE + LEASE / 5 + 1.5, late

    scanner("scan-4")
    rebalanced = wait_until(lambda: balanced(processes, ["scan-1", "scan-3", "scan-4"]), timeout=20,
                            message="the buckets to rebalance over three scanners")
    assert {len(b) for b in rebalanced.values()} == {21, 22}

    chaos.close_window(load, scanners=("scan-1", "scan-3", "scan-4"))
    runs = list(Run.objects.filter(schedule_id__in=load.recurring_ids).values_list("schedule_id", "scheduled_at"))
    assert len(runs) == len(set(runs)), "an instant materialized twice"
    expected = {
        (s.id, at) for s in Schedule.objects.filter(id__in=load.recurring_ids)
        for at in due_instants(s, load.window_start, load.window_end)
    }
    assert expected <= set(runs), f"lost: {sorted(expected - set(runs))[:5]}"
    assert len(expected) >= 160 * 5
    assert "scan: timers=" in processes.log("scan-1")  # instants fired from the timer horizon
    assert not any("Traceback" in processes.log(name) for name in ("scan-1", "scan-3", "scan-4"))
