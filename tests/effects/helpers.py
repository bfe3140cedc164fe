"""Real providers for the effect tests (an SMTP sink process) and reading what they received."""

from __future__ import annotations

import email
import email.policy
import hashlib
import subprocess
import sys
from pathlib import Path

from tests.servers import free_port, wait_for_port

ROOT = Path(__file__).resolve().parents[2]


def start_smtp_sink(directory: Path, *, stall_seconds: float = 3.0) -> tuple[subprocess.Popen, int]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "effects" / "smtp_sink.py"), "--port", str(port),
         "--dir", str(directory), "--stall-seconds", str(stall_seconds)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    wait_for_port(port, process)
    return process, port


def checksum(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def read_mailbox(directory: Path) -> list[email.message.EmailMessage]:
    files = sorted(directory.glob("*.eml"), key=lambda p: p.stat().st_mtime_ns)
    return [email.message_from_bytes(p.read_bytes(), policy=email.policy.default) for p in files]


def attachments(message) -> list[tuple[str, bytes]]:
    return [(part.get_filename(), part.get_payload(decode=True)) for part in message.iter_attachments()]
