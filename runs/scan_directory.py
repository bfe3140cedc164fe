"""The scanner directory: due buckets assigned to live scanners under short renewable leases.

Every scanner renews its membership and its buckets' leases (database time) in one
transaction that locks the directory's bucket rows in order, so renewals are serial. Each
live scanner's fair share is an equal split of the buckets; a scanner below its share takes
buckets no live scanner holds first, then buckets of scanners above theirs (rebalancing when
a scanner joins), and one that stops renewing is dropped once its lease passes, its buckets
free for the others. A scanner keeps buckets above its share until someone takes them, so a
bucket is never left unserved during a hand-over.

The directory only removes redundant work: two scanners briefly serving one bucket (a taker
and the holder that has not renewed yet) is harmless, as the unique (schedule, instant) key
and the schedule row locks decide what is materialized.
"""

from __future__ import annotations

import os
import socket
import uuid
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F

from runs.models import BucketLease, ScannerMember
from kernel.clock import authority_now


def new_scanner_id() -> str:
    """host:pid:random, unique across restarts of one process id."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def quotas(live: list[str], buckets: int) -> dict[str, int]:
    """Each live scanner's fair share of ``buckets``: an equal split, the remainder going
    one each to the first scanners in id order."""
    base, extra = divmod(buckets, len(live))
    return {scanner: base + (i < extra) for i, scanner in enumerate(sorted(live))}


def claim_share(owners: dict[int, str], live: list[str], me: str, buckets: int) -> tuple[list[int], list[int]]:
    """Which buckets ``me`` holds after a renewal, given ``owners`` (bucket -> live holder;
    a bucket missing is free). Returns (kept, taken): it keeps all it holds, and below its
    share takes free buckets, then buckets of the scanners furthest above their share."""
    quota = quotas(live, buckets)
    kept = sorted(b for b, owner in owners.items() if owner == me)
    wanted = quota[me] - len(kept)
    if wanted <= 0:
        return kept, []
    taken = [b for b in range(buckets) if b not in owners][:wanted]
    held: dict[str, list[int]] = {}
    for bucket, owner in sorted(owners.items()):
        if owner != me:
            held.setdefault(owner, []).append(bucket)
    while held and len(taken) < wanted:
        owner = max(held, key=lambda s: len(held[s]) - quota.get(s, 0))
        if len(held[owner]) <= quota.get(owner, 0):
            break  # nobody above their share: nothing left to take
        taken.append(held[owner].pop())
    return kept, sorted(taken)


def renew(scanner_id: str, *, lease_seconds: float | None = None) -> list[int]:
    """Join or stay in the directory: renew the membership and the buckets held, take the
    fair share. Returns the buckets this scanner serves until its next renewal."""
    lease = timedelta(seconds=lease_seconds or settings.SCAN_LEASE_SECONDS)
    _ensure_buckets()
    with transaction.atomic(durable=True):
        rows = list(BucketLease.objects.select_for_update().order_by("bucket")
                    .values_list("bucket", "scanner_id", "lease_expires_at"))
        now = authority_now()
        until = now + lease
        if not ScannerMember.objects.filter(id=scanner_id).update(lease_expires_at=until):
            ScannerMember.objects.create(id=scanner_id, lease_expires_at=until, joined_at=now)
        ScannerMember.objects.filter(lease_expires_at__lte=now).delete()
        live = list(ScannerMember.objects.values_list("id", flat=True))
        owners = {b: s for b, s, expires in rows if s in live and expires is not None and expires > now}
        kept, taken = claim_share(owners, live, scanner_id, len(rows))
        BucketLease.objects.filter(bucket__in=kept).update(lease_expires_at=until)
        BucketLease.objects.filter(bucket__in=taken).update(
            scanner_id=scanner_id, lease_expires_at=until, version=F("version") + 1
        )
    return sorted(kept + taken)


def leave(scanner_id: str) -> None:
    """Leave the directory (a clean stop): the buckets are free for the others at once."""
    with transaction.atomic(durable=True):
        list(BucketLease.objects.select_for_update().order_by("bucket").values_list("bucket"))
        BucketLease.objects.filter(scanner_id=scanner_id).update(scanner_id="", lease_expires_at=None)
        ScannerMember.objects.filter(id=scanner_id).delete()


def assignments() -> dict[str, list[int]]:
    """Live scanner -> the buckets it holds now (a view for tests and operators)."""
    now = authority_now()
    live = set(ScannerMember.objects.filter(lease_expires_at__gt=now).values_list("id", flat=True))
    held: dict[str, list[int]] = {scanner: [] for scanner in live}
    for bucket, scanner in BucketLease.objects.filter(lease_expires_at__gt=now).values_list("bucket", "scanner_id"):
        if scanner in live:
            held[scanner].append(bucket)
    return {scanner: sorted(buckets) for scanner, buckets in held.items()}


def _ensure_buckets() -> None:
    """One directory row per due bucket (the first renewal ever creates them)."""
    if BucketLease.objects.count() != settings.DUE_BUCKETS:
        with transaction.atomic(durable=True):
            BucketLease.objects.bulk_create(
                [BucketLease(bucket=b) for b in range(settings.DUE_BUCKETS)], ignore_conflicts=True
            )
