"""Effect delivery: the only code that changes an effect intent's state, each change a
guarded statement (``UPDATE ... WHERE`` its guard): a claim or an operator's decision under
the intent as it was when locked (``_write``, or a loud TransitionConflict), a delivery's
outcome under its claim (``_claim_held``: 0 rows and the delivery lost, ``finish_delivery``).

One delivery is three steps, and only the middle one touches the network:

1. ``claim_next_delivery``: one short transaction takes a due intent (FOR UPDATE SKIP
   LOCKED, so any number of effect processes can run), pins the result object, and
   records the delivery (number, request) *before* anything is sent. The intent's
   ``next_attempt_at`` becomes the delivery's deadline.
2. ``perform``: the provider request, outside any transaction, under the action's stable
   identity (Message-ID / Idempotency-Key); what it says is rendered by effects.messages.
3. ``finish_delivery``: a second transaction records the outcome and settles the intent.

A delivery row left unfinished past its deadline is evidence that the outcome is unknown:
the next claim records it as uncertain and applies the job type's policy.
"""

from __future__ import annotations

import hashlib
import logging
import random
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q

from effects import adapters
from effects.adapters import ProviderOutcome
from effects.messages import (
    PreparedDelivery, alert_email, alert_payload, email_message, request_record, webhook_payload,
)
from effects.quota import email_recipients_take
from kernel.clock import authority_now, instant
from kernel.errors import InvalidRequest, InvalidState, NotFound
from objectstore import ObjectMissing, download_filename, get_object_store
from runs.authority.objects import object_pin
from runs.authority.statements.rows import TransitionConflict, transition
from runs.backoff import retry_delay_seconds
from runs.models import EffectDelivery, EffectIntent, EffectKind, EffectState, ObjectState, StoredObject
from schedules.models import JobType, UncertainEffectPolicy

log = logging.getLogger(__name__)

SETTLED_STATES = (EffectState.SENT, EffectState.FAILED, EffectState.SKIPPED)
RESOLUTIONS = ("sent", "failed", "retry")
S3_MAX_LINK_SECONDS = 7 * 86400  # presigned URLs cannot live longer


@dataclass
class PassStats:
    deliveries: int = 0
    recovered: int = 0  # in-flight deliveries found abandoned past their deadline
    settled: int = 0  # intents settled without a provider request (no target, result expired)
    outcomes: dict = field(default_factory=dict)

    def count(self, outcome: str) -> None:
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1

    @property
    def handled(self) -> int:
        return self.deliveries + self.recovered + self.settled

    def __bool__(self) -> bool:
        return bool(self.handled)

    def __str__(self):
        parts = [f"deliveries={self.deliveries}", f"recovered={self.recovered}", f"settled={self.settled}"]
        parts += [f"{name}={n}" for name, n in sorted(self.outcomes.items())]
        return " ".join(parts)


# --- The pass --------------------------------------------------------------------------------


def effects_pass(*, limit: int | None = None) -> PassStats:
    """Deliver due intents one at a time, at most ``limit`` per pass."""
    limit = limit or settings.EFFECT_BATCH_SIZE
    stats = PassStats()
    done: set[str] = set()  # at most one delivery per intent per pass, whatever its backoff
    while stats.handled < limit:
        claimed = claim_next_delivery(stats, exclude=done, limit=limit - stats.handled)
        if claimed is None:
            break
        done.add(claimed.intent_id)
        stats.deliveries += 1
        outcome = perform(claimed)
        if finish_delivery(claimed, outcome):
            stats.count(outcome.outcome)
        else:  # another delivery or an operator settled the intent meanwhile: theirs stands
            stats.count("lost")
    return stats


# --- Step 1: claim -----------------------------------------------------------------------------


def claim_next_delivery(
    stats: PassStats, *, exclude: set[str] = frozenset(), limit: int = 100
) -> PreparedDelivery | None:
    """Take the next due intent and record its delivery; intents that settle without a
    request (abandoned, no target, result expired) are handled on the way, at most ``limit``
    intents in all, so one transaction stays short whatever the backlog."""
    with transaction.atomic():
        now = authority_now()
        handled: list[str] = list(exclude)
        for _ in range(limit):
            intent = _next_due(now, handled)
            if intent is None:
                return None
            handled.append(intent.id)
            latest = _latest_delivery(intent)
            if latest is not None and latest.finished_at is None:
                # Its deadline passed without an outcome: the adapter stopped mid-request.
                _record_abandoned(intent, latest, now, _locked(intent))
                stats.recovered += 1
                continue
            prepared = _start_delivery(intent, now, _locked(intent))
            if prepared is not None:
                return prepared
            stats.settled += 1
        return None


