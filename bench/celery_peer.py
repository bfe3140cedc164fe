"""Plain Celery, no scheduler: the peer that bench/burst.py measures in the same run.

A no-op task on the same worker shape as the product's (prefork, acks_late, prefetch 1,
reject on worker lost), started with `celery -A celery_peer worker -Q peer` from bench/.
Each task records when it started in a Redis list, the only bookkeeping it does.
"""

import os
import time

import redis
from celery import Celery

BROKER_URL = os.environ.get("PEER_REDIS_URL", "redis://127.0.0.1:6379/12")
STARTED = "peer:started"

app = Celery("celery_peer", broker=BROKER_URL)
app.conf.update(
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
    task_ignore_result=True,
    task_default_queue="peer",
)
_client = None


@app.task(name="peer.noop")
def noop(index: int) -> None:
    global _client
    started = time.time()
    _client = _client or redis.Redis.from_url(BROKER_URL)
    _client.rpush(STARTED, f"{index} {started}")


def run_peer(n: int, *, workers: int, concurrency: int, log_dir, timeout: float = 600, pool: str = "prefork") -> dict:
    """Publish ``n`` no-op tasks at one instant to ``workers`` x ``concurrency`` slots of
    Celery's ``pool``; returns completed tasks/s and start lateness p50/p99 against that instant."""
    import subprocess
    import sys
    from pathlib import Path

    client = redis.Redis.from_url(BROKER_URL)
    client.flushdb()
    here = Path(__file__).resolve().parent
    # Plain Celery: without DJANGO_SETTINGS_MODULE, Celery's Django fix-up stays out of it.
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "celery_peer", "worker", "-Q", "peer", "-c", str(concurrency),
             "-P", pool, "-n", f"peer{i}@%h", "--without-gossip", "--without-mingle", "-l", "warning"],
            cwd=here, env=env, stdout=open(Path(log_dir) / f"peer{i}.log", "w"), stderr=subprocess.STDOUT,
        )
        for i in range(workers)
    ]
    try:
        time.sleep(3)  # workers up before the instant, as the product's are
        due = time.time()
        with app.producer_or_acquire() as producer:
            for i in range(n):
                noop.apply_async((i,), producer=producer)
        deadline = time.monotonic() + timeout
        while client.llen(STARTED) < n:
            if time.monotonic() > deadline:
                raise SystemExit("the plain Celery peer did not finish in time")
            time.sleep(0.1)
        finished = time.time()
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait()
    lateness = sorted(float(item.split()[1]) - due for item in (x.decode() for x in client.lrange(STARTED, 0, -1)))
    return {
        "rate": n / (finished - due),
        "p50": lateness[len(lateness) // 2],
        "p99": lateness[min(len(lateness) - 1, round(0.99 * (len(lateness) - 1)))],
    }
