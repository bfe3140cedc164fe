"""Health alerts as effect intents: the digest that tells each alert target about the
incidents opened and resolved since it was last told, at most one message per target per
HEALTH_DIGEST_SECONDS, delivered by effects.delivery like any effect (retries, the
uncertain policy, egress checks, the tenant's email cap).

An event (an incident opened or resolved) is told to a target by exactly one intent: the
IncidentNotice rows written with the intent are unique per (incident, event, target), and
the intent's action names the target and the digest window, so two digests racing create
one intent and the loser's events wait for the next window. Nothing is sent here."""

from __future__ import annotations

import hashlib
import json
import logging
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef

from effects.models import IncidentNotice, NoticeEvent
from kernel.clock import authority_now, instant
from runs.models import EffectIntent, EffectKind, Incident

log = logging.getLogger(__name__)

HORIZON = timedelta(days=1)  # targets added later are not told about older events
MAX_EVENTS = 1000  # per event kind and target kind in one pass; the rest in the next window


def alerts_pass() -> int:
    """Create the alert intents due now; answers how many."""
    with transaction.atomic():
        now = authority_now()
        groups: dict[tuple, dict] = {}
        for target in EffectKind.values:
            for event in NoticeEvent.values:
                for incident in _untold(target, event, now):
                    address = incident.schedule.expectations["alert"][target]
                    key = (incident.tenant_id, target, json.dumps(address, sort_keys=True))
                    group = groups.setdefault(key, {"target": address, "events": []})
                    group["events"].append((incident, event))
        window = int(now.timestamp()) // settings.HEALTH_DIGEST_SECONDS
        created = 0
        for (tenant_id, target, identity), group in sorted(groups.items()):
            action = f"alert-{hashlib.sha256(f'{tenant_id}|{target}|{identity}'.encode()).hexdigest()[:24]}-{window}"
            if EffectIntent.objects.filter(action=action).exists():
                continue  # this target was told in this window: its events wait for the next one
            try:
                with transaction.atomic():
                    intent = EffectIntent.objects.create(
                        action=action, kind=target, target=group["target"], result_key="", result_checksum="",
                        alert={"tenantId": tenant_id,
                               "incidents": [_listed(incident, event) for incident, event in group["events"]]},
                        created_at=now, updated_at=now,
                    )
                    IncidentNotice.objects.bulk_create([
                        IncidentNotice(incident=incident, event=event, target=target, intent=intent)
                        for incident, event in group["events"]
                    ])
                created += 1
            except IntegrityError:  # another digest told this target, or these events, meanwhile
                log.info("alert %s: told by another digest", action)
        return created


def _untold(target: str, event: str, now) -> list[Incident]:
    """Incidents whose `event` this kind of target of their schedule was not told yet,
    locked (SKIP LOCKED: another digest takes the others)."""
    told = IncidentNotice.objects.filter(incident_id=OuterRef("id"), event=event, target=target)
    incidents = Incident.objects.filter(schedule__expectations__alert__has_key=target).exclude(Exists(told))
    if event == NoticeEvent.OPENED:
        incidents = incidents.filter(opened_at__gte=now - HORIZON)
    else:
        incidents = incidents.filter(resolved_at__gte=now - HORIZON)
    return list(incidents.select_related("schedule").order_by("opened_at", "id")
                .select_for_update(skip_locked=True, of=("self",))[:MAX_EVENTS])


def _listed(incident: Incident, event: str) -> dict:
    """One line of an alert: the incident, as GET /incidents shows it, and what happened."""
    return {
        "event": event,
        "incidentId": incident.id,
        "scheduleId": incident.schedule_id,
        "scheduleName": incident.schedule.name,
        "kind": incident.kind,
        "runId": incident.run_id,
        "instant": instant(incident.instant),
        "openedAt": instant(incident.opened_at),
        "resolvedAt": instant(incident.resolved_at) if event == NoticeEvent.RESOLVED else None,
        "resolution": incident.resolution if event == NoticeEvent.RESOLVED else None,
    }