def _next_due(now, handled: list[str]) -> EffectIntent | None:
    """The next due intent, locked: undated pending ones first (due as soon as created), then
    the dated ones (retry backoff, in-flight deadline, uncertain under `retry`) by due time.
    Two ordered probes, each the head of its own partial index; a held uncertain intent
    (no date) is never read."""
    probes = (
        (Q(state=EffectState.PENDING, next_attempt_at__isnull=True), ("created_at", "id")),
        (
            Q(state__in=(EffectState.PENDING, EffectState.UNCERTAIN), next_attempt_at__lte=now),
            ("next_attempt_at", "created_at", "id"),
        ),
    )
    for due, order in probes:
        candidates = EffectIntent.objects.filter(due).exclude(id__in=handled)
        intent = (
            candidates.select_related("run").order_by(*order).select_for_update(skip_locked=True, of=("self",)).first()
        )
        if intent is not None:
            return intent
    return None


# What a settlement or an operator may change on an intent (effects never change its target or result).
WRITTEN = ("state", "next_attempt_at", "reason", "updated_at", "external_id", "delivery_count", "resolution")


def _locked(intent: EffectIntent) -> tuple[str, int]:
    """What the intent was when its row was locked: the guard of every write that follows."""
    return intent.state, intent.delivery_count


def _write(intent: EffectIntent, locked: tuple[str, int]) -> None:
    """Write the intent's settlement, guarded by what it was when locked (``_locked``): a
    write that finds it otherwise means a lock was not taken, and fails loudly
    (TransitionConflict) instead of overwriting another process's outcome."""
    state, delivery_count = locked
    transition(intent, {"state": state, "delivery_count": delivery_count},
               **{name: getattr(intent, name) for name in WRITTEN})


def _latest_delivery(intent: EffectIntent) -> EffectDelivery | None:
    if not intent.delivery_count:
        return None
    return EffectDelivery.objects.select_for_update().filter(intent=intent, number=intent.delivery_count).first()


def _record_abandoned(intent: EffectIntent, delivery: EffectDelivery, now, locked: tuple[str, int]) -> None:
    transition(delivery, {"finished_at__isnull": True}, finished_at=now, outcome=EffectState.UNCERTAIN,
               detail="no outcome was recorded by the delivery deadline; the request may have reached the provider")
    _settle(intent, adapters.UNCERTAIN, now)
    _write(intent, locked)
    log.warning("effect %s: delivery %d abandoned mid-request, now %s", intent.action, delivery.number, intent.state)


def _start_delivery(intent: EffectIntent, now, locked: tuple[str, int]) -> PreparedDelivery | None:
    if intent.alert is not None:
        return _start_alert_delivery(intent, now, locked)
    run = intent.run
    target = intent.target or {}
    number = intent.delivery_count + 1
    obj = (
        StoredObject.objects.select_for_update()
        .filter(key=intent.result_key, version_id=intent.result_version_id)
        .first()
    )
    size = obj.size if obj is not None else run.result_size
    attach = (
        intent.kind == EffectKind.EMAIL
        and target.get("attach", True) is not False
        and size is not None
        and size <= settings.EFFECT_ATTACH_MAX_BYTES
    )
    link_seconds = 0 if attach else min(settings.EFFECT_LINK_TTL_SECONDS, S3_MAX_LINK_SECONDS)
    prepared = PreparedDelivery(
        intent_id=intent.id, delivery_id=0, number=number, action=intent.action, kind=intent.kind,
        target=target, run_id=run.id, schedule_id=run.schedule_id,
        schedule_name=run.payload.get("scheduleName") or "", scheduled_at=run.scheduled_at,
        result_key=intent.result_key, result_version_id=intent.result_version_id,
        result_checksum=intent.result_checksum, result_size=size,
        result_content_type=(obj.content_type if obj is not None else run.result_content_type) or "",
        attach=attach, link_seconds=link_seconds, result_filename=obj.filename if obj is not None else "",
        trigger=run.trigger,
    )
    prepared.request = request_record(prepared, now)
    intent.delivery_count = number
    intent.updated_at = now
    missing = _missing_target(intent)
    if missing or obj is None or obj.state != ObjectState.REFERENCED:
        why = missing or "the result object has expired under the retention policy"
        _settle_unsent(intent, prepared, now, adapters.SKIPPED if missing else adapters.FAILED, why, locked)
        return None
    if intent.kind == EffectKind.EMAIL and not email_recipients_take(run.tenant_id, len(target["to"]), now):
        why = "the tenant's daily cap on email recipients is reached"
        _settle_unsent(intent, prepared, now, adapters.FAILED, why, locked, reason="quota_exceeded")
        return None
    # Pin the exact version: cleanup leaves it alone while we read it and while a link we
    # hand out can still be used.
    object_pin(obj, now + timedelta(seconds=max(settings.EFFECT_INFLIGHT_SECONDS, link_seconds + 60)))
    delivery = EffectDelivery.objects.create(intent=intent, number=number, started_at=now, request=prepared.request)
    intent.next_attempt_at = now + timedelta(seconds=settings.EFFECT_INFLIGHT_SECONDS)
    _write(intent, locked)
    prepared.delivery_id = delivery.id
    return prepared


