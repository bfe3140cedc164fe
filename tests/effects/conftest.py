"""Real providers for the effect tests: an aiosmtpd server process and an HTTP receiver.

Deliveries never run inside a transaction, so these tests use real commits
(``transaction=True``) and the adapter talks to the servers over real sockets.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.effects.helpers import start_smtp_sink
from tests.servers import stop_process

STALL_SECONDS = 3.0
CLIENT_TIMEOUT = 1.0


class SmtpSink:
    def __init__(self, process, port, directory):
        self.process, self.port, self.directory = process, port, directory

    def clear(self) -> None:
        for path in self.directory.glob("*.eml"):
            path.unlink()


@pytest.fixture(scope="session")
def smtp_server(tmp_path_factory):
    directory = tmp_path_factory.mktemp("mailbox")
    process, port = start_smtp_sink(directory, stall_seconds=STALL_SECONDS)
    try:
        yield SmtpSink(process, port, directory)
    finally:
        stop_process(process)


@pytest.fixture
def mailbox(smtp_server):
    smtp_server.clear()
    yield smtp_server.directory
    smtp_server.clear()


@pytest.fixture(autouse=True)
def effect_settings(settings, file_objects, smtp_server):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST = "127.0.0.1"
    settings.EMAIL_PORT = smtp_server.port
    settings.EMAIL_HOST_USER = ""
    settings.EMAIL_HOST_PASSWORD = ""
    settings.EMAIL_USE_TLS = False
    settings.EMAIL_USE_SSL = False
    settings.EFFECT_TIMEOUT_SECONDS = CLIENT_TIMEOUT
    settings.EFFECT_BACKOFF_SECONDS = 0
    settings.EFFECT_BACKOFF_MAX_SECONDS = 0
    settings.PUBLIC_BASE_URL = "http://testserver"
    # The receiver below listens on loopback: an internal receiver the operator opened.
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    return settings


class Receiver:
    """A real HTTP endpoint on 127.0.0.1 that records every request. ``script`` holds the
    next answers, each ``(status, stall_seconds)``; when it is empty the answer is 200."""

    def __init__(self):
        self.requests: list[dict] = []
        self.script: list[tuple[int, float]] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with receiver.lock:
                    receiver.requests.append({"path": self.path, "headers": dict(self.headers),
                                              "body": json.loads(body)})
                    number = len(receiver.requests)
                    status, stall = receiver.script.pop(0) if receiver.script else (200, 0.0)
                time.sleep(stall)
                reply = json.dumps({"id": f"hook-{number}"}).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(reply)))
                    self.end_headers()
                    self.wfile.write(reply)
                except OSError:
                    pass  # the client gave up while we stalled

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/report"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()
