import json

from django.core.management.base import BaseCommand, CommandError
from django.db import DEFAULT_DB_ALIAS

from runs.integrity import verify_integrity
from kernel.progress import progress


class Command(BaseCommand):
    help = (
        "Check the scheduler's invariants on this database (and its object store): one occurrence "
        "per instant, one canonical result per succeeded run present in the store, no retained "
        "result deleted, a dispatch row for every queued run, consistent fences. Prints what it "
        "found; exits 1 on any violation."
    )
    # The system checks with the database's own, as migrate runs them: after a restore or a
    # failover, a server without the settings a history needs (runs.checks) is warned about
    # on stderr; warnings change neither the report nor the exit status.
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("--skip-store", action="store_true", help="do not HEAD result objects in the store")
        parser.add_argument("--json", action="store_true", dest="as_json", help="one JSON document instead of text")
        parser.add_argument("--skip-checks", action="store_true", help="skip system checks")

    def handle(self, *args, skip_store, as_json, **options):
        if not options["skip_checks"]:  # call_command skips them unless told
            self.check(databases=[DEFAULT_DB_ALIAS])
        counts, checks = verify_integrity(check_store=not skip_store, progress=_store_progress)
        violated = [check for check in checks if not check.ok]
        if as_json:
            self.stdout.write(_as_json(counts, checks))
        else:
            self.stdout.write("found: " + ", ".join(f"{name}={n}" for name, n in counts.items()))
            for check in checks:
                verdict = "ok" if check.ok else f"VIOLATED {check.violations}"
                self.stdout.write(f"{check.invariant}: {check.checked} checked, {verdict}")
                for example in check.examples:
                    self.stdout.write(f"    {example}")
        if violated:
            raise CommandError(f"{len(violated)} of {len(checks)} invariants violated")


def _store_progress(total: int):
    """A bar on a terminal, log lines otherwise; on stderr, never in the report on stdout."""
    return progress("result objects checked in the store", total=total)


def _as_json(counts: dict, checks) -> str:
    return json.dumps({
        "found": counts,
        "checks": [
            {"invariant": c.invariant, "checked": c.checked, "violations": c.violations, "examples": c.examples}
            for c in checks
        ],
    })