def _start_alert_delivery(intent: EffectIntent, now, locked: tuple[str, int]) -> PreparedDelivery | None:
    """A health alert (effects.alerts): no run, no result; the message lists its incidents."""
    number = intent.delivery_count + 1
    prepared = PreparedDelivery(
        intent_id=intent.id, delivery_id=0, number=number, action=intent.action, kind=intent.kind,
        target=intent.target or {}, run_id="", schedule_id="", schedule_name="", scheduled_at=None, result_key="",
        result_version_id=None, result_checksum="", result_size=None, result_content_type="", attach=False,
        link_seconds=0, alert=intent.alert,
    )
    prepared.request = request_record(prepared, now)
    intent.delivery_count = number
    intent.updated_at = now
    missing = _missing_target(intent)
    if missing:
        _settle_unsent(intent, prepared, now, adapters.SKIPPED, missing, locked)
        return None
    tenant_id = intent.alert["tenantId"]
    if intent.kind == EffectKind.EMAIL and not email_recipients_take(tenant_id, len(intent.target["to"]), now):
        why = "the tenant's daily cap on email recipients is reached"
        _settle_unsent(intent, prepared, now, adapters.FAILED, why, locked, reason="quota_exceeded")
        return None
    delivery = EffectDelivery.objects.create(intent=intent, number=number, started_at=now, request=prepared.request)
    intent.next_attempt_at = now + timedelta(seconds=settings.EFFECT_INFLIGHT_SECONDS)
    _write(intent, locked)
    prepared.delivery_id = delivery.id
    return prepared


def _settle_unsent(intent: EffectIntent, prepared: PreparedDelivery, now, outcome: str, why: str,
                   locked: tuple[str, int], reason="") -> None:
    """Settle without a provider request, recorded like any other delivery."""
    EffectDelivery.objects.create(
        intent=intent, number=prepared.number, started_at=now, finished_at=now, request=prepared.request,
        outcome=_delivery_state(outcome), detail=f"not submitted: {why}",
    )
    _settle(intent, outcome, now, reason=reason)
    _write(intent, locked)


def _missing_target(intent: EffectIntent) -> str:
    target = intent.target or {}
    if intent.kind == EffectKind.EMAIL and not target.get("to"):
        return "the email effect names no recipients"
    if intent.kind == EffectKind.WEBHOOK and not target.get("url"):
        return "the webhook effect names no URL"
    return ""


# --- Step 2: the provider request (no transaction) ------------------------------------------


def perform(p: PreparedDelivery) -> ProviderOutcome:
    if transaction.get_connection().in_atomic_block:
        raise RuntimeError("effect deliveries must not run inside a database transaction")
    try:
        if p.alert is not None and p.kind == EffectKind.EMAIL:
            return adapters.send_email(alert_email(p), timeout=settings.EFFECT_TIMEOUT_SECONDS)
        if p.alert is not None:
            return adapters.post_webhook(p.target["url"], alert_payload(p), idempotency_key=p.action,
                                         timeout=settings.EFFECT_TIMEOUT_SECONDS)
        if p.kind == EffectKind.EMAIL:
            return _perform_email(p)
        return _perform_webhook(p)
    except Exception as exc:  # noqa: BLE001 - a bug must not leave the delivery open forever
        log.exception("effect %s: delivery %d raised", p.action, p.number)
        return ProviderOutcome(adapters.UNCERTAIN, detail=f"adapter error: {exc!r}"[:2000])


