"""Shadow rollout of a recurrence engine: a candidate deliberately different on fold days
(it fires a repeated local time at its second occurrence) is caught at materialization
and by `manage.py recurrence_shadow`, while the builtin engine stays authoritative."""

from datetime import date, datetime, timedelta, timezone
from io import StringIO
from zoneinfo import ZoneInfo

import pytest
from django.core.management import call_command
from prometheus_client import REGISTRY

from runs import authority
from schedules.models import Schedule, ShadowDisagreement
from schedules.recurrence import next_after, parse_rule
from schedules.recurrence.calendars import CalendarDays
from schedules.recurrence.shadow_candidates import business_days_next, compare_window, croniter_next
from tests.authority_steps import create_schedule, make_due

UTC = timezone.utc
FALL_BACK_2027 = "30 1 7 11 *"  # 2027-11-07 01:30 happens twice in New York
NEW_YORK = "America/New_York"
METRIC = "scheduler_recurrence_shadow_disagreements_total"
FOLDY = "tests.schedules.test_recurrence_shadow.fold_day_candidate"


def fold_day_candidate(rule, after):
    """The builtin engine, except that a repeated local time fires at its second occurrence."""
    active = next_after(rule, after)
    if active is None or rule.kind != "cron":
        return active
    local = active.astimezone(ZoneInfo(rule.timezone))
    second = local.replace(fold=1)
    return second.astimezone(UTC) if second.utcoffset() != local.utcoffset() else active


def hour_late_business_days(rule, after):
    """The business_days candidate, an hour late: every business_day rule disagrees."""
    found = business_days_next(rule, after - timedelta(hours=1))
    return found if found in (None, NotImplemented) else found + timedelta(hours=1)


def cron(text: str, zone: str = "UTC"):
    return parse_rule({"kind": "cron", "cron": text, "timezone": zone})


def test_compare_window__fold_day_candidate__differs_on_the_fold_day_only():
    start = datetime(2027, 10, 20, tzinfo=UTC)
    mismatches = compare_window(cron("30 1 * * *", NEW_YORK), start, 31, fold_day_candidate)
    assert [(m.active, m.candidate) for m in mismatches] == [
        (datetime(2027, 11, 7, 5, 30, tzinfo=UTC), datetime(2027, 11, 7, 6, 30, tzinfo=UTC))
    ]
    # Spring forward is a gap, not a fold: the candidate agrees there.
    assert compare_window(cron("30 2 * * *", NEW_YORK), datetime(2027, 3, 1, tzinfo=UTC), 31,
                          fold_day_candidate) == []


def test_compare_window__croniter__agrees_on_plain_utc_rules():
    for text in ("*/5 * * * *", "0 9 * * 1-5", "15 3 1 * *"):
        assert compare_window(cron(text), datetime(2027, 1, 1, tzinfo=UTC), 31, croniter_next) == []


@pytest.mark.django_db
def test_shadow_mode__materialization_records_the_disagreement__builtin_stays_authoritative(tenant, settings,
                                                                                            admin_client):
    settings.RECURRENCE_ENGINE = "shadow:foldy"
    settings.RECURRENCE_CANDIDATES = {"foldy": FOLDY}
    fold = create_schedule(tenant, name="fold", cron=FALL_BACK_2027, zone=NEW_YORK)
    plain = create_schedule(tenant, name="plain", cron="0 12 * * *")
    make_due(fold)
    make_due(plain)
    counted = REGISTRY.get_sample_value(METRIC, {"candidate": "foldy"}) or 0

    assert authority.materialize_due().queued == 2

    found = list(ShadowDisagreement.objects.values_list("schedule_id", "candidate", "active_next", "candidate_next"))
    assert found == [(fold.id, "foldy", datetime(2027, 11, 7, 5, 30, tzinfo=UTC),
                      datetime(2027, 11, 7, 6, 30, tzinfo=UTC))]
    assert Schedule.objects.get(id=fold.id).next_run_at == datetime(2027, 11, 7, 5, 30, tzinfo=UTC)
    assert REGISTRY.get_sample_value(METRIC, {"candidate": "foldy"}) == counted + 1
    page = admin_client.get("/admin/schedules/shadowdisagreement/")
    assert page.status_code == 200 and fold.id in page.content.decode()


@pytest.mark.django_db
def test_builtin_engine__nothing_compared(tenant, settings):
    settings.RECURRENCE_ENGINE = "builtin"
    make_due(create_schedule(tenant, cron=FALL_BACK_2027))
    authority.materialize_due()
    assert not ShadowDisagreement.objects.exists()


