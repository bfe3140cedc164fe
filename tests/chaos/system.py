"""The real system for a chaos scenario: load in the database, processes started, faults
injected, figures gathered.

Every process is a child of the test (scanner, relay, sweeper, Celery workers) working on
the pytest-django database, the suite's own Redis and a moto S3 server, all on 127.0.0.1.
Load is made the way clients make it (schedule_create, run_once) and due instants are
made due by moving ``next_run_at`` into the past, as a scheduler outage would.
"""

from __future__ import annotations

import random
import re
import signal
import socket
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import connection
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector

from kernel.clock import authority_now
from runs import authority
from runs.models import Attempt, AttemptState, Run, TERMINAL_STATES
from schedule_services.lifecycle import schedule_create
from scheduler_project.http.schedule_requests import schedule_spec
from schedules.models import JobType, Schedule
from tests.chaos.invariants import InvariantReport, check_invariants
from tests.e2e.processes import PYTHON, wait_until
from tests.factories import make_tenant

LEASE_SECONDS = 3  # short, so expiry and recovery happen within seconds
MAX_ATTEMPTS = 6  # a run may lose a few attempts to faults and still succeed
RETRY = {"maxAttempts": MAX_ATTEMPTS, "initialDelaySeconds": 0.5, "maxDelaySeconds": 2}
YEARLY = "0 0 1 1 *"  # a schedule that only carries run-once requests during a test
SETTLE_TIMEOUT = 90

# What a recurring schedule does with a backlog: mixed, so skipped records appear too.
POLICY_MIX = (
    {"misfirePolicy": "run_all", "overlapPolicy": "allow"},
    {"misfirePolicy": "run_all", "overlapPolicy": "buffer_one"},
    {"misfirePolicy": "latest_only", "misfireGraceSeconds": 5, "overlapPolicy": "allow"},
    {"misfirePolicy": "run_all", "overlapPolicy": "skip"},
)


@dataclass
class Load:
    """What a scenario put in flight: run-once requests and/or recurring schedules."""

    tenant: object
    schedule_ids: list[str] = field(default_factory=list)
    run_ids: list[str] = field(default_factory=list)
    recurring_ids: list[str] = field(default_factory=list)
    window_start: datetime | None = None
    window_end: datetime | None = None

    def runs(self):
        return Run.objects.filter(schedule_id__in=self.schedule_ids)

    def terminal(self) -> int:
        return self.runs().filter(state__in=TERMINAL_STATES).count()

    def unfinished(self) -> int:
        return self.runs().exclude(state__in=TERMINAL_STATES).count()


