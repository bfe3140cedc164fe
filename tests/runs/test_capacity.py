"""Runtime statistics, live slots, the rules' demand and the forecast, on PostgreSQL."""

from collections import Counter
from datetime import datetime, timedelta, timezone

import pytest

from kernel.clock import authority_now
from runs.capacity.demand import occurrences_due
from runs.capacity.forecast import forecast
from runs.capacity.live import capacity_by_class, live_slots, slots_report, slots_withdraw
from runs.capacity.statistics import job_type_statistics
from runs.models import Attempt, Run, RunState, WorkerSlots
from schedules.models import Schedule
from tests.authority_steps import create_schedule, succeeded_run

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("file_objects")]

UTC = timezone.utc


def _timed(run: Run, *, seconds: float, delay: float) -> None:
    """The run's accepted attempt took `seconds` and was claimed `delay` after its due time."""
    started = authority_now() - timedelta(minutes=5)
    Attempt.objects.filter(id=run.accepted_attempt_id).update(
        started_at=started, finished_at=started + timedelta(seconds=seconds))
    Run.objects.filter(id=run.id).update(due_at=started - timedelta(seconds=delay))


def test_statistics__percentiles_of_accepted_attempts_duration_and_queue_delay(tenant):
    for seconds, delay in ((1, 0.5), (2, 1), (10, 4)):
        _timed(succeeded_run(tenant), seconds=seconds, delay=delay)
    stats = job_type_statistics("report.sales")
    assert stats.samples == 3
    assert stats.duration == {"p50": 2, "p95": 10, "p99": 10, "mean": pytest.approx(13 / 3, abs=1e-3)}
    assert stats.queue_delay == {"p50": 1, "p95": 4, "p99": 4, "mean": pytest.approx(5.5 / 3, abs=1e-3)}
    assert stats.expected_duration() == pytest.approx(13 / 3, abs=1e-3)


def test_statistics__window_excludes_old_attempts_and_default_applies_without_history(tenant, settings):
    run = succeeded_run(tenant)
    Run.objects.filter(id=run.id).update(finished_at=authority_now() - timedelta(days=8))
    stats = job_type_statistics("report.sales")
    assert stats.samples == 0 and stats.duration["p50"] is None
    settings.CAPACITY_DEFAULT_DURATION_SECONDS = 7
    assert stats.expected_duration() == 7


def test_live_slots__reports_sum_per_class_expire_and_withdraw(db):
    slots_report("celery:a:1", {"short": 8})
    slots_report("embedded:b:2", {"short": 4, "long": 2})
    assert live_slots() == {"short": 12, "long": 2}
    slots_report("embedded:b:2", {"short": 4})  # a class it no longer serves stops counting
    assert live_slots() == {"short": 12}
    WorkerSlots.objects.filter(process="celery:a:1").update(expires_at=authority_now() - timedelta(seconds=1))
    assert live_slots() == {"short": 4}  # silent past its TTL: presumed dead
    slots_withdraw("embedded:b:2")
    assert capacity_by_class()["short"] == {"liveSlots": 0, "busySlots": 0, "freeSlots": 0, "processes": 0}


def test_demand__shared_rules_counted_once_per_instant_without_materializing(tenant):
    for n in range(3):
        create_schedule(tenant, cron="0 9 * * *", name=f"daily-{n}")
    create_schedule(tenant, cron="*/30 * * * *", name="half-hourly")
    paused = create_schedule(tenant, cron="0 9 * * *", name="paused")
    Schedule.objects.filter(id=paused.id).update(paused=True, next_run_at=None)
    start = datetime(2030, 1, 7, 8, 0, tzinfo=UTC)
    due = occurrences_due(start, start + timedelta(hours=2))
    counts = sorted((d.at.strftime("%H:%M"), d.count) for d in due)
    assert counts == [("08:00", 1), ("08:30", 1), ("09:00", 1), ("09:00", 3), ("09:30", 1)]
    assert not Run.objects.exists()