@pytest.mark.django_db
def test_recurrence_shadow_command__prints_the_fold_day_mismatch(tenant, settings):
    settings.RECURRENCE_CANDIDATES = {"foldy": FOLDY}
    schedule = create_schedule(tenant, name="nightly", cron="30 1 * * *", zone=NEW_YORK)
    create_schedule(tenant, name="noon", cron="0 12 * * *")
    out = StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("recurrence_shadow", "--candidate", "foldy", "--days", "31",
                     "--after", "2027-10-20T00:00:00Z", stdout=out)
    assert exited.value.code == 1
    lines = out.getvalue().splitlines()
    assert len(lines) == 2, lines
    assert schedule.id in lines[0] and "2027-11-07T05:30:00Z" in lines[0] and "2027-11-07T06:30:00Z" in lines[0]
    assert lines[1].startswith("foldy: 1 mismatches over 2 rules")

    out = StringIO()
    call_command("recurrence_shadow", "--candidate", "foldy", "--days", "31", "--after", "2027-01-01T00:00:00Z",
                 stdout=out)  # no fold day in January: exits normally
    assert "foldy: 0 mismatches over 2 rules" in out.getvalue()


# Calendar rules: the candidate expands the rule, the shared calendar layer applies the policy.


def _under(rule, policy: str, *, dates=(), annual=(), weekdays=(), zone: str = "UTC"):
    days = CalendarDays("cal_test", ZoneInfo(zone), frozenset(dates), frozenset(annual), frozenset(weekdays))
    return rule.calendared(["cal_test"], policy).bound({"cal_test": days})


@pytest.mark.parametrize("policy", ["skip", "shift_before", "shift_after"])
def test_compare_window__calendar_rule__the_candidate_has_an_opinion(policy):
    """A candidate expanding the rule differently (the fold day) disagrees under every policy;
    one expanding it alike (croniter) agrees on every kept and moved instant."""
    nightly = _under(cron("30 1 * * *", NEW_YORK), policy, dates={date(2027, 11, 6), date(2027, 11, 9)})
    mismatches = compare_window(nightly, datetime(2027, 10, 20, tzinfo=UTC), 31, fold_day_candidate)
    second_fold = datetime(2027, 11, 7, 6, 30, tzinfo=UTC)
    assert (mismatches[0].active, mismatches[0].candidate) == (datetime(2027, 11, 7, 5, 30, tzinfo=UTC), second_fold)
    # Shifting after, the walk back for instants moved into the range meets the fold day again.
    assert {m.candidate for m in mismatches} == {second_fold}
    workdays = _under(cron("0 9 * * *"), policy, dates={date(2027, 1, 5)}, weekdays={6, 7})
    assert compare_window(workdays, datetime(2027, 1, 1, tzinfo=UTC), 62, croniter_next) == []


def test_compare_window__calendar_rule__a_candidate_without_opinion_on_the_rule_has_none():
    hourly = _under(parse_rule({"kind": "interval", "everySeconds": 3600, "anchor": "2027-01-01T00:00:00Z"}),
                    "shift_after", dates={date(2027, 1, 2)})
    assert compare_window(hourly, datetime(2027, 1, 1, tzinfo=UTC), 5, croniter_next) == []


def _business_day(days, at: str, zone: str, policy_dates=(), **calendar):
    rule = parse_rule({"kind": "business_day", "days": days, "at": at, "timezone": zone, "calendarIds": ["cal_b"]})
    excluded = CalendarDays("cal_b", ZoneInfo(calendar.pop("calendar_zone", zone)), **calendar)
    return rule.bound({"cal_b": excluded})


@pytest.mark.parametrize("days, at, zone, calendar", [
    ([1, -1], "17:00", NEW_YORK, {"annual": frozenset({(12, 25), (1, 1), (7, 4)})}),
    ([3, -2, 23, -23], "09:30", "Europe/London", {"dates": frozenset({date(2027, 5, 3), date(2028, 8, 28)})}),
    ([1, 2, -1], "00:30", "Asia/Tehran", {}),  # 2021-2022: DST began at midnight on weekdays
    ([-1], "00:15", "Africa/Cairo", {"weekdays": frozenset({5})}),  # Cairo moves its clocks on Fridays
    ([5], "12:00", "Pacific/Apia", {"calendar_zone": "UTC", "dates": frozenset({date(2011, 12, 8)})}),
])
def test_business_days_candidate__agrees_with_the_builtin_engine(days, at, zone, calendar):
    rule = _business_day(days, at, zone, **calendar)
    assert compare_window(rule, datetime(2011, 1, 1, tzinfo=UTC), 366 * 2, business_days_next) == []
    assert compare_window(rule, datetime(2021, 1, 1, tzinfo=UTC), 366 * 4, business_days_next) == []