class ChaosSystem:
    def __init__(self, processes, redis_server):
        self.processes = processes
        self.redis = redis_server
        self.started = time.monotonic()

    # ------------------------------------------------------------------ processes

    def scanner(self, name: str = "scan", *, failpoints: str = "", batch_size: int | None = None):
        args = ["scan", "--interval", "0.5"] + (["--batch-size", str(batch_size)] if batch_size else [])
        return self.processes.manage(name, *args, SCHEDULER_FAILPOINTS=failpoints, PGAPPNAME=name)

    def relay(self, name: str = "relay"):
        return self.processes.manage(name, "relay", "--interval", "0.2", PGAPPNAME=name)

    def sweeper(self, name: str = "sweep"):
        return self.processes.manage(name, "sweep", "--interval", "0.5", PGAPPNAME=name)

    def worker(self, name: str, *, concurrency: int = 4, solo: bool = False, failpoints: str = ""):
        pool = ["-P", "solo"] if solo else ["-P", "prefork", "-c", str(concurrency)]
        return self.processes.start(
            name,
            [PYTHON, "-m", "celery", "-A", "scheduler_project", "worker", "-Q", "short", *pool,
             "-n", f"{name}@%h", "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "info"],
            SCHEDULER_FAILPOINTS=failpoints, PGAPPNAME=name,
        )

    def start(self, *, workers: int = 2, concurrency: int = 4, scanners: int = 1, relays: int = 1,
              scan_batch: int | None = None) -> None:
        for i in range(scanners):
            self.scanner(f"scan-{i + 1}", batch_size=scan_batch)
        for i in range(relays):
            self.relay(f"relay-{i + 1}")
        self.sweeper()
        for i in range(workers):
            self.worker(f"worker-{i + 1}", concurrency=concurrency)

    def kill(self, name: str) -> None:
        """SIGKILL the process and its children (a Celery worker's pool) at once."""
        self.processes.signal(name, signal.SIGKILL)
        self.processes.children.pop(name).wait()

    def alive(self, name: str) -> bool:
        child = self.processes.children.get(name)
        return child is not None and child.poll() is None

    def open_transactions(self, name: str) -> list[str]:
        """The last statements of the process's database sessions that sit inside a transaction
        holding row locks or writes (an xid); sessions are named after processes by PGAPPNAME."""
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT left(query, 120) FROM pg_stat_activity WHERE datname = current_database()"
                " AND application_name = %s AND state LIKE 'idle in transaction%%'"
                " AND backend_xid IS NOT NULL", [name],
            )
            return [row[0] for row in cursor.fetchall()]

    def stop_inside_transaction(self, name: str, tries: int = 400) -> list[str]:
        """SIGSTOP the process at a moment it holds a transaction open (and so row locks);
        returns the last statements of those transactions."""
        rng = random.Random(tries)
        for _ in range(tries):
            self.processes.signal(name, signal.SIGSTOP)
            time.sleep(0.02)  # a statement already sent completes; the session then waits on us
            held = self.open_transactions(name)
            if held:
                return held
            self.processes.signal(name, signal.SIGCONT)
            time.sleep(rng.uniform(0.0, 0.03))
        raise AssertionError(f"{name} was never caught inside a transaction in {tries} tries")

    def stop_outside_transaction(self, name: str, tries: int = 100) -> None:
        """SIGSTOP the process at a moment it holds no row locks (a pause between calls)."""
        for _ in range(tries):
            self.processes.signal(name, signal.SIGSTOP)
            time.sleep(0.02)
            if not self.open_transactions(name):
                return
            self.processes.signal(name, signal.SIGCONT)
            time.sleep(0.01)
        raise AssertionError(f"{name} was always inside a transaction")

    def worker_label(self, name: str) -> str:
        """The worker_label its attempts carry (workers.tasks: host and the main process id)."""
        return f"celery:{socket.gethostname()}:{self.processes.children[name].pid}"

    def count_in_logs(self, pattern: str, prefix: str = "worker") -> int:
        return len(self.find_in_logs(pattern, prefix))

    def find_in_logs(self, pattern: str, prefix: str) -> list:
        """Every match of ``pattern`` in the logs of processes named ``prefix``..."""
        regex = re.compile(pattern)
        return [
            match
            for path in sorted(self.processes.log_dir.glob(f"{prefix}*.log"))
            for match in regex.findall(path.read_text(errors="replace"))
        ]

    # ------------------------------------------------------------------ load

    def tenant(self, name: str = "chaos"):
        JobType.objects.filter(name="demo.sleep").update(default_lease_seconds=LEASE_SECONDS)
        return make_tenant(name, max_active_runs=1000)

    def burst(self, n: int, *, seconds=(0.2, 1.0), fail_every: int = 0, load: Load | None = None) -> Load:
        """``n`` run-once requests of demo.sleep, each sleeping ``seconds`` (spread evenly);
        every ``fail_every``-th one fails transiently (retried, then failed for good)."""
        load = load or Load(self.tenant())
        schedule, _ = schedule_create(tenant=load.tenant, spec=schedule_spec({
            "name": "burst", "jobType": "demo.sleep", "params": {"seconds": 0},
            "recurrence": {"kind": "cron", "cron": YEARLY}, "overlapPolicy": "allow", "retry": RETRY,
        }))
        load.schedule_ids.append(schedule.id)
        low, high = seconds
        for i in range(n):
            params = {"seconds": round(low + (high - low) * (i % 9) / 8, 3)}
            if fail_every and i % fail_every == fail_every - 1:
                params["fail"] = "transient"
            run, _ = authority.run_once(tenant=load.tenant, schedule_id=schedule.id, params=params)
            load.run_ids.append(run.id)
        return load

    def due_schedules(self, n: int, *, every_seconds: int, backlog: int, seconds=(0.2, 0.8),
                      policies=POLICY_MIX, load: Load | None = None) -> Load:
        """``n`` interval schedules, each ``backlog`` instants overdue (a scheduler outage)."""
        load = load or Load(self.tenant())
        now = authority_now().replace(microsecond=0)
        start = now - timedelta(seconds=every_seconds * backlog)
        rng = random.Random(n)
        for i in range(n):
            body = {
                "name": f"recurring-{i}", "jobType": "demo.sleep",
                "params": {"seconds": round(rng.uniform(*seconds), 3)},
                "recurrence": {"kind": "interval", "everySeconds": every_seconds,
                               "anchor": start.isoformat().replace("+00:00", "Z")},
                "retry": RETRY, **policies[i % len(policies)],
            }
            schedule, _ = schedule_create(tenant=load.tenant, spec=schedule_spec(body))
            load.schedule_ids.append(schedule.id)
            load.recurring_ids.append(schedule.id)
        Schedule.objects.filter(id__in=load.recurring_ids).update(next_run_at=start)
        load.window_start = start
        return load

    # ------------------------------------------------------------------ waiting

    def wait_terminal(self, load: Load, count: int, timeout: float = 60) -> None:
        wait_until(lambda: load.terminal() >= count, timeout=timeout, interval=0.25,
                   message=f"{count} runs to finish")

    def wait_running(self, label: str, count: int = 1, timeout: float = 60) -> list[Attempt]:
        """At least ``count`` attempts of one worker running now; returns them."""
        def running():
            attempts = list(Attempt.objects.filter(worker_label=label, state=AttemptState.RUNNING))
            return attempts if len(attempts) >= count else None

        return wait_until(running, timeout=timeout, interval=0.1, message=f"{count} attempts running on {label}")

    def close_window(self, load: Load, *, scanners=("scan-1",), timeout: float = 30) -> None:
        """End the recurring load now: once the scanners have materialized every instant up to
        this moment, they stop; later instants are not part of the test."""
        end = authority_now()
        wait_until(
            lambda: not Schedule.objects.filter(id__in=load.recurring_ids, next_run_at__lte=end).exists(),
            timeout=timeout, message="the scanners to pass the end of the window",
        )
        for name in scanners:
            self.processes.stop(name)
        load.window_end = end

    def settle(self, load: Load, timeout: float = SETTLE_TIMEOUT) -> None:
        wait_until(lambda: load.unfinished() == 0, timeout=timeout, interval=0.5,
                   message="every run of the load to reach a terminal state")

    # ------------------------------------------------------------------ figures

    def check(self, load: Load) -> InvariantReport:
        window = (load.window_start, load.window_end) if load.recurring_ids else None
        report = check_invariants(schedule_ids=load.schedule_ids, window=window,
                                  recurring_ids=load.recurring_ids, run_ids=load.run_ids)
        report.assert_ok()
        return report

    def stale_rejections(self) -> dict[str, int]:
        """scheduler_stale_fence_rejections_total per operation, summed over every child process."""
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=str(self.processes.metrics_dir))
        counts: dict[str, int] = {}
        for metric in registry.collect():
            if metric.name == "scheduler_stale_fence_rejections":
                for sample in metric.samples:
                    if sample.name.endswith("_total") and sample.value:
                        operation = sample.labels["operation"]
                        counts[operation] = counts.get(operation, 0) + int(sample.value)
        return counts

    def figures(self, scenario: str, report: InvariantReport, *, faults: int, **extra) -> str:
        states = " ".join(f"{state}={n}" for state, n in sorted(report.by_state.items()))
        more = "".join(f" {key}={value}" for key, value in extra.items())
        stale = self.stale_rejections()
        by_operation = ",".join(f"{op}:{n}" for op, n in sorted(stale.items()))
        line = (
            f"chaos[{scenario}] runs={report.runs} ({states}) attempts={report.attempts} faults={faults} "
            f"recovered={report.recovered} stale_rejections={sum(stale.values())}"
            f"{f' ({by_operation})' if stale else ''} "
            f"orphan_uploads={report.orphan_uploads}{more} lost={len(report.lost)} "
            f"duplicates={len(report.duplicates)} elapsed={time.monotonic() - self.started:.1f}s"
        )
        print("\n" + line)
        return line
