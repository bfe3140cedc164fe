"""Runs that really go through the authority: materialize, claim, stage, publish."""

from __future__ import annotations

import email
import email.policy
import hashlib
import socket
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

from runs import authority
from runs.clock import authority_now
from runs.models import Attempt, Run, StoredObject
from schedules.models import Schedule
from schedules.services import schedule_create
from scheduler_project.http.schedule_requests import schedule_spec

ROOT = Path(__file__).resolve().parents[2]
YEARLY = "0 0 1 1 *"  # after the instant we make due, the next one is months away
PARAMS = {"report.sales": {"region": "us"}, "demo.sleep": {"seconds": 0}}


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


def make_schedule(tenant, *, job_type: str = "report.sales", effects: dict | None = None,
                  name: str = "sales-report") -> Schedule:
    body = {"name": name, "jobType": job_type, "params": PARAMS[job_type],
            "recurrence": {"kind": "cron", "cron": YEARLY}}
    if effects is not None:
        body["effects"] = effects
    schedule, _ = schedule_create(tenant=tenant, spec=schedule_spec(body))
    return schedule


def start_run(schedule: Schedule, *, lease_seconds: int = 60) -> Run:
    """Make one instant due, materialize it and claim it: a running run with attempt 1."""
    Schedule.objects.filter(id=schedule.id).update(next_run_at=authority_now() - timedelta(milliseconds=10))
    authority.materialize_due()
    run = authority.claim(worker_label="test-worker", lease_seconds=lease_seconds)
    assert run is not None and run.schedule_id == schedule.id
    return run


def stage(run: Run, data: bytes, *, attempt_id: str | None = None, fence: int | None = None) -> StoredObject:
    return authority.stage_result(
        run_id=run.id, attempt_id=attempt_id or run.current_attempt_id, fence=fence or run.fence,
        data=data, content_type="text/csv",
    )


def publish(run: Run, obj: StoredObject, *, attempt_id: str | None = None, fence: int | None = None) -> Run:
    return authority.complete(
        run_id=run.id, attempt_id=attempt_id or run.current_attempt_id, fence=fence or run.fence,
        outcome="succeeded", object_key=obj.key, version_id=obj.version_id, checksum=obj.checksum,
    )


def succeeded_run(tenant, *, data: bytes = b"region,total\nus,42\n", **schedule_kw) -> Run:
    schedule = make_schedule(tenant, **schedule_kw)
    run = start_run(schedule)
    return publish(run, stage(run, data))


def expire_lease(run_id: str) -> None:
    past = authority_now() - timedelta(seconds=1)
    Run.objects.filter(id=run_id).update(lease_expires_at=past)
    Attempt.objects.filter(run_id=run_id, state="running").update(lease_expires_at=past)


def checksum(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def read_mailbox(directory: Path) -> list[email.message.EmailMessage]:
    files = sorted(directory.glob("*.eml"), key=lambda p: p.stat().st_mtime_ns)
    return [email.message_from_bytes(p.read_bytes(), policy=email.policy.default) for p in files]


def attachments(message) -> list[tuple[str, bytes]]:
    return [(part.get_filename(), part.get_payload(decode=True)) for part in message.iter_attachments()]