@pytest.mark.parametrize("zone", ["America/New_York", "Etc/GMT+12", "Pacific/Kiritimati", "UTC"])
def test_business_days_candidate__agrees_at_the_edges_of_the_calendar(zone):
    """The last local hours of 9999 lie past datetime's range: their business days still
    count (in New York the third last of December 9999 is the 29th), they never fire."""
    for days in ([-1, 1], [-3, 5], [23], [-23]):
        rule = _business_day(days, "23:30", zone)
        assert compare_window(rule, datetime(9999, 6, 1, tzinfo=UTC), 200, business_days_next) == [], days
        assert compare_window(rule, datetime(1, 1, 1, tzinfo=UTC), 100, business_days_next) == [], days
    if zone == "America/New_York":
        third_last = _business_day([-3], "23:30", zone)
        assert next_after(third_last, datetime(9999, 12, 8, tzinfo=UTC)) == datetime(9999, 12, 30, 4, 30, tzinfo=UTC)


def test_business_days_candidate__no_opinion_on_other_kinds_and_croniter_none_on_business_days():
    assert business_days_next(cron("0 9 * * *"), datetime(2027, 1, 1, tzinfo=UTC)) is NotImplemented
    rule = _business_day([1], "09:00", "UTC")
    assert compare_window(rule, datetime(2027, 1, 1, tzinfo=UTC), 90, croniter_next) == []


@pytest.mark.django_db
def test_shadow_mode__a_schedule_under_a_calendar_is_compared_too(tenant, settings):
    from schedule_services.calendars import calendar_create

    settings.RECURRENCE_ENGINE = "shadow:foldy"
    settings.RECURRENCE_CANDIDATES = {"foldy": FOLDY}
    holiday = calendar_create(tenant=tenant, fields={"name": "holiday", "exclude_dates": ["2027-11-06"]})
    fold = create_schedule(tenant, name="fold", cron="30 1 6,7 11 *", zone=NEW_YORK,
                           calendar={"calendarIds": [holiday.id], "policy": "skip"})
    make_due(fold)

    authority.materialize_due()

    # The 6th is skipped by the calendar; the candidate fires the 7th at its second 01:30.
    assert list(ShadowDisagreement.objects.values_list("schedule_id", "active_next", "candidate_next")) == [
        (fold.id, datetime(2027, 11, 7, 5, 30, tzinfo=UTC), datetime(2027, 11, 7, 6, 30, tzinfo=UTC))]


@pytest.mark.django_db
def test_recurrence_shadow_command__reads_each_schedule_under_its_calendars(tenant, settings):
    from schedule_services.calendars import calendar_create

    settings.RECURRENCE_CANDIDATES = {"foldy": FOLDY}
    fold_day = calendar_create(tenant=tenant, fields={"name": "fold day", "timezone": NEW_YORK,
                                                      "exclude_dates": ["2027-11-07"]})
    create_schedule(tenant, name="nightly", cron="30 1 * * *", zone=NEW_YORK,
                    calendar={"calendarIds": [fold_day.id], "policy": "skip"})
    create_schedule(tenant, name="month end", recurrence={
        "kind": "business_day", "days": [-1], "at": "17:00", "timezone": NEW_YORK, "calendarIds": [fold_day.id]})
    out = StringIO()
    call_command("recurrence_shadow", "--candidate", "foldy", "--days", "31", "--after", "2027-10-20T00:00:00Z",
                 stdout=out)  # the fold day is skipped by the nightly's calendar: nothing differs
    assert "foldy: 0 mismatches over 2 rules" in out.getvalue()
    out = StringIO()
    call_command("recurrence_shadow", "--candidate", "business_days", "--days", "400",
                 "--after", "2027-01-01T00:00:00Z", stdout=out)
    assert "business_days: 0 mismatches over 2 rules" in out.getvalue()


@pytest.mark.django_db
def test_recurrence_shadow_command__names_the_business_day_rule_and_its_calendars(tenant, settings):
    from schedule_services.calendars import calendar_create

    settings.RECURRENCE_CANDIDATES = {"late": "tests.schedules.test_recurrence_shadow.hour_late_business_days"}
    closures = calendar_create(tenant=tenant, fields={"name": "closures", "exclude_dates": ["2027-03-31"]})
    schedule = create_schedule(tenant, name="month end", recurrence={
        "kind": "business_day", "days": [-1], "at": "17:00", "timezone": NEW_YORK, "calendarIds": [closures.id]},
        calendar={"calendarIds": [closures.id], "policy": "skip"})
    out = StringIO()
    with pytest.raises(SystemExit):
        call_command("recurrence_shadow", "--candidate", "late", "--days", "40", "--after", "2027-03-01T00:00:00Z",
                     stdout=out)
    first = out.getvalue().splitlines()[0]
    assert first.startswith(f"{schedule.id} 'month end' business_day days -1 at 17:00:00 America/New_York")
    assert f"calendars {closures.id} (skip)" in first
    # The last business day of March 2027 is the 30th: the closures calendar takes the 31st.
    assert "active 2027-03-30T21:00:00Z" in first and "candidate 2027-03-30T22:00:00Z" in first
