"""Effect messages: what a delivery says to the provider, rendered from a prepared delivery.

The email (subject, body, headers, attachment), the webhook payload, and the request
record kept on each delivery row. No database, no network: effects.delivery claims,
reads the result, calls the adapters and records the outcome.
"""

from __future__ import annotations

import mimetypes
import re
import unicodedata
from dataclasses import dataclass, field
from datetime import timedelta
from email import encoders
from email.mime.base import MIMEBase

from django.conf import settings
from django.core.mail import EmailMessage

from kernel.clock import instant
from runs.models import EffectKind


@dataclass
class PreparedDelivery:
    """Everything the provider request needs, read in the claim transaction."""

    intent_id: str
    delivery_id: int
    number: int
    action: str
    kind: str
    target: dict
    run_id: str
    schedule_id: str
    schedule_name: str
    scheduled_at: object
    result_key: str
    result_version_id: str | None
    result_checksum: str
    result_size: int | None
    result_content_type: str
    attach: bool
    link_seconds: int
    result_filename: str = ""  # the job's own file name; "" when it gave none
    trigger: str = "schedule"  # the run's: "schedule", or "manual" for a run once
    request: dict = field(default_factory=dict)
    alert: dict | None = None  # a health alert (effects.alerts): what it lists; no run, no result


# Control (CR, LF, NUL, BEL, tab), format (bidi overrides such as U+202E, zero-width
# characters), line and paragraph separators, surrogates: none belongs in a mail header.
_NOT_IN_HEADERS = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})


def header_unsafe(text: str) -> str | None:
    """The first character of ``text`` that a mail header must not carry, or None."""
    return next((ch for ch in text if unicodedata.category(ch) in _NOT_IN_HEADERS), None)


def header_text(text: str) -> str:
    """``text`` with every such character made a space: a name saved before they were
    refused still gives a subject that can be sent."""
    return "".join(" " if unicodedata.category(ch) in _NOT_IN_HEADERS else ch for ch in text)


def message_id(action: str) -> str:
    """Stable per action: every delivery of one intent carries the same Message-ID."""
    return f"<{action}@{settings.EFFECT_MESSAGE_ID_DOMAIN}>"


def request_record(p: PreparedDelivery, now) -> dict:
    """What the delivery will send, recorded on its row before anything is sent."""
    if p.alert is not None:
        return _alert_record(p)
    record = {"identity": p.action, "resultVersion": p.result_version_id, "checksum": p.result_checksum}
    if p.kind == EffectKind.EMAIL:
        record |= {
            "messageId": message_id(p.action),
            "from": settings.DEFAULT_FROM_EMAIL,
            "to": list(p.target.get("to") or []),
            "subject": _subject(p),
        }
    else:
        record |= {"url": p.target.get("url", ""), "idempotencyKey": p.action}
    if p.attach:
        record["attachment"] = {"filename": _filename(p), "size": p.result_size}
    else:
        record["link"] = {"expiresAt": instant(now + timedelta(seconds=p.link_seconds))}
    return record


def email_message(p: PreparedDelivery, *, data: bytes | None, link: str | None) -> EmailMessage:
    """The report mail: the result attached (``data``) or linked (``link``)."""
    message = EmailMessage(
        subject=_subject(p),
        body=_email_body(p, link),
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=list(p.target["to"]),
        headers={
            "Message-ID": message_id(p.action),
            "X-Scheduler-Action": p.action,
            "X-Scheduler-Run": p.run_id,
            "X-Scheduler-Checksum": p.result_checksum,
        },
    )
    if data is not None:
        message.attach(_attachment(p, data))
    return message


def webhook_payload(p: PreparedDelivery, result_url: str) -> dict:
    return {
        "action": p.action,
        "runId": p.run_id,
        "scheduleId": p.schedule_id,
        "scheduledAt": instant(p.scheduled_at),
        "trigger": p.trigger,
        "checksum": p.result_checksum,
        "size": p.result_size,
        "contentType": p.result_content_type,
        "resultUrl": result_url,
        "resultUrlExpiresAt": p.request["link"]["expiresAt"],
    }


