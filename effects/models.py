"""What the delivery of effects keeps besides the intents themselves (runs.models: EffectIntent,
EffectDelivery, written in the authority's own transactions): each tenant's email usage, and
which incident events each alert intent told."""

from django.db import models

from runs.models import EffectKind


class EmailUsage(models.Model):
    """Email recipients of one tenant's deliveries on one UTC day, counted against the
    tenant's cap (effects.quota)."""

    # The unique (tenant, day) key serves every look-up; no separate tenant index.
    tenant = models.ForeignKey("schedules.Tenant", on_delete=models.CASCADE, related_name="+", db_index=False)
    day = models.DateField()
    recipients = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "day"], name="emailusage_tenant_day_unique")]


class NoticeEvent(models.TextChoices):
    OPENED = "opened"
    RESOLVED = "resolved"


class IncidentNotice(models.Model):
    """One event of an incident (opened, resolved) told to one of its schedule's alert
    targets, by the alert intent that lists it: unique, so never told twice; written with
    that intent, so never lost (an event without its notice is found by the next digest)."""

    incident = models.ForeignKey("runs.Incident", on_delete=models.CASCADE, related_name="notices", db_index=False)
    event = models.CharField(max_length=8, choices=NoticeEvent.choices)
    target = models.CharField(max_length=10, choices=EffectKind.choices)
    intent = models.ForeignKey("runs.EffectIntent", on_delete=models.CASCADE, related_name="notices")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["incident", "event", "target"], name="incidentnotice_unique"),
        ]
