"""Live capacity per resource class. Every worker process (a Celery worker, the embedded
dispatcher) reports its slots per class every CAPACITY_REPORT_INTERVAL_SECONDS; a report
is alive for CAPACITY_REPORT_TTL_SECONDS, so a process that died stops counting by itself."""

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Sum

from runs.models import Run, RunState, WorkerSlots
from kernel.clock import authority_now


def slots_report(process: str, slots: dict[str, int], *, ttl_seconds: float | None = None) -> None:
    """Record that `process` has `slots` (class -> count) from now on, for the next TTL."""
    ttl = settings.CAPACITY_REPORT_TTL_SECONDS if ttl_seconds is None else ttl_seconds
    with transaction.atomic():
        now = authority_now()
        rows = [
            WorkerSlots(process=process, resource_class=rc, slots=n, reported_at=now,
                        expires_at=now + timedelta(seconds=ttl))
            for rc, n in sorted(slots.items())
        ]
        WorkerSlots.objects.bulk_create(
            rows, update_conflicts=True, unique_fields=["process", "resource_class"],
            update_fields=["slots", "reported_at", "expires_at"],
        )
        WorkerSlots.objects.filter(process=process).exclude(resource_class__in=list(slots)).delete()
        # Rows of processes long gone: nobody else removes them.
        WorkerSlots.objects.filter(expires_at__lt=now - timedelta(days=1)).delete()


def slots_withdraw(process: str) -> None:
    """The process stops: its slots stop counting at once."""
    WorkerSlots.objects.filter(process=process).delete()


def live_slots(*, now=None) -> dict[str, int]:
    """Slots of live reports per resource class."""
    now = now or authority_now()
    rows = WorkerSlots.objects.filter(expires_at__gt=now).values("resource_class").annotate(n=Sum("slots"))
    return {row["resource_class"]: row["n"] for row in rows}


def live_processes(*, now=None) -> dict[str, int]:
    """Live worker processes per resource class."""
    now = now or authority_now()
    rows = WorkerSlots.objects.filter(expires_at__gt=now).values("resource_class").annotate(n=Count("id"))
    return {row["resource_class"]: row["n"] for row in rows}


def busy_slots() -> dict[str, int]:
    """Running occurrences per resource class: the slots they occupy."""
    rows = Run.objects.filter(state=RunState.RUNNING).values("resource_class").annotate(n=Count("id"))
    return {row["resource_class"]: row["n"] for row in rows}


def capacity_by_class(*, now=None) -> dict[str, dict]:
    """{class: {"liveSlots", "busySlots", "freeSlots", "processes"}} for every known class."""
    live, busy, processes = live_slots(now=now), busy_slots(), live_processes(now=now)
    classes = dict.fromkeys([*settings.RESOURCE_CLASSES, *live, *busy])
    return {
        rc: {"liveSlots": live.get(rc, 0), "busySlots": busy.get(rc, 0),
             "freeSlots": max(0, live.get(rc, 0) - busy.get(rc, 0)), "processes": processes.get(rc, 0)}
        for rc in classes
    }