def _attachment(p: PreparedDelivery, data: bytes) -> MIMEBase:
    """Base64 whatever the type: a text/* part would be re-encoded with CRLF line endings,
    and the recipient must get exactly the bytes whose checksum the message names."""
    content_type = (p.result_content_type or "application/octet-stream").split(";")[0].strip()
    maintype, _, subtype = content_type.partition("/")
    part = MIMEBase(maintype or "application", subtype or "octet-stream")
    part.set_payload(data)
    encoders.encode_base64(part)
    part.add_header("Content-Disposition", "attachment", filename=_filename(p))
    return part


def _subject(p: PreparedDelivery) -> str:
    subject = p.target.get("subject")
    if not subject:
        run = "manual run" if p.trigger == "manual" else "run"
        subject = f"{p.schedule_name or 'Scheduled report'}: {run} for {instant(p.scheduled_at)}"
    return header_text(subject)


def _filename(p: PreparedDelivery) -> str:
    if p.result_filename:
        return p.result_filename
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", p.schedule_name or "result").strip("-") or "result"
    extension = mimetypes.guess_extension((p.result_content_type or "").split(";")[0].strip()) or ".bin"
    return f"{base}-{p.scheduled_at.strftime('%Y%m%dT%H%M%SZ')}{extension}"


def _email_body(p: PreparedDelivery, link: str | None) -> str:
    schedule = p.schedule_name or p.schedule_id
    if p.trigger == "manual":
        opening = f"The manual run {p.run_id} of {schedule} (run once on request, for {instant(p.scheduled_at)})"
    else:
        opening = f"The scheduled run {p.run_id} of {schedule} (scheduled for {instant(p.scheduled_at)})"
    lines = [
        f"{opening} succeeded.",
        "",
        f"Result checksum: {p.result_checksum}",
        f"Size: {p.result_size} bytes",
    ]
    if link:
        lines += ["", f"Download (valid until {p.request['link']['expiresAt']}):", link]
    else:
        lines += ["", "The result is attached."]
    return "\n".join(lines) + "\n"


# --- Health alerts ---------------------------------------------------------------------------


def _alert_record(p: PreparedDelivery) -> dict:
    record = {"identity": p.action, "incidents": [line["incidentId"] for line in p.alert["incidents"]]}
    if p.kind == EffectKind.EMAIL:
        return record | {"messageId": message_id(p.action), "from": settings.DEFAULT_FROM_EMAIL,
                         "to": list(p.target.get("to") or []), "subject": _alert_subject(p)}
    return record | {"url": p.target.get("url", ""), "idempotencyKey": p.action}


def alert_email(p: PreparedDelivery) -> EmailMessage:
    """The alert mail: one line per incident event it tells."""
    lines = [_alert_line(line) for line in p.alert["incidents"]]
    body = "\n".join(["Schedule health:", "", *lines, ""])
    return EmailMessage(subject=_alert_subject(p), body=body, from_email=settings.DEFAULT_FROM_EMAIL,
                        to=list(p.target["to"]),
                        headers={"Message-ID": message_id(p.action), "X-Scheduler-Action": p.action})


def alert_payload(p: PreparedDelivery) -> dict:
    return {"action": p.action, "type": "schedule_health", "incidents": p.alert["incidents"]}


def _alert_subject(p: PreparedDelivery) -> str:
    incidents = p.alert["incidents"]
    if len(incidents) == 1:
        line = incidents[0]
        return header_text(f"{line['scheduleName'] or line['scheduleId']}: {line['kind']} incident {line['event']}")
    opened = sum(1 for line in incidents if line["event"] == "opened")
    return f"Schedule health: {opened} incidents opened, {len(incidents) - opened} resolved"


def _alert_line(line: dict) -> str:
    name = header_text(line["scheduleName"] or "") or line["scheduleId"]
    occurrence = f" for {line['instant']}" if line["instant"] else ""
    run = f" (run {line['runId']})" if line["runId"] else ""
    when = line["resolvedAt"] if line["event"] == "resolved" else line["openedAt"]
    return f"- {line['kind']} {line['event']} at {when}: {name}{occurrence}{run} [{line['incidentId']}]"
