"""Provider adapters: one request each, classified by what the provider can have seen.

These functions do network I/O only; callers must not hold a database transaction.
Every adapter answers with a ``ProviderOutcome``:

- ``sent``: the provider accepted it.
- ``failed``: the provider permanently refused it (SMTP 5xx, HTTP 4xx).
- ``uncertain``: the request may have reached the provider but no answer came back
  (timeout or disconnect after the message content was sent).
- ``not_delivered``: nothing reached the provider, or it asked us to come back later
  (connection refused, SMTP 4xx, HTTP 5xx/429): safe to deliver again.

A ``failed`` outcome decided before any request (a refused destination) carries a
``reason`` code the API shows on the effect.
"""

from __future__ import annotations

import http.client
import json
import smtplib
import socket
import ssl
from dataclasses import dataclass

from django.conf import settings
from django.core.mail import EmailMessage, get_connection
from django.core.mail.backends.smtp import EmailBackend

from effects.egress import Destination, EgressDenied, resolve_destination

SENT = "sent"
FAILED = "failed"
UNCERTAIN = "uncertain"
NOT_DELIVERED = "not_delivered"
# Not a provider answer: the intent had nothing to submit (no recipients, no URL).
SKIPPED = "skipped"

SMTP_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
# HTTP answers that mean "not processed, come back later" rather than "never".
_HTTP_RETRY_LATER = {408, 409, 425, 429}
_MAX_RESPONSE_BYTES = 64 * 1024


@dataclass(frozen=True)
class ProviderOutcome:
    outcome: str
    external_id: str = ""
    detail: str = ""
    reason: str = ""  # machine-readable cause of a failure decided before any request


# --- Email ---------------------------------------------------------------------------------


class _PhaseTracking:
    """Remembers whether the message content went out (DATA) and what the server answered."""

    data_started = False
    data_reply = ""
    refused: dict | None = None

    def data(self, msg):
        # From here on the server may have the whole message even if its reply never arrives.
        self.data_started = True
        code, reply = super().data(msg)
        self.data_reply = reply.decode(errors="replace") if isinstance(reply, bytes) else str(reply)
        return code, reply

    def sendmail(self, *args, **kwargs):
        self.refused = super().sendmail(*args, **kwargs)
        return self.refused


class _SMTP(_PhaseTracking, smtplib.SMTP):
    pass


class _SMTP_SSL(_PhaseTracking, smtplib.SMTP_SSL):
    pass


class PhaseTrackingEmailBackend(EmailBackend):
    """Django's SMTP backend, on a connection that records how far the conversation got."""

    @property
    def connection_class(self):
        return _SMTP_SSL if self.use_ssl else _SMTP


def _abort(backend: EmailBackend) -> None:
    """Drop the socket without QUIT: after a timeout, QUIT would only wait out another one."""
    for conn in (backend.connection, getattr(backend, "_partial_connection", None)):
        if conn is not None:
            try:
                conn.close()
            except OSError:
                pass
    backend.connection = None
    backend._partial_connection = None


def _by_smtp_code(code: int, what: str) -> ProviderOutcome:
    if 400 <= code < 500:
        return ProviderOutcome(NOT_DELIVERED, detail=f"temporarily refused ({what})")
    return ProviderOutcome(FAILED, detail=f"permanently refused ({what})")


def send_email(message: EmailMessage, *, timeout: float) -> ProviderOutcome:
    """Submit one message over SMTP (Django's backend) and classify the result."""
    message_id = message.extra_headers.get("Message-ID", "")
    if settings.EMAIL_BACKEND != SMTP_BACKEND:
        # A local backend (file, console, locmem): nothing leaves this host, so a failure
        # means not delivered and the result is never uncertain.
        try:
            count = get_connection(fail_silently=False).send_messages([message])
        except Exception as exc:  # noqa: BLE001 - any local failure is "try again"
            return ProviderOutcome(NOT_DELIVERED, detail=f"local mail backend: {exc!r}"[:2000])
        if not count:
            return ProviderOutcome(NOT_DELIVERED, detail="local mail backend sent nothing")
        return ProviderOutcome(SENT, external_id=message_id, detail=f"written by {settings.EMAIL_BACKEND}")

    backend = PhaseTrackingEmailBackend(timeout=timeout, fail_silently=False)
    try:
        backend.open()
    except smtplib.SMTPResponseException as exc:  # greeting or login refused with a code
        _abort(backend)
        return _by_smtp_code(exc.smtp_code, f"connect: {exc.smtp_code} {exc.smtp_error!r}")
    except OSError as exc:  # refused, unreachable, timeout before the session began
        _abort(backend)
        return ProviderOutcome(NOT_DELIVERED, detail=f"connect: {exc!r}")
    conn = backend.connection
    try:
        backend.send_messages([message])  # the connection is open, so this does not close it
    except smtplib.SMTPRecipientsRefused as exc:
        _abort(backend)
        codes = sorted({code for code, _ in exc.recipients.values()})
        temporary = any(400 <= code < 500 for code in codes)
        detail = f"all recipients refused: {_describe_refused(exc.recipients)}"
        return ProviderOutcome(NOT_DELIVERED if temporary else FAILED, detail=detail[:2000])
    except smtplib.SMTPResponseException as exc:  # sender refused, or the content refused with a code
        _abort(backend)
        return _by_smtp_code(exc.smtp_code, f"{type(exc).__name__}: {exc.smtp_code} {exc.smtp_error!r}")
    except OSError as exc:  # timeout or disconnect mid-conversation
        _abort(backend)
        if conn.data_started:
            return ProviderOutcome(UNCERTAIN, detail=f"no reply after the message was sent: {exc!r}")
        return ProviderOutcome(NOT_DELIVERED, detail=f"connection lost before the message was sent: {exc!r}")
    try:
        backend.close()
    except OSError:
        _abort(backend)  # the message is already accepted; a failed QUIT changes nothing
    detail = f"accepted: {conn.data_reply}"
    if conn.refused:
        detail += f"; refused recipients: {_describe_refused(conn.refused)}"
    return ProviderOutcome(SENT, external_id=(conn.data_reply or message_id)[:300], detail=detail[:2000])


