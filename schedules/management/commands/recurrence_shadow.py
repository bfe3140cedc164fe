"""manage.py recurrence_shadow: before activating a recurrence engine, compare its next
instants with the active engine's over the coming days for every saved rule."""

from datetime import datetime

from django.core.management.base import BaseCommand, CommandError

from schedules.models import Schedule
from schedules.recurrence import RecurrenceError, parse_rule, render_local
from schedules.recurrence.shadow import compare_window
from schedules.shadow import candidate_named
from kernel.clock import authority_now, instant


class Command(BaseCommand):
    help = ("Compare a candidate recurrence engine's next instants with the active engine's over the next "
            "--days for every saved rule (daylight-saving transitions included); print the mismatches. "
            "Exits 1 when there is any.")

    def add_arguments(self, parser):
        parser.add_argument("--candidate", required=True, help="croniter, or a name in RECURRENCE_CANDIDATES")
        parser.add_argument("--days", type=float, default=31)
        parser.add_argument("--after", help="start from this ISO instant instead of now")

    def handle(self, *args, candidate, days, after, **options):
        try:
            engine = candidate_named(candidate)
            start = datetime.fromisoformat(after.replace("Z", "+00:00")) if after else authority_now()
        except Exception as exc:
            raise CommandError(str(exc)) from exc
        rules = mismatches = 0
        for schedule_id, name, data in Schedule.objects.filter(deleted_at__isnull=True).order_by("id").values_list(
                "id", "name", "recurrence"):
            try:
                rule = parse_rule(data)
            except RecurrenceError:
                continue
            rules += 1
            for m in compare_window(rule, start, days, engine):
                mismatches += 1
                self.stdout.write(
                    f"{schedule_id} {name!r} {rule.kind} {_rule_text(rule)}{rule.timezone}: after {instant(m.after)}"
                    f" active {_shown(rule, m.active)} candidate {_shown(rule, m.candidate)}"
                )
        self.stdout.write(f"{candidate}: {mismatches} mismatches over {rules} rules, {days:g} days from {instant(start)}")
        if mismatches:
            raise SystemExit(1)


def _rule_text(rule) -> str:
    if rule.kind == "cron":
        return f"{rule.cron} (dialect {rule.dialect}) "
    return f"{rule.rrule.text} " if rule.kind == "rrule" else ""


def _shown(rule, at) -> str:
    return "none" if at is None else f"{instant(at)} ({render_local(rule.timezone, at)})"
