"""Materialization and claim throughput of the scheduling authority on PostgreSQL.

    .venv/bin/python bench/authority_throughput.py [--schedules 50000] [--repeat 3] [--scanners 2]

Prints occurrences materialized per second for N schedules due at the same instant (by
--scanners concurrent scanner processes, as `manage.py scan` would run them), and claims
per second (claim_many n=10) and claim+complete jobs per second on one connection.
"""

import argparse
import time
from datetime import timedelta

from _setup import clone_schedule, django_on, median


def make_wave(tenant, n):
    from schedule_services.lifecycle import schedule_create
    from scheduler_project.http.schedule_requests import schedule_spec
    from kernel.clock import authority_now

    template, _ = schedule_create(
        tenant=tenant,
        spec=schedule_spec({"name": "wave", "jobType": "demo.sleep", "params": {"seconds": 0},
                            "recurrence": {"kind": "cron", "cron": "0 9 * * *"}, "overlapPolicy": "allow"}),
    )
    clone_schedule(template, n - 1, authority_now() - timedelta(seconds=1))


def _scan_in_child(_):
    from runs.loops import scan_pass

    return scan_pass().queued


def scan_concurrently(scanners: int) -> int:
    """Fork ``scanners`` processes that each scan until nothing is due; returns runs queued."""
    import multiprocessing

    from django.db import connections

    connections.close_all()  # children must not share the parent's socket
    with multiprocessing.get_context("fork").Pool(scanners) as pool:
        return sum(pool.map(_scan_in_child, range(scanners)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--schedules", type=int, default=50000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--claims", type=int, default=20000)
    parser.add_argument("--scanners", type=int, default=1)
    args = parser.parse_args()
    django_on("scheduler_bench")

    from runs import authority
    from runs.loops import scan_pass
    from runs.models import Run
    from schedules.tenants import tenant_create

    materialize_rates, claim_rates, job_rates = [], [], []
    for i in range(args.repeat):
        django_on("scheduler_bench")
        tenant, _ = tenant_create(name=f"bench-{i}", max_active_runs=10**6)
        make_wave(tenant, args.schedules)
        started = time.perf_counter()
        queued = scan_concurrently(args.scanners) if args.scanners > 1 else scan_pass().queued
        elapsed = time.perf_counter() - started
        assert queued == args.schedules == Run.objects.filter(tenant=tenant).count(), queued
        materialize_rates.append(queued / elapsed)
        print(f"run {i + 1}: {args.scanners} scanner(s) materialized {queued} occurrences in {elapsed:.2f}s "
              f"= {queued / elapsed:,.0f}/s")

        claims = min(args.claims, args.schedules)
        started = time.perf_counter()
        claimed = 0
        while claimed < claims // 2:
            claimed += len(authority.claim_many(n=10, worker_label="bench"))
        elapsed = time.perf_counter() - started
        claim_rates.append(claimed / elapsed)
        print(f"run {i + 1}: claimed {claimed} runs with claim_many(n=10) in {elapsed:.2f}s = {claimed / elapsed:,.0f}/s")

        started = time.perf_counter()
        done = 0
        while done < claims // 2:
            for run in authority.claim_many(n=10, worker_label="bench"):
                authority.complete(run_id=run.id, attempt_id=run.current_attempt.id, fence=run.fence,
                                   outcome="failed", error="bench", retryable=False)
                done += 1
        elapsed = time.perf_counter() - started
        job_rates.append(done / elapsed)
        print(f"run {i + 1}: claim+complete {done} jobs in {elapsed:.2f}s = {done / elapsed:,.0f}/s")
        assert Run.objects.filter(state="running").count() == claimed

    print()
    print(f"median over {args.repeat} runs, {args.schedules:,} schedules due at one instant:")
    print(f"  materialize ({args.scanners} scanner process(es)): {median(materialize_rates):,.0f} occurrences/s")
    print(f"  claim_many(n=10): {median(claim_rates):,.0f} claims/s")
    print(f"  claim_many(n=10) + complete: {median(job_rates):,.0f} jobs/s")


if __name__ == "__main__":
    main()
