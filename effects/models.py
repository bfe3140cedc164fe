"""Effect intents (send-<run>) and every provider request made for them."""

from django.db import models
from django.db.models import Q

from kernel.ids import new_id


def new_effect_id():
    return new_id("eff")


class EffectKind(models.TextChoices):
    EMAIL = "email"
    WEBHOOK = "webhook"


class EffectState(models.TextChoices):
    PENDING = "pending"
    SENT = "sent"
    UNCERTAIN = "uncertain"  # the request may have reached the provider; outcome unknown
    FAILED = "failed"
    SKIPPED = "skipped"


class EffectIntent(models.Model):
    """Created only by a committed canonical publication, in the same transaction; or, with
    `alert` and no run, by a health alert digest (effects.alerts), with its notices."""

    id = models.CharField(primary_key=True, max_length=40, default=new_effect_id, editable=False)
    action = models.CharField(max_length=120, unique=True)
    run = models.ForeignKey("runs.Run", null=True, blank=True, on_delete=models.CASCADE,
                            related_name="effect_intents")
    # A health alert: {"tenantId", "incidents": [{"incidentId", "event", ...}, ...]}, what the
    # message lists, fixed when the intent is created so every delivery says the same.
    alert = models.JSONField(null=True, blank=True)
    kind = models.CharField(max_length=10, choices=EffectKind.choices)
    target = models.JSONField(default=dict)
    result_key = models.CharField(max_length=500)
    result_version_id = models.CharField(max_length=200, null=True, blank=True)
    result_checksum = models.CharField(max_length=71)
    state = models.CharField(max_length=10, choices=EffectState.choices, default=EffectState.PENDING)
    external_id = models.CharField(max_length=300, blank=True, default="")
    delivery_count = models.PositiveIntegerField(default=0)
    # Pending: when the next delivery may start (null = now). While a delivery is in flight it
    # is that delivery's deadline. Uncertain: set only under the `retry` policy; null = held.
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    # An operator's decision (admin action or `manage.py effects resolve`), with who and when.
    resolution = models.TextField(blank=True, default="")
    # Why a failed intent was refused without any request: egress_denied, quota_exceeded.
    reason = models.CharField(max_length=40, blank=True, default="")
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(run__isnull=False) | Q(alert__isnull=False),
                                   name="effect_run_or_alert"),
        ]
        # The two probes of claim_next_delivery: undated pending intents (due now), then dated
        # ones by due time. Settled and held intents are in neither.
        indexes = [
            models.Index(
                fields=["created_at", "id"],
                name="effect_undated_idx",
                condition=Q(state="pending", next_attempt_at__isnull=True),
            ),
            models.Index(
                fields=["next_attempt_at", "created_at", "id"],
                name="effect_dated_idx",
                condition=Q(state__in=["pending", "uncertain"], next_attempt_at__isnull=False),
            ),
            # Open intents only: the scheduler_effects gauge counts them by state at every scrape,
            # and the console's uncertain queue pages them by (created_at, id).
            models.Index(
                fields=["state", "created_at", "id"],
                name="effect_open_idx",
                condition=Q(state__in=["pending", "uncertain"]),
            ),
        ]

    def __str__(self):
        return self.action


class EffectDelivery(models.Model):
    """One provider request and its outcome. Written and committed before the request is
    made, so a delivery left unfinished is evidence that its outcome is unknown."""

    intent = models.ForeignKey(EffectIntent, on_delete=models.CASCADE, related_name="deliveries")
    number = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=10, choices=EffectState.choices, default=EffectState.PENDING)
    external_id = models.CharField(max_length=300, blank=True, default="")
    detail = models.TextField(blank=True, default="")
    # What was submitted: identity (Message-ID / Idempotency-Key), recipients or endpoint,
    # attachment or link. Never the signed link itself.
    request = models.JSONField(default=dict, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["intent", "number"], name="effectdelivery_number_unique")
        ]


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
    intent = models.ForeignKey(EffectIntent, on_delete=models.CASCADE, related_name="notices")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["incident", "event", "target"], name="incidentnotice_unique"),
        ]
