"""The outbox relay: committed dispatch intents become broker hints.

A hint may be published twice (a relay dies after publishing, before marking) and that is
harmless: workers claim through the authority. A hint the broker loses is republished
from the outbox, and a run whose worker dies is recovered by the sweeper.
"""

from datetime import timedelta
from typing import NamedTuple

from django.conf import settings
from django.db import transaction

from kernel.clock import authority_now
from runs.authority.statements.outbox import outbox_in_id_order, outbox_lease_unpublished, outbox_set
from runs.models import Outbox, OutboxKind, RunState

RELAY_LEASE_SECONDS = 30
RELAY_RETRY_SECONDS = 1  # after the broker refused a batch (down, restarting): soon, not a busy loop


class Hint(NamedTuple):
    id: int  # the outbox row
    run_id: str
    resource_class: str


def relay_pass(publish_all, *, epoch: str = "", batch_size: int = 500) -> tuple[int, int]:
    """Publish one batch of unpublished dispatch intents; returns (published, failed).

    ``publish_all(hints)`` must return only once the broker accepted every message, and
    raise otherwise; rows are marked published after that, in a separate short
    transaction, never around the call, with the broker's ``epoch``. A refused batch stays
    unpublished as a whole (a hint published twice is harmless: workers claim through the
    authority) and is tried again after ``RELAY_RETRY_SECONDS``: the relay lease is for a relay
    that dies while publishing, not for a broker that is down for a moment.
    """
    with transaction.atomic():
        now = authority_now()
        leased = outbox_lease_unpublished(now, now + timedelta(seconds=RELAY_LEASE_SECONDS), batch_size)
    hints = [Hint(*row) for row in leased]
    if not hints:
        return 0, 0
    ids = [hint.id for hint in hints]
    try:
        publish_all(hints)
    except Exception as exc:  # the broker said no: the rows stay unpublished
        retry_at = authority_now() + timedelta(seconds=RELAY_RETRY_SECONDS)
        outbox_set(ids, last_error=repr(exc)[:1000], relay_until=retry_at)
        return 0, len(hints)
    outbox_set(ids, published_at=authority_now(), relay_until=None, broker_epoch=epoch)
    return len(hints), 0


def republish_after_broker_restart(epoch: str) -> int:
    """Hints an earlier broker incarnation accepted and nobody has claimed are gone with it
    (a broker restart without persistence): mark them unpublished at once, instead of
    waiting for the time-based backstop below. Returns how many."""
    if not epoch:
        return 0
    lost = Outbox.objects.filter(
        kind=OutboxKind.DISPATCH,
        processed_at__isnull=True,
        published_at__isnull=False,
        run__state=RunState.QUEUED,
    ).exclude(broker_epoch__in=(epoch, ""))
    # A row another transaction holds is left (outbox_in_id_order): a claim is spending its hint, or
    # another pass is republishing it already.
    with transaction.atomic():
        return outbox_in_id_order(lost, skip_locked=True).update(published_at=None)


def republish_lost_hints(queued_claims) -> int:
    """Backstop for hints the broker lost (restart, purged queue): mark them unpublished so
    the relay sends them again.

    A hint published long ago whose run is still queued may only be waiting behind a burst,
    so per resource class only the shortfall is republished: stale unclaimed hints minus the
    claims ``queued_claims(resource_class)`` says the queue's hints are still worth. Any
    hint claims any claimable run of its class, so which rows are republished does not matter.
    """
    cutoff = authority_now() - timedelta(seconds=settings.RELAY_REPUBLISH_AFTER_SECONDS)
    stale = Outbox.objects.filter(
        kind=OutboxKind.DISPATCH,
        processed_at__isnull=True,
        published_at__lt=cutoff,
        run__state=RunState.QUEUED,
    )
    republished = 0
    for resource_class in stale.values_list("resource_class", flat=True).distinct():
        rows = stale.filter(resource_class=resource_class)
        missing = rows.count() - queued_claims(resource_class)
        if missing > 0:
            ids = list(rows.order_by("id").values_list("id", flat=True)[:missing])
            with transaction.atomic():  # skipping rows a claim holds: it is spending their hints
                republished += outbox_in_id_order(Outbox.objects.filter(id__in=ids, published_at__lt=cutoff),
                                           skip_locked=True).update(published_at=None)
    return republished
