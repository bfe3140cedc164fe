"""A per-tenant cap on email recipients per UTC day, so the product cannot serve as a spam relay.

One counter row per tenant and day. Taking recipients is one guarded UPDATE (compare and
set), so any number of effect processes may deliver at once and the cap still holds.
"""

from datetime import timezone

from django.db.models import F

from effects.models import EmailUsage
from schedules.models import Tenant


def email_recipients_take(tenant_id: str, recipients: int, now) -> bool:
    """Count `recipients` against the tenant's cap for the UTC day of `now`; False, with
    nothing counted, when they do not fit."""
    limit = Tenant.objects.filter(id=tenant_id).values_list("max_emails_per_day", flat=True).first()
    if limit is None or recipients > limit:
        return False
    day = now.astimezone(timezone.utc).date()
    EmailUsage.objects.bulk_create([EmailUsage(tenant_id=tenant_id, day=day)], ignore_conflicts=True)
    fits = EmailUsage.objects.filter(tenant_id=tenant_id, day=day, recipients__lte=limit - recipients)
    return bool(fits.update(recipients=F("recipients") + recipients))
