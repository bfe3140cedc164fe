"""Reads of schedule health: a schedule's state and open incidents, a tenant's incidents
page by page, and the open incidents per tenant and kind (the gauge)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Max, Q

from runs.models import Incident, IncidentKind

# The state a schedule's open incidents put it in, worst first.
STATE_OF = ((IncidentKind.FAILURES, "failing"), (IncidentKind.LATE_START, "late"),
            (IncidentKind.LONG_RUNNING, "late"), (IncidentKind.FORECAST, "at_risk"))
STATE_OF_KIND = dict(STATE_OF)


@dataclass(frozen=True)
class Health:
    state: str  # healthy, at_risk, late, failing
    since: datetime
    open_incidents: list


def schedule_health(schedule) -> Health:
    """healthy, or the worst state its open incidents put it in; `since`: when the oldest
    of those opened, or (healthy) when its last incident resolved, else its creation."""
    incidents = list(Incident.objects.filter(schedule=schedule, resolved_at__isnull=True).order_by("opened_at", "id"))
    kinds = {incident.kind for incident in incidents}
    for kind, state in STATE_OF:
        if kind in kinds:
            worst = [incident for incident in incidents if STATE_OF_KIND[incident.kind] == state]
            return Health(state, min(incident.opened_at for incident in worst), incidents)
    last = Incident.objects.filter(schedule=schedule).aggregate(at=Max("resolved_at"))["at"]
    return Health("healthy", last or schedule.created_at, [])


def incidents_page(*, tenant, state: str | None = None, schedule_id: str | None = None,
                   before: tuple[datetime, str] | None = None, limit: int) -> list[Incident]:
    """The tenant's incidents, newest opened first (open before resolved with `state`),
    those after the cursor's (opened_at, id)."""
    incidents = Incident.objects.filter(tenant=tenant)
    if state == "open":
        incidents = incidents.filter(resolved_at__isnull=True)
    elif state == "resolved":
        incidents = incidents.filter(resolved_at__isnull=False)
    if schedule_id is not None:
        incidents = incidents.filter(schedule_id=schedule_id)
    if before is not None:
        at, last_id = before
        incidents = incidents.filter(Q(opened_at__lt=at) | Q(opened_at=at, id__lt=last_id))
    return list(incidents.select_related("schedule").order_by("-opened_at", "-id")[:limit])


def open_incident_counts() -> dict[tuple[str, str], int]:
    """(tenant name, kind) -> open incidents: one grouped read of the open index."""
    rows = (Incident.objects.filter(resolved_at__isnull=True).values("tenant__name", "kind")
            .annotate(n=Count("id")).order_by())
    return {(row["tenant__name"], row["kind"]): row["n"] for row in rows}
