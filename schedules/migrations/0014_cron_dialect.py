"""Every stored cron rule gets the `dialect` that reproduces its instants (API v1.2).

Before v1.2 the matcher ORed the two day fields when both were restricted and ANDed them
otherwise, "restricted" meaning "does not admit every value" (so `1-31` was unrestricted
and `*/10` restricted). The frozen copy below reads a rule that way and compares its
matching days with each dialect's. The day fields only meet through (month, day of month,
day of week), and every such triple that exists occurs in some year (Feb 29 included), so
equal predicates over all triples mean equal instants for ever: the comparison is exact,
not a sample. Minutes, hours, months and the DST policy did not change. The first of
vixie (the default), and, or that matches is stored; a rule none reproduces (or that no
longer parses) keeps what it has and is printed. Revisions' payloads get the same dialect.
"""

import re

from django.db import migrations

DIALECTS = ("vixie", "and", "or")
_MONTHS = {name: i for i, name in enumerate("jan feb mar apr may jun jul aug sep oct nov dec".split(), 1)}
_DOWS = {name: i for i, name in enumerate("sun mon tue wed thu fri sat".split())}
_ALIASES = {"@hourly": "0 * * * *", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@weekly": "0 0 * * 0",
            "@monthly": "0 0 1 * *", "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *"}
_ITEM = re.compile(r"(?:(\*)|([0-9]{1,2}|[a-z]{3})(?:-([0-9]{1,2}|[a-z]{3}))?)(?:/([0-9]{1,2}))?", re.ASCII)
_LONGEST = (0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _expand(text, low, high, names):
    values = set()
    for item in text.split(","):
        match = _ITEM.fullmatch(item)
        if match is None:
            raise ValueError(item)
        if match[1]:
            start, end = low, high
        else:
            start = int(match[2]) if match[2].isdigit() else names[match[2]]
            end = start if match[3] is None else (int(match[3]) if match[3].isdigit() else names[match[3]])
        values.update(range(start, end + 1, int(match[4] or 1)))
    return values


def day_predicates(cron):
    """{name: (month, day, weekday) -> bool} for the pre-v1.2 matcher ("old") and each dialect."""
    text = _ALIASES.get(cron, cron)
    parts = text.split()
    if len(parts) != 5:
        raise ValueError(cron)
    doms = _expand(parts[2], 1, 31, {})
    months = _expand(parts[3], 1, 12, _MONTHS)
    dows = {d % 7 for d in _expand(parts[4], 0, 7, _DOWS)}
    old_or = len(doms) < 31 and len(dows) < 7

    def predicate(either):
        def matches(month, day, weekday):
            if month not in months:
                return False
            return (day in doms or weekday in dows) if either else (day in doms and weekday in dows)
        return matches

    dom_text, dow_text = parts[2], parts[4]
    return {
        "old": predicate(old_or),
        "vixie": predicate(not dom_text.startswith("*") and not dow_text.startswith("*")),
        "and": predicate(False),
        "or": predicate(dom_text != "*" and dow_text != "*"),
    }


def reproducing_dialect(cron):
    """The first dialect whose days are the old matcher's, or None."""
    predicates = day_predicates(cron)
    triples = [(m, d, w) for m in range(1, 13) for d in range(1, _LONGEST[m] + 1) for w in range(7)]
    old = [predicates["old"](*t) for t in triples]
    for dialect in DIALECTS:
        if [predicates[dialect](*t) for t in triples] == old:
            return dialect
    return None


def _dialected(recurrence, chosen, reported, label):
    if not isinstance(recurrence, dict) or recurrence.get("kind") != "cron" or "dialect" in recurrence:
        return None
    cron = recurrence.get("cron")
    if cron not in chosen:
        try:
            chosen[cron] = reproducing_dialect(cron.strip().lower())
        except (ValueError, KeyError, AttributeError):
            chosen[cron] = None
    if chosen[cron] is None:
        reported.append(f"{label}: cron {cron!r}: no dialect reproduces its instants; left without one (vixie)")
        return None
    return {**recurrence, "dialect": chosen[cron]}


def forwards(apps, schema_editor):
    Schedule = apps.get_model("schedules", "Schedule")
    ScheduleRevision = apps.get_model("schedules", "ScheduleRevision")
    chosen, reported, counts = {}, [], {}
    for schedule in Schedule.objects.filter(recurrence__kind="cron").only("id", "recurrence").iterator():
        recurrence = _dialected(schedule.recurrence, chosen, reported, f"schedule {schedule.id}")
        if recurrence is not None:
            counts[recurrence["dialect"]] = counts.get(recurrence["dialect"], 0) + 1
            Schedule.objects.filter(id=schedule.id).update(recurrence=recurrence)
    for revision in ScheduleRevision.objects.filter(payload__recurrence__kind="cron").only(
            "id", "schedule_id", "revision", "payload").iterator():
        label = f"schedule {revision.schedule_id} revision {revision.revision}"
        recurrence = _dialected(revision.payload.get("recurrence"), chosen, reported, label)
        if recurrence is not None:
            ScheduleRevision.objects.filter(id=revision.id).update(payload={**revision.payload, "recurrence": recurrence})
    if counts or reported:
        print(f"\n  cron dialects given: {', '.join(f'{n} {d}' for d, n in sorted(counts.items())) or 'none'}")
    for line in reported:
        print(f"  REPORT {line}")


class Migration(migrations.Migration):
    dependencies = [("schedules", "0013_pauses_labels_bulk_actions_audit")]
    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
