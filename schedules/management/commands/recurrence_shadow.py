"""manage.py recurrence_shadow: before activating a recurrence engine, compare its next
instants with the active engine's over the coming days for every saved rule, each read as
the scanner reads it (in its schedule's window, under its calendars)."""

from datetime import datetime

from django.core.management.base import BaseCommand, CommandError

from kernel.clock import authority_now, instant
from schedules.calendars import calendar_days_for, stored_rule
from schedules.models import Schedule
from schedules.recurrence import render_local
from schedules.recurrence.shadow_candidates import compare_window
from schedules.shadow_mode import candidate_named


class Command(BaseCommand):
    help = ("Compare a candidate recurrence engine's next instants with the active engine's over the next "
            "--days for every saved rule (daylight-saving transitions included); print the mismatches. "
            "Exits 1 when there is any.")

    def add_arguments(self, parser):
        parser.add_argument("--candidate", required=True, help="croniter, dateutil, business_days, or a name in RECURRENCE_CANDIDATES")
        parser.add_argument("--days", type=float, default=31)
        parser.add_argument("--after", help="start from this ISO instant instead of now")

    def handle(self, *args, candidate, days, after, **options):
        try:
            engine = candidate_named(candidate)
            start = datetime.fromisoformat(after.replace("Z", "+00:00")) if after else authority_now()
        except Exception as exc:
            raise CommandError(str(exc)) from exc
        rules = mismatches = 0
        calendars = {}  # (tenant, calendar ids) -> their exclusions, read once
        schedules = Schedule.objects.filter(deleted_at__isnull=True).order_by("id").only(
            "id", "tenant_id", "name", "recurrence", "created_at", "calendar", "active_from", "active_until")
        for schedule in schedules.iterator(chunk_size=1000):
            # Read as the scanner reads it: in its window, under its calendars.
            rule = stored_rule(schedule)
            if rule is None:
                continue
            refs = rule.calendar_refs()
            if refs:
                if (schedule.tenant_id, refs) not in calendars:
                    calendars[schedule.tenant_id, refs] = calendar_days_for(refs, tenant_id=schedule.tenant_id)
                rule = rule.bound(calendars[schedule.tenant_id, refs])
            rules += 1
            for m in compare_window(rule, start, days, engine):
                mismatches += 1
                self.stdout.write(
                    f"{schedule.id} {schedule.name!r} {rule.kind} {_rule_text(rule)}{rule.timezone}"
                    f"{_calendar_text(rule)}: after {instant(m.after)}"
                    f" active {_shown(rule, m.active)} candidate {_shown(rule, m.candidate)}"
                )
        self.stdout.write(f"{candidate}: {mismatches} mismatches over {rules} rules, {days:g} days from {instant(start)}")
        if mismatches:
            raise SystemExit(1)


def _rule_text(rule) -> str:
    if rule.kind == "cron":
        return f"{rule.cron} (dialect {rule.dialect}) "
    if rule.kind == "business_day":
        return f"days {','.join(str(n) for n in rule.days)} at {rule.at_time:%H:%M:%S} "
    return f"{rule.rrule.text} " if rule.kind == "rrule" else ""


def _calendar_text(rule) -> str:
    if not rule.calendar_ids:
        return ""
    return f" calendars {','.join(rule.calendar_ids)} ({rule.calendar_policy})"


def _shown(rule, at) -> str:
    return "none" if at is None else f"{instant(at)} ({render_local(rule.timezone, at)})"
