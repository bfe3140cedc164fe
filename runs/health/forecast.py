"""Forecast incidents: before the miss. The capacity forecast (runs.capacity.forecast)
simulates the coming waves against the live slots, in the claim's order; a schedule whose
next instant, at least 5 minutes ahead, has a predicted start lateness above
startWithinSeconds is at risk. Its own prediction: the p99 lateness of the occurrences of
its minute's wave in its class that are its tenant's and as strict as it is (the claim
serves tenants by fair share, strict runs first; within that group it serves by run id,
not known before materialization, so the group's p99 stands for each of them). Never
starting counts as late. The incident
resolves when the forecast recovers or the instant passes (the late_start expectation
takes over from there)."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import DateTimeField, Exists, F, OuterRef, Value
from django.db.models.functions import Greatest

from runs.capacity.forecast import MINUTE, ForecastTooLarge, lateness_by_tenant
from runs.models import Incident, IncidentKind
from schedules.models import Schedule
from kernel.clock import instant

log = logging.getLogger(__name__)

LEAD = timedelta(minutes=5)  # an incident opens at least this long before its instant
PERCENTILE = 99
# When this process last ran the forecast: it runs at most every HEALTH_FORECAST_INTERVAL_SECONDS
# here (its cost, not its correctness: any number of processes may forecast at once).
_last_forecast = {"at": None}


def forecast_step(now: datetime) -> tuple[list[Incident], int]:
    """(the forecast breaches to open, how many open forecast incidents this resolved)."""
    ahead = timedelta(seconds=max(settings.HEALTH_FORECAST_AHEAD_SECONDS, LEAD.total_seconds() + 60))
    at = Greatest(Value(now, output_field=DateTimeField()), F("opened_at"))
    open_ = Incident.objects.filter(kind=IncidentKind.FORECAST, resolved_at__isnull=True)
    resolved = open_.filter(instant__lte=now).update(resolved_at=at, resolution="instant_passed")
    watched = list(open_.values_list("id", "instant", "schedule__next_run_at", "schedule__expect_start_within_seconds",
                                     "schedule__job_type__resource_class", "tenant_id",
                                     "schedule__start_deadline_seconds"))
    reported = Incident.objects.filter(schedule_id=OuterRef("id"), kind=IncidentKind.FORECAST).filter(
        instant__gte=OuterRef("next_run_at"))
    candidates = list(
        Schedule.objects.filter(deleted_at__isnull=True, paused=False, expect_start_within_seconds__isnull=False,
                                next_run_at__gte=now + LEAD, next_run_at__lt=now + ahead)
        .filter(~Exists(reported))
        .values_list("id", "tenant_id", "next_run_at", "expect_start_within_seconds", "job_type__resource_class",
                     "start_deadline_seconds"))
    if not candidates and not watched:
        return [], resolved
    last = _last_forecast["at"]
    if last is not None and timedelta(0) <= now - last < timedelta(seconds=settings.HEALTH_FORECAST_INTERVAL_SECONDS):
        return [], resolved
    _last_forecast["at"] = now
    start = now.replace(second=0, microsecond=0)
    try:
        predicted = lateness_by_tenant(start, now + ahead)
    except ForecastTooLarge:
        log.warning("health: the forecast of the next %s takes more than its budget; no forecast incidents", ahead)
        return [], resolved

    def late(at_instant, within, resource_class, tenant_id, start_deadline):
        """The predicted lateness of the schedule's occurrence at `at_instant` when it exceeds
        `within` (None: it would never start), else False (nothing predicted: not late)."""
        group = predicted.get((resource_class, int((at_instant - start).total_seconds() // MINUTE), tenant_id,
                               start_deadline is not None))  # strict: as the demand tells them
        seconds = 0.0 if group is None else group.percentile(PERCENTILE)
        return seconds if seconds is None or seconds > within else False

    recovered = [incident_id for incident_id, due, next_due, within, rc, tenant_id, deadline in watched
                 if due != next_due or within is None or late(due, within, rc, tenant_id, deadline) is False]
    if recovered:
        resolved += open_.filter(id__in=recovered).update(resolved_at=at, resolution="recovered")
    breaches = []
    for schedule_id, tenant_id, due, within, rc, deadline in candidates:
        seconds = late(due, within, rc, tenant_id, deadline)
        if seconds is False:
            continue
        breaches.append(Incident(
            tenant_id=tenant_id, schedule_id=schedule_id, kind=IncidentKind.FORECAST,
            breach_key=f"instant:{instant(due)}", instant=due,
            detail={"startWithinSeconds": within, "predictedLatenessSeconds": _seconds(seconds),
                    "percentile": PERCENTILE},
        ))
    return breaches, resolved


def _seconds(value: float | None) -> float | None:
    """Predicted lateness for JSON: None when the forecast sees it never start."""
    return None if value is None or value == float("inf") else round(value, 3)