def _describe_refused(refused: dict) -> str:
    return ", ".join(f"{rcpt} ({code})" for rcpt, (code, _) in sorted(refused.items()))


# --- Webhook -------------------------------------------------------------------------------


class _PinnedHTTPConnection(http.client.HTTPConnection):
    """Connects to one checked address; the Host header still names the URL's host."""

    def __init__(self, destination: Destination, address: str, timeout: float):
        super().__init__(destination.host, destination.port, timeout=timeout)
        self.address = address

    def connect(self):
        self.sock = socket.create_connection((self.address, self.port), self.timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _PinnedHTTPSConnection(_PinnedHTTPConnection):
    """TLS to one checked address, verified against (and SNI naming) the URL's host."""

    default_port = http.client.HTTPS_PORT

    def connect(self):
        super().connect()
        self.sock = ssl.create_default_context().wrap_socket(self.sock, server_hostname=self.host)


def post_webhook(url: str, body: dict, *, idempotency_key: str, timeout: float) -> ProviderOutcome:
    """POST JSON with an Idempotency-Key to a checked address of the URL's host; connect
    first so a refusal is known to be harmless. Redirects are answers, never followed."""
    try:
        destination = resolve_destination(url)
    except EgressDenied as exc:
        return ProviderOutcome(FAILED, detail=f"egress denied, nothing sent: {exc}", reason="egress_denied")
    except OSError as exc:  # the name did not resolve: nothing was sent
        return ProviderOutcome(NOT_DELIVERED, detail=f"resolve: {exc!r}")
    conn, refused = _connect_to_any(destination, timeout)
    if conn is None:
        return ProviderOutcome(NOT_DELIVERED, detail=f"connect: {refused!r}")
    payload = json.dumps(body, separators=(",", ":")).encode()
    headers = {
        "Content-Type": "application/json",
        "Idempotency-Key": idempotency_key,
        "User-Agent": "scheduler-effects/1",
    }
    try:
        try:
            conn.request("POST", destination.target, body=payload, headers=headers)
            response = conn.getresponse()
            text = response.read(_MAX_RESPONSE_BYTES)
        except (OSError, http.client.HTTPException) as exc:
            return ProviderOutcome(UNCERTAIN, detail=f"no complete answer after the request was sent: {exc!r}")
    finally:
        conn.close()
    status = response.status
    detail = f"HTTP {status} {response.reason}"
    if 200 <= status < 300:
        return ProviderOutcome(SENT, external_id=_external_id(response, text), detail=detail)
    if status in _HTTP_RETRY_LATER or status >= 500:
        return ProviderOutcome(NOT_DELIVERED, detail=detail)
    return ProviderOutcome(FAILED, detail=f"{detail}: {text[:500].decode(errors='replace')}")


def _connect_to_any(destination: Destination, timeout: float):
    """(an open connection to the first checked address that accepts, None) or (None, the last error)."""
    connection_class = _PinnedHTTPSConnection if destination.scheme == "https" else _PinnedHTTPConnection
    error = None
    for address in destination.addresses:
        conn = connection_class(destination, address, timeout)
        try:
            conn.connect()
            return conn, None
        except OSError as exc:
            conn.close()
            error = exc
    return None, error


def _external_id(response: http.client.HTTPResponse, text: bytes) -> str:
    for header in ("X-Message-Id", "X-Request-Id", "Location"):
        if response.getheader(header):
            return response.getheader(header)[:300]
    try:
        parsed = json.loads(text)
    except ValueError:
        return ""
    if isinstance(parsed, dict) and isinstance(parsed.get("id"), (str, int)):
        return str(parsed["id"])[:300]
    return ""
