import argparse

from django.core.management.base import BaseCommand, CommandError

from kernel.startup import require_secrets
from runs.loops import Stopper
from workers.embedded_pool import EmbeddedDispatcher


def parse_pools(text: str) -> dict[str, int]:
    """"short=4,long=1" -> {"short": 4, "long": 1}"""
    pools = {}
    for part in text.split(","):
        name, _, size = part.partition("=")
        pools[name.strip()] = int(size or 1)
    return pools


class Command(BaseCommand):
    help = "Embedded dispatcher (no broker): claim from the database into local worker pools."

    def add_arguments(self, parser):
        parser.add_argument("--pools", default="short=4,long=1,memory=1",
                            help="slots per resource class, e.g. short=4,long=1")
        parser.add_argument("--poll-interval", type=float, default=0.2)
        # Gone: jobs on the dispatcher's own threads could never be stopped at their timeout.
        parser.add_argument("--threads", action="store_true", help=argparse.SUPPRESS)

    def handle(self, *args, pools, poll_interval, threads, **options):
        if threads:
            raise CommandError("--threads is gone: every job runs in a job process, which a hard timeout can end "
                               "(docs/operations.md, 'Worker pools and stuck jobs'); drop the flag")
        require_secrets()
        try:
            pools = parse_pools(pools)
        except ValueError:
            raise CommandError("--pools looks like short=4,long=1")
        self.stdout.write(f"dispatch: pools {pools}")
        # Jobs in job processes, which a hard timeout may end (workers.job_processes): never on
        # the dispatcher's threads, where a job stuck past its timeout could be neither stopped nor ended.
        EmbeddedDispatcher(pools, poll_interval=poll_interval, job_processes=True).run(Stopper())
