"""The v1.2 data migration: each stored cron rule gets the dialect that reproduces the
instants the pre-v1.2 matcher gave it. Checked against that matcher's rule as written in
this test (OR when both day sets miss some value, AND otherwise), walking 50 instants."""

import importlib
from datetime import date, datetime, timedelta, timezone

import pytest
from django.apps import apps

from schedules.models import Schedule, ScheduleRevision
from schedules.recurrence import next_after, parse_rule
from tests.authority_steps import create_schedule
from tests.schedules.test_recurrence_properties import oracle_parse

UTC = timezone.utc
migration = importlib.import_module("schedules.migrations.0014_cron_dialect")


def old_matcher_days(cron: str, start: date, count: int) -> list[date]:
    """The pre-v1.2 day rule: a field covering every value is unrestricted; OR only when both are restricted."""
    spec = oracle_parse(cron)
    either = spec.doms != frozenset(range(1, 32)) and spec.dows != frozenset(range(7))
    days, day = [], start
    while len(days) < count:
        if day.month in spec.months:
            dom, dow = day.day in spec.doms, day.isoweekday() % 7 in spec.dows
            if (dom or dow) if either else (dom and dow):
                days.append(day)
        day += timedelta(days=1)
    return days


CASES = [
    ("0 0 */10 * 5", "or"), ("0 0 1-31 * mon", "and"), ("0 0 1,15 * mon", "vixie"), ("0 0 * * 1-5", "vixie"),
    ("0 0 13 * *", "vixie"), ("0 0 */2 * */2", "or"), ("0 0 1-31 * 0-6", "vixie"), ("0 0 1-7 * 0-7", "and"),
    ("0 0 * * 0-7", "vixie"), ("@weekly", "vixie"), ("0 0 */1 * 1", "vixie"), ("0 0 1-31/2 * 1-5", "vixie"),
]


@pytest.mark.parametrize(("cron", "dialect"), CASES)
def test_the_chosen_dialect_reproduces_the_old_matcher_s_next_50_instants(cron, dialect):
    assert migration.reproducing_dialect(cron) == dialect
    rule = parse_rule({"kind": "cron", "cron": cron, "dialect": dialect})
    expanded = migration._ALIASES.get(cron, cron)
    after, ours = datetime(2026, 1, 1, tzinfo=UTC), []
    for _ in range(50):
        after = next_after(rule, after)
        ours.append(after.date())
    assert ours == [d for d in old_matcher_days(expanded, date(2026, 1, 1), 51) if d > date(2026, 1, 1)][:50]


@pytest.mark.django_db
def test_migration_writes_the_dialect_into_schedules_and_revisions(tenant, capsys):
    rows = {}
    for cron, dialect in [("0 0 */10 * 5", "or"), ("0 0 1-31 * mon", "and"), ("0 9 * * 1-5", "vixie")]:
        schedule = create_schedule(tenant, cron=cron)
        legacy = {"kind": "cron", "cron": cron, "timezone": "UTC"}
        Schedule.objects.filter(id=schedule.id).update(recurrence=legacy)
        revision = ScheduleRevision.objects.get(schedule=schedule)
        ScheduleRevision.objects.filter(id=revision.id).update(payload={**revision.payload, "recurrence": legacy})
        rows[schedule.id] = dialect
    broken = create_schedule(tenant, cron="0 0 * * *")
    Schedule.objects.filter(id=broken.id).update(recurrence={"kind": "cron", "cron": "0 0 L * *", "timezone": "UTC"})

    migration.forwards(apps, None)

    for schedule_id, dialect in rows.items():
        assert Schedule.objects.get(id=schedule_id).recurrence["dialect"] == dialect
        assert ScheduleRevision.objects.get(schedule_id=schedule_id).payload["recurrence"]["dialect"] == dialect
    assert "dialect" not in Schedule.objects.get(id=broken.id).recurrence
    printed = capsys.readouterr().out
    assert f"REPORT schedule {broken.id}" in printed and "1 and" in printed and "1 or" in printed
    migration.forwards(apps, None)  # again: nothing left to do
    assert Schedule.objects.get(id=next(iter(rows))).recurrence["dialect"] == "or"