def test_demand__jitter_spreads_a_schedule_within_its_bound(tenant):
    schedule = create_schedule(tenant, cron="* * * * *", name="jittery", jitterSeconds=30)
    start = datetime(2030, 1, 7, 8, 0, tzinfo=UTC)
    due = occurrences_due(start, start + timedelta(hours=1))
    offsets = [d.at.second for d in due]
    assert len(due) == 60 and all(0 <= s <= 30 for s in offsets) and len(set(offsets)) > 5
    assert schedule.jitter_seconds == 30


def test_demand__dense_jitter__its_rules_instants_shifted_by_half__walked_once(tenant):
    """Schedules due every 10 s with a minute of jitter (their draws overlap) count as their
    rule's instants each 30 s later: the same occurrences per minute, the rule walked once
    for all of them, not drawn schedule by schedule. A schedule whose instants are farther
    apart than its jitter is still drawn occurrence by occurrence."""
    from runs.capacity.demand import Budget

    anchor = "2030-01-07T00:00:00Z"
    dense = [create_schedule(tenant, name=f"dense-{n}", jitterSeconds=60,
                             recurrence={"kind": "interval", "everySeconds": 10, "anchor": anchor})
             for n in range(50)]
    sparse = create_schedule(tenant, cron="*/5 * * * *", name="sparse", jitterSeconds=60)
    start = datetime(2030, 1, 7, 8, 0, tzinfo=UTC)
    budget = Budget(2_000)  # 50 schedules drawn one by one would be 18,000 draws
    due = occurrences_due(start, start + timedelta(hours=1), budget=budget)
    counts = Counter()
    for d in due:
        if d.count == 50:  # the dense schedules' occurrences, all 50 at each of their due instants
            counts[d.at.minute] += d.count
    # Every minute, 07:59:30's instants due at 08:00:00 on: 6 instants a minute, 50 schedules.
    assert counts == dict.fromkeys(range(60), 50 * 6)
    assert {d.at.second for d in due if d.count == 50} == {0, 10, 20, 30, 40, 50}
    assert sorted(d.at.minute // 5 for d in due if d.count == 1) == list(range(12))  # drawn, within a minute
    assert budget.walked < 1_000
    assert {dense[0].jitter_seconds, sparse.jitter_seconds} == {60}


def test_demand__each_occurrence_once_from_its_next_instant_or_its_run(tenant, monkeypatch):
    """A schedule counts its rule's instants from its next instant (not before: those are
    materialized), a lagging one every instant of the range, each rule walked once; an
    after_completion schedule its next instant; a paused one nothing; the runs already
    materialized and due in the range (a manual run for later, a queued one) count by themselves."""
    from collections import Counter

    import runs.capacity.demand as demand
    from runs import authority

    start = authority_now().replace(second=0, microsecond=0)
    end = start + timedelta(hours=6)
    hours = [h for h in (start.replace(minute=0) + timedelta(hours=k) for k in range(7)) if start <= h < end]
    ahead, lagging, paused = (create_schedule(tenant, cron="0 * * * *", name=n) for n in ("ahead", "lagging", "paused"))
    Schedule.objects.filter(id=ahead.id).update(next_run_at=hours[2])
    Schedule.objects.filter(id=lagging.id).update(next_run_at=hours[0] - timedelta(hours=5))
    Schedule.objects.filter(id=paused.id).update(paused=True, next_run_at=None)
    after = create_schedule(tenant, name="after", recurrence={"kind": "after_completion", "delaySeconds": 0})
    later = start + timedelta(minutes=90, seconds=17)
    pending, _ = authority.run_once(tenant=tenant, schedule_id=ahead.id, run_at=later)
    queued, _ = authority.run_once(tenant=tenant, schedule_id=ahead.id)
    walks, walk = [], demand.rule_instants
    monkeypatch.setattr(demand, "rule_instants", lambda *a: walks.append(a) or walk(*a))
    due = Counter()
    for d in occurrences_due(start, end):
        due[d.at] += d.count
    expected = Counter({h: 1 + (h >= hours[2]) for h in hours})
    expected.update([after.next_run_at, pending.due_at, queued.due_at])
    assert (pending.state, queued.state) == (RunState.PENDING, RunState.QUEUED)
    assert due == expected and len(walks) == 1


def test_forecast__minute_rows_and_required_slots(tenant, other_tenant_schedules):
    for n in range(30):
        create_schedule(tenant, cron="0 9 * * *", name=f"daily-{n}")
    slots_report("embedded:test:1", {"short": 10})
    start = datetime(2030, 1, 7, 8, 58, tzinfo=UTC)
    result = forecast(start, start + timedelta(minutes=5))
    # demo.sleep has no history: 5 s each. 30 + 20 at 09:00 on 10 slots: waves at 0..20 s.
    [row] = [r for r in result.rows if r.resource_class == "short"]
    assert (row.minute, row.due, row.slot_seconds) == (datetime(2030, 1, 7, 9, 0, tzinfo=UTC), 50, 250)
    assert (row.p(50), row.p(99)) == (10, 20)
    assert row.slots_needed == 17  # three waves of 17 start 99 % of 50 by 10 s
    assert result.required["short"] == 17
    mine = forecast(start, start + timedelta(minutes=5), tenant_id=tenant.id, required=False)
    assert [r.due for r in mine.rows] == [30]


@pytest.fixture
def other_tenant_schedules(db):
    from tests.factories import make_tenant

    other = make_tenant("globex")
    for n in range(20):
        create_schedule(other, cron="0 9 * * *", name=f"other-{n}")
    return other


def test_schedule_statistics__its_own_accepted_attempts_only(tenant):
    from runs.capacity.statistics import schedule_statistics
    from tests.authority_steps import accepted_history

    mine = create_schedule(tenant, name="mine")
    other = create_schedule(tenant, name="other")
    accepted_history(mine, [1, 2, 10], delay=0.5)
    accepted_history(other, [100])
    stats = schedule_statistics(mine.id)
    assert (stats.subject, stats.samples) == (mine.id, 3)
    assert stats.duration == {"p50": 2, "p95": 10, "p99": 10, "mean": pytest.approx(13 / 3, abs=1e-3)}
    assert stats.queue_delay["p50"] == 0.5
    assert job_type_statistics("demo.sleep").samples == 4  # the job type's counts every schedule's


def test_schedule_durations__from_min_samples_on__to_two_significant_digits__latest_samples_only(tenant, settings):
    from runs.capacity.statistics import schedule_durations
    from tests.authority_steps import accepted_history

    settings.CAPACITY_SCHEDULE_MIN_SAMPLES = 3
    steady, young, busy = (create_schedule(tenant, name=n) for n in ("steady", "young", "busy"))
    accepted_history(steady, [4.83, 4.84, 4.86])
    accepted_history(young, [1, 1])  # too few samples of its own: its job type's applies
    accepted_history(busy, [100, 2, 10])
    settings.CAPACITY_STATS_SAMPLES = 2  # busy: the mean of its latest two, as its statistics say
    assert schedule_durations([steady.id, young.id, busy.id, "sch_unknown"]) == {steady.id: 4.8, busy.id: 6.0}


def test_forecast__a_schedule_with_history_is_expected_to_take_its_own_mean(tenant, settings):
    """demo.sleep's mean over every schedule is 3 s (3 x 1 s and 6 x 4 s); its schedules
    with history of their own take 1 s and 4 s, one without takes the type's 3 s."""
    from tests.authority_steps import accepted_history

    settings.CAPACITY_SCHEDULE_MIN_SAMPLES = 3
    quick, slow, new = (create_schedule(tenant, cron="0 9 * * *", name=n) for n in ("quick", "slow", "new"))
    accepted_history(quick, [1, 1, 1])
    accepted_history(slow, [4] * 6)
    assert job_type_statistics("demo.sleep").expected_duration() == 3
    start = datetime(2030, 1, 7, 8, 58, tzinfo=UTC)
    [row] = forecast(start, start + timedelta(minutes=5)).rows
    assert (row.minute.hour, row.due, row.slot_seconds) == (9, 3, 1 + 4 + 3)


def test_demand__an_interval_without_anchor_is_anchored_at_each_schedules_creation(tenant):
    """Rows stored before creation anchored them: grouped in one statement, but never across
    creation times: each walks from its own."""
    rule = {"kind": "interval", "everySeconds": 600, "timezone": "UTC"}
    first, second = (create_schedule(tenant, name=n, recurrence=rule) for n in ("first", "second"))
    start = datetime(2030, 1, 7, 8, 0, tzinfo=UTC)
    for schedule, created in ((first, start - timedelta(seconds=60)), (second, start - timedelta(seconds=300))):
        Schedule.objects.filter(id=schedule.id).update(recurrence=rule, created_at=created,
                                                       next_run_at=start - timedelta(hours=1))
    due = sorted((d.at.strftime("%H:%M"), d.count) for d in occurrences_due(start, start + timedelta(minutes=20)))
    assert due == [("08:05", 1), ("08:09", 1), ("08:15", 1), ("08:19", 1)]


def test_demand__reads_each_rule_in_its_window_and_under_its_calendars(tenant):
    from schedule_services.calendars import calendar_create

    holiday = calendar_create(tenant=tenant, fields={"name": "holiday", "exclude_dates": ["2030-01-08"]})
    ended = create_schedule(tenant, cron="0 9 * * *", name="ends", activeUntil="2030-01-08T00:00:00Z")
    skipped = create_schedule(tenant, cron="0 9 * * *", name="skips",
                              calendar={"calendarIds": [holiday.id], "policy": "skip"})
    moved = create_schedule(tenant, cron="0 10 * * 2", name="moves",  # Tuesdays: 2030-01-08 is one
                            calendar={"calendarIds": [holiday.id], "policy": "shift_after"})
    every_day = create_schedule(tenant, cron="0 9 * * *", name="every day")
    start = datetime(2030, 1, 7, 8, 0, tzinfo=UTC)

    due = occurrences_due(start, start + timedelta(days=3))

    counts = Counter()
    for d in due:
        counts[d.at.strftime("%d %H:%M")] += d.count
    # 9:00 on the 7th: all three daily rules; on the 8th only the one without window or
    # calendar; on the 9th the skipping one again. The Tuesday 10:00 moves to Wednesday.
    assert counts == {"07 09:00": 3, "08 09:00": 1, "09 09:00": 2, "09 10:00": 1}
    assert {ended.id, skipped.id, moved.id, every_day.id} == set(Schedule.objects.values_list("id", flat=True))


def test_demand__a_schedule_ends_after_the_occurrences_its_count_leaves(tenant):
    from runs.capacity.demand import strict_schedules

    start = datetime(2030, 1, 7, 8, 0, tzinfo=UTC)
    slots_report("embedded:test:1", {"short": 10})
    two_left = create_schedule(tenant, cron="0 9 * * *", name="two left", endAfterOccurrences=5,
                               startDeadlineSeconds=86400)
    off_grid = create_schedule(tenant, cron="0 9 * * *", name="off grid", endAfterOccurrences=2)
    plenty = create_schedule(tenant, cron="0 9 * * *", name="plenty", endAfterOccurrences=1000)
    # Three of five materialized; the next instant 09:00 on the 7th.
    Schedule.objects.filter(id=two_left.id).update(occurrences_materialized=3,
                                                   next_run_at=datetime(2030, 1, 7, 9, tzinfo=UTC))
    # A next instant off the rule's grid (made due by hand) is one of those it has left.
    Schedule.objects.filter(id=off_grid.id).update(next_run_at=datetime(2030, 1, 7, 8, 30, tzinfo=UTC))
    Schedule.objects.filter(id=plenty.id).update(next_run_at=datetime(2030, 1, 7, 9, tzinfo=UTC))

    counts = Counter()
    for d in occurrences_due(start, start + timedelta(days=4)):
        counts[d.at.strftime("%d %H:%M")] += d.count

    assert counts == {"07 08:30": 1, "07 09:00": 3, "08 09:00": 2, "09 09:00": 1, "10 09:00": 1}
    [(source, _, _)] = strict_schedules("short", exclude=None, before=start + timedelta(days=4))
    assert source.schedule_id == two_left.id and source.rule.active_until == datetime(2030, 1, 8, 9, tzinfo=UTC)
