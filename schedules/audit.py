"""Who changed a schedule: the actor of a write, and the audit entry written in its transaction."""

from dataclasses import dataclass
from datetime import datetime

from schedules.models import AuditEntry, AuthorKind, Schedule


@dataclass(frozen=True)
class Actor:
    """The author of a change: a tenant token's name (`api`), a staff user's username
    (`admin`), or the scheduler itself (a timed pause ending)."""

    kind: str
    name: str


SCHEDULER = Actor(AuthorKind.SCHEDULER, "scheduler")
UNNAMED_API = Actor(AuthorKind.API, "")  # a service called without a request (tests, scripts)


def staff_actor(user) -> Actor:
    """A staff user acting in the admin or the console."""
    return Actor(AuthorKind.ADMIN, user.get_username())


def audit_entry(schedule: Schedule, *, actor: Actor, action: str, at: datetime, **details) -> AuditEntry:
    """The (unsaved) entry of `action` on `schedule`; details given None are left out."""
    return AuditEntry(
        tenant_id=schedule.tenant_id, schedule_id=schedule.id, at=at, actor_kind=actor.kind, actor=actor.name,
        action=action, details={key: value for key, value in details.items() if value is not None},
    )


def audit_record(schedule: Schedule, *, actor: Actor, action: str, at: datetime, **details) -> AuditEntry:
    """One entry for `schedule`, inside the caller's transaction (the change's own)."""
    entry = audit_entry(schedule, actor=actor, action=action, at=at, **details)
    entry.save(force_insert=True)
    return entry


def audit_entries(*, tenant, schedule_id: str | None, since: datetime | None, before: int | None,
                  limit: int) -> list[AuditEntry]:
    """The tenant's entries, newest first; of one schedule, at or after `since`, below id `before`."""
    entries = AuditEntry.objects.filter(tenant=tenant).order_by("-id")
    if schedule_id is not None:
        entries = entries.filter(schedule_id=schedule_id)
    if since is not None:
        entries = entries.filter(at__gte=since)
    if before is not None:
        entries = entries.filter(id__lt=before)
    return list(entries[:limit])
