"""manage.py import_beat: django-celery-beat's PeriodicTask rows become celery.task schedules."""

from datetime import datetime, timezone

from django.core.management.base import BaseCommand, CommandError

from kernel.clock import authority_now
from kernel.errors import DomainError
from kernel.progress import progress
from schedule_services.beat_import import NEXT_COUNT, RowPlan, apply_import, plan_import
from schedules.beat.rules import rule_text
from schedules.models import Tenant

COLUMNS = ("periodic task", "task", "beat rule", "new rule", f"beat: next {NEXT_COUNT}",
           f"ours: next {NEXT_COUNT}", "status")


class Command(BaseCommand):
    help = ("Import django-celery-beat's PeriodicTask rows as schedules of the celery.task job type "
            "(idempotent: rows imported before are left alone).")

    def add_arguments(self, parser):
        parser.add_argument("--dry-run", action="store_true", help="print the table; write nothing")
        parser.add_argument("--tenant", help="tenant name or id (default: the only tenant)")
        parser.add_argument("--disable-beat", action="store_true",
                            help="set the imported rows enabled=False in the import's transaction")
        parser.add_argument("--after", help="with --dry-run: show instants after this ISO instant instead of now")

    def handle(self, *args, **options):
        tenant = _tenant(options["tenant"])
        now = _after(options["after"], options["dry_run"])
        plans = plan_import(tenant, now, progress=_planning_progress)
        added = []
        if not options["dry_run"]:
            try:
                added = apply_import(tenant, plans, disable_beat=options["disable_beat"])
            except DomainError as exc:
                raise CommandError(f"nothing imported: {exc.message}") from exc
        self.stdout.write(render_table(plans))
        self.stdout.write("")
        self.stdout.write(_summary(plans, tenant, options, added))


def _planning_progress(total: int):
    """A bar on a terminal, log lines otherwise; on stderr, never in the table on stdout."""
    return progress("periodic tasks planned", total=total)


def _tenant(given: str | None) -> Tenant:
    if given:
        tenant = Tenant.objects.filter(name=given).first() or Tenant.objects.filter(id=given).first()
        if tenant is None:
            raise CommandError(f"no tenant named {given!r}")
        return tenant
    tenants = list(Tenant.objects.order_by("name")[:2])
    if len(tenants) != 1:
        raise CommandError("name the tenant the schedules belong to with --tenant" if tenants
                           else "no tenant yet: create one with manage.py create_tenant")
    return tenants[0]


def _after(given: str | None, dry_run: bool) -> datetime:
    if given is None:
        return authority_now()
    if not dry_run:
        raise CommandError("--after only goes with --dry-run: an import starts from now")
    try:
        after = datetime.fromisoformat(given)
    except ValueError:
        raise CommandError(f"--after {given!r} is not an ISO 8601 instant") from None
    if after.utcoffset() is None:
        raise CommandError("--after needs a UTC offset or Z")
    return after


def _summary(plans: list[RowPlan], tenant: Tenant, options: dict, added: list[str]) -> str:
    counts: dict[str, int] = {}
    for plan in plans:
        counts[plan.status] = counts.get(plan.status, 0) + 1
    head = "dry run, nothing written" if options["dry_run"] else f"tenant {tenant.name}"
    lines = [f"{head}: " + (", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "no rows")]
    if options["dry_run"]:
        lines.append("import rows marked 'import' by running without --dry-run")
    else:
        if added:
            lines.append(f"allowlist of {tenant.name}: added {', '.join(added)}")
        if options["disable_beat"] and counts.get("imported"):
            lines.append("imported rows are now disabled in beat (enabled=False)")
    return "\n".join(lines)


def render_table(plans: list[RowPlan]) -> str:
    """One block per row, cells of several lines side by side, then the row's notes under it."""
    rows = [[[column] for column in COLUMNS]] + [_cells(plan) for plan in plans]
    widths = [max(len(line) for row in rows for line in row[i]) for i in range(len(COLUMNS))]
    out = []
    for index, (row, plan) in enumerate(zip(rows, [None, *plans])):
        for depth in range(max(len(cell) for cell in row)):
            out.append("  ".join((cell[depth] if depth < len(cell) else "").ljust(width)
                                 for cell, width in zip(row, widths)).rstrip())
        if plan is not None:
            out += [f"    - {note}" for note in _notes(plan)]
        if index == 0:
            out.append("  ".join("-" * width for width in widths))
    return "\n".join(out)


def _cells(plan: RowPlan) -> list[list[str]]:
    translation = plan.translation
    new_rule = rule_text(translation.rule) if translation and translation.rule else "-"
    status = plan.status + (f" {plan.schedule_id}" if plan.schedule_id else "")
    if translation and translation.day_rule:
        status += f" (day rule {translation.day_rule})"
    return [[plan.name], [plan.task], [plan.beat_rule or "-"], [new_rule],
            [_iso(at) for at in plan.beat_next] or ["-"], [_iso(at) for at in plan.ours_next] or ["-"], [status]]


def _notes(plan: RowPlan) -> list[str]:
    return ([plan.reason] if plan.reason else []) + plan.notes


def _iso(instant: datetime) -> str:
    return instant.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")
