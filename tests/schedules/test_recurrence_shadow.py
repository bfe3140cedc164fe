"""Shadow rollout of a recurrence engine: a candidate deliberately different on fold days
(it fires a repeated local time at its second occurrence) is caught at materialization
and by `manage.py recurrence_shadow`, while the builtin engine stays authoritative."""

from datetime import datetime, timezone
from io import StringIO
from zoneinfo import ZoneInfo

import pytest
from django.core.management import call_command
from prometheus_client import REGISTRY

from runs import authority
from schedules.models import Schedule, ShadowDisagreement
from schedules.recurrence import next_after, parse_rule
from schedules.recurrence.shadow import compare_window, croniter_next
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