def _perform_email(p: PreparedDelivery) -> ProviderOutcome:
    link = None
    data = None
    if p.attach:
        try:
            data = get_object_store().get(p.result_key, p.result_version_id)
        except ObjectMissing:
            return ProviderOutcome(adapters.FAILED, detail="the canonical result object is missing from the store")
        except Exception as exc:  # noqa: BLE001 - store outage: nothing was submitted
            return ProviderOutcome(adapters.NOT_DELIVERED, detail=f"reading the result: {exc!r}"[:2000])
        if "sha256:" + hashlib.sha256(data).hexdigest() != p.result_checksum:
            return ProviderOutcome(adapters.FAILED, detail="the stored bytes do not match the canonical checksum")
    else:
        link = _download_link(p)
    message = email_message(p, data=data, link=link)
    return adapters.send_email(message, timeout=settings.EFFECT_TIMEOUT_SECONDS)


def _perform_webhook(p: PreparedDelivery) -> ProviderOutcome:
    body = webhook_payload(p, _download_link(p))
    return adapters.post_webhook(
        p.target["url"], body, idempotency_key=p.action, timeout=settings.EFFECT_TIMEOUT_SECONDS
    )


def _download_link(p: PreparedDelivery) -> str:
    return get_object_store().download_url(
        p.result_key, p.result_version_id, p.link_seconds, settings.PUBLIC_BASE_URL,
        filename=download_filename(p.result_filename),
    )


# --- Step 3: record the outcome ------------------------------------------------------------


def finish_delivery(p: PreparedDelivery, result: ProviderOutcome) -> bool:
    """Record the provider's answer on the delivery's row and, while the delivery still holds
    its claim on the intent, settle the intent. Answers whether it settled it: False when the
    delivery lost its claim (the intent was removed, a later delivery took it after this
    one's deadline, or it settled meanwhile), and then the intent keeps the winner's outcome.

    Both writes are guarded statements (``UPDATE ... WHERE`` the guard, 0 rows: lost):
    the delivery row is written once by its deliverer, replacing at most the `uncertain` a
    deadline recovery wrote meanwhile (the real answer is better evidence); the intent only
    under ``_claim_held``. One exception, by design: a `sent` answer settles an intent not yet
    sent whoever holds it, because calling a delivered message anything else would hide it."""
    with transaction.atomic():
        now = authority_now()
        intent = EffectIntent.objects.select_for_update().filter(id=p.intent_id).first()
        if intent is None:
            log.warning("effect %s: intent removed while delivery %d was in flight", p.action, p.number)
            return False
        unanswered = Q(intent_id=intent.id) & (Q(finished_at__isnull=True) | Q(outcome=EffectState.UNCERTAIN))
        if not EffectDelivery.objects.filter(unanswered, id=p.delivery_id).update(
                finished_at=now, outcome=_delivery_state(result.outcome), external_id=result.external_id[:300],
                detail=result.detail[:10000]):
            raise TransitionConflict(f"effect {p.action}: delivery {p.number} already has its deliverer's outcome")
        if result.outcome == adapters.SENT:
            guard = ~Q(state=EffectState.SENT)
            intent.external_id = result.external_id[:300]
        else:
            guard = _claim_held(p)
        _settle(intent, result.outcome, now, reason=result.reason)
        if not EffectIntent.objects.filter(guard, id=intent.id).update(
                **{name: getattr(intent, name) for name in WRITTEN}):
            log.info("effect %s: delivery %d lost its claim (%s); its %s is recorded on the delivery only",
                     p.action, p.number, _holder(p.intent_id), result.outcome)
            return False
    log.info("effect %s: delivery %d %s (%s)", p.action, p.number, result.outcome, result.detail[:200])
    return True


def _claim_held(p: PreparedDelivery) -> Q:
    """The guard of a delivery's settlement: the intent's latest delivery is still this one
    (no claim took it after this one's deadline) and nothing settled it meanwhile."""
    return Q(delivery_count=p.number, state__in=(EffectState.PENDING, EffectState.UNCERTAIN))


def _holder(intent_id: str) -> str:
    held = EffectIntent.objects.filter(id=intent_id).values_list("state", "delivery_count").first()
    return "intent removed" if held is None else f"the intent is {held[0]} after delivery {held[1]}"


