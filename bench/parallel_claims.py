"""Claims per second from several claimer processes at once, across several tenants.

    .venv/bin/python bench/parallel_claims.py [--tenants 8] [--claimers 1 2] [--n 1] [--seconds 8] [--repeat 3]

Each claimer process calls claim_many(n) in a loop for --seconds, as a Celery worker's
hints do (n=1); the figure is claims per second summed over the processes. With one
tenant every claim serializes on that tenant's row by design (its active-run limit);
across tenants, claims for different tenants should not wait on each other.
"""

import argparse
import multiprocessing
import time
from datetime import timedelta

from _setup import clone_schedule, django_on, median


def queue_runs(tenants: int, per_tenant: int) -> None:
    from kernel.clock import authority_now
    from runs.loops import scan_pass
    from schedule_services.lifecycle import schedule_create
    from scheduler_project.http.schedule_requests import schedule_spec
    from schedules.tenants import tenant_create

    for i in range(tenants):
        tenant, _ = tenant_create(name=f"claims-{i}", max_active_runs=10**6)
        template, _ = schedule_create(tenant=tenant, spec=schedule_spec({
            "name": "wave", "jobType": "demo.sleep", "params": {"seconds": 0},
            "recurrence": {"kind": "cron", "cron": "0 9 * * *"}, "overlapPolicy": "allow"}))
        clone_schedule(template, per_tenant - 1, authority_now() - timedelta(seconds=1))
    scan_pass()


def _claimer(args):
    n, seconds = args
    from runs import authority

    claimed, stop = 0, time.perf_counter() + seconds
    while time.perf_counter() < stop:
        claimed += len(authority.claim_many(n=n, worker_label="bench"))
    return claimed


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tenants", type=int, default=8)
    parser.add_argument("--claimers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--n", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    django_on("scheduler_bench")
    from django.db import connections

    results = {}
    for claimers in args.claimers:
        rates = []
        for i in range(args.repeat):
            django_on("scheduler_bench")
            # Enough queued runs that no claimer runs dry within --seconds.
            queue_runs(args.tenants, per_tenant=max(500, int(400 * args.seconds * claimers / args.tenants)))
            connections.close_all()  # children must not share the parent's socket
            with multiprocessing.get_context("fork").Pool(claimers) as pool:
                total = sum(pool.map(_claimer, [(args.n, args.seconds)] * claimers))
            rates.append(total / args.seconds)
            print(f"{claimers} claimer(s), run {i + 1}: {total} claims in {args.seconds:.0f}s = {rates[-1]:,.0f}/s")
        results[claimers] = median(rates)
    print()
    print(f"median over {args.repeat} runs, {args.tenants} tenants, claim_many(n={args.n}):")
    for claimers, rate in results.items():
        print(f"  {claimers} claimer process(es): {rate:,.0f} claims/s")


if __name__ == "__main__":
    main()
