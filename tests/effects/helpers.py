"""Real providers for the effect tests (an SMTP sink process) and reading what they received."""

from __future__ import annotations

import email
import email.policy
import hashlib
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server process exited early with code {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listening on 127.0.0.1:{port} after {timeout}s")


def stop_process(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


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