def _delivery_state(outcome: str) -> str:
    # "not delivered" is a failed request; the intent itself goes back to pending.
    return {
        adapters.SENT: EffectState.SENT,
        adapters.UNCERTAIN: EffectState.UNCERTAIN,
        adapters.SKIPPED: EffectState.SKIPPED,
    }.get(outcome, EffectState.FAILED)


def _settle(intent: EffectIntent, outcome: str, now, *, reason: str = "") -> None:
    """The intent's state after a delivery outcome. Once any delivery may have reached the
    provider, only a `sent` answer or an operator can settle the intent as anything else:
    calling it failed could hide a delivered message. `reason` names why a failure was
    decided without a request; it is kept only if the intent ends failed."""
    count = intent.delivery_count
    can_retry = count < settings.EFFECT_MAX_DELIVERIES
    backoff = now + timedelta(
        seconds=retry_delay_seconds(max(count, 1), settings.EFFECT_BACKOFF_SECONDS,
                                    settings.EFFECT_BACKOFF_MAX_SECONDS, random)
    )
    maybe_delivered = outcome == adapters.UNCERTAIN or intent.deliveries.filter(
        outcome=EffectState.UNCERTAIN
    ).exists()
    intent.updated_at = now
    if outcome == adapters.SENT:
        intent.state, intent.next_attempt_at = EffectState.SENT, None
    elif outcome == adapters.SKIPPED:
        intent.state, intent.next_attempt_at = EffectState.SKIPPED, None
    elif outcome == adapters.UNCERTAIN:
        retry = can_retry and _policy(intent) == UncertainEffectPolicy.RETRY
        intent.state, intent.next_attempt_at = EffectState.UNCERTAIN, (backoff if retry else None)
    elif outcome == adapters.NOT_DELIVERED and can_retry:
        intent.state = EffectState.UNCERTAIN if maybe_delivered else EffectState.PENDING
        intent.next_attempt_at = backoff
    else:  # permanent refusal, or out of deliveries
        intent.state = EffectState.UNCERTAIN if maybe_delivered else EffectState.FAILED
        intent.next_attempt_at = None
    intent.reason = reason if intent.state == EffectState.FAILED else ""


def _policy(intent: EffectIntent) -> str:
    if intent.run_id is None:  # a health alert: the operator's choice for every alert
        return settings.HEALTH_ALERT_UNCERTAIN_POLICY
    policy = JobType.objects.filter(name=intent.run.job_type).values_list("uncertain_effect_policy", flat=True).first()
    return policy or UncertainEffectPolicy.HOLD


# --- Operator decisions ----------------------------------------------------------------------


def effect_resolve(*, action: str, resolution: str, actor: str = "operator", note: str = "") -> EffectIntent:
    """An operator settles an intent: `sent` (it arrived), `failed` (give up), or `retry`
    (deliver again under the same identity)."""
    if resolution not in RESOLUTIONS:
        raise InvalidRequest(f"resolution must be one of {', '.join(RESOLUTIONS)}", field="resolution")
    with transaction.atomic():
        now = authority_now()
        intent = EffectIntent.objects.select_for_update().filter(action=action).first()
        if intent is None:
            raise NotFound(f"no effect intent {action}")
        latest = _latest_delivery(intent)
        if latest is not None and latest.finished_at is None:
            if latest.started_at + timedelta(seconds=settings.EFFECT_INFLIGHT_SECONDS) > now:
                raise InvalidState("a delivery of this intent is in flight; wait for its outcome")
            _record_abandoned(intent, latest, now, _locked(intent))
        allowed = {
            "sent": (EffectState.PENDING, EffectState.UNCERTAIN, EffectState.FAILED),
            "failed": (EffectState.PENDING, EffectState.UNCERTAIN),
            "retry": (EffectState.UNCERTAIN, EffectState.FAILED),
        }[resolution]
        if intent.state not in allowed:
            raise InvalidState(f"the intent is {intent.state}; it cannot be resolved as {resolution}")
        locked = _locked(intent)
        if resolution == "retry":
            intent.state, intent.next_attempt_at = EffectState.PENDING, None
        else:
            intent.state, intent.next_attempt_at = resolution, None
        intent.reason = ""  # the operator's decision replaces the automatic one
        entry = f"{instant(now)} {actor}: {resolution}" + (f" ({note})" if note else "")
        intent.resolution = f"{intent.resolution}\n{entry}".strip()
        intent.updated_at = now
        _write(intent, locked)
    return intent
