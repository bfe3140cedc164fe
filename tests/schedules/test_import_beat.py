"""manage.py import_beat against real django-celery-beat rows made through its models: the
dry-run table (beat's instants computed by Celery itself, ours, DST and day-rule notes), the
import (twice: nothing new the second time) and --disable-beat."""

import io
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django_celery_beat.models import (
    ClockedSchedule,
    CrontabSchedule,
    IntervalSchedule,
    PeriodicTask,
    PeriodicTasks,
    SolarSchedule,
)

from runs import authority
from runs.models import RunState
from schedules.models import BeatImport, Schedule, Tenant
from tests.factories import make_tenant
from tests.workers import bridge_tasks  # noqa: F401  (registers tests.bridge.* with the Celery app)
from workers.intake import claim_and_execute

pytestmark = pytest.mark.django_db
NEW_YORK = ZoneInfo("America/New_York")


def crontab(minute="*", hour="*", day_of_month="*", day_of_week="*", zone=NEW_YORK):
    return CrontabSchedule.objects.create(minute=minute, hour=hour, day_of_month=day_of_month,
                                          day_of_week=day_of_week, timezone=zone)


@pytest.fixture
def beat_rows():
    """A team's beat table: every kind of schedule, including ones that cannot be imported."""
    PeriodicTask.objects.create(name="nightly export", task="tests.bridge.add", crontab=crontab("30", "1"),
                                args="[1, 2]", kwargs='{"scale": 3}')
    PeriodicTask.objects.create(name="early slots", task="tests.bridge.add", crontab=crontab("*/20", "1-2", "7,14"),
                                args="[0, 0]")
    PeriodicTask.objects.create(name="first monday", task="tests.bridge.add",
                                crontab=crontab("0", "9", "1-7", "mon", ZoneInfo("Europe/London")), args="[0, 0]")
    PeriodicTask.objects.create(name="twice monthly", task="tests.bridge.add",
                                crontab=crontab("0", "9", "1,15", "0-6", ZoneInfo("UTC")), args="[0, 0]")
    every = IntervalSchedule.objects.create(every=15, period=IntervalSchedule.MINUTES)
    PeriodicTask.objects.create(name="poll partner", task="tests.bridge.add", interval=every, args="[4, 4]")
    clocked = ClockedSchedule.objects.create(clocked_time=datetime(2030, 6, 1, 12, tzinfo=timezone.utc))
    PeriodicTask.objects.create(name="launch", task="tests.bridge.add", clocked=clocked, one_off=True,
                                args="[5, 5]")
    sunrise = SolarSchedule.objects.create(event="sunrise", latitude=40.7, longitude=-74.0)
    PeriodicTask.objects.create(name="at dawn", task="tests.bridge.add", solar=sunrise, args="[0, 0]")
    PeriodicTask.objects.create(name="retired", task="tests.bridge.add", interval=every, enabled=False)
    PeriodicTask.objects.create(name="scheduler lease sweep", task="scheduler.sweep", interval=every)
    return make_tenant("team")


def import_beat(*args) -> str:
    out = io.StringIO()
    call_command("import_beat", *args, stdout=out)
    return out.getvalue()


def row_block(output: str, name: str) -> list[str]:
    """The table lines of one row: its first line, its continuation lines and its notes."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(name + " "))
    end = next((i for i in range(start + 1, len(lines)) if lines[i] and not lines[i].startswith(" ")), len(lines))
    return lines[start:end]


def column(block: list[str], header_line: str, title: str) -> list[str]:
    """The cell under ``title``, one value per line of the row."""
    start = header_line.index(title)
    following = [header_line.index(t) for t in ("beat rule", "new rule", "beat: next", "ours: next", "status")]
    end = min([at for at in following if at > start], default=len(header_line))
    return [line[start:end].strip() for line in block if not line.lstrip().startswith("- ") and line[start:end].strip()]


def test_dry_run__prints_the_table_and_writes_nothing(beat_rows):
    output = import_beat("--dry-run", "--after", "2027-03-10T00:00:00Z")
    assert output.splitlines()[0].split() [:4] == ["periodic", "task", "task", "beat"]
    assert row_block(output, "nightly export")[0].split()[3:8] == [
        "crontab", "30", "1", "*", "*"] and "cron 30 1 * * * America/New_York" in output

    first_monday = "\n".join(row_block(output, "first monday"))
    assert "import (day rule and)" in row_block(output, "first monday")[0]
    assert "cron 0 9 1-7 * 1 Europe/London dialect and" in first_monday
    assert "day-of-month 1-7 AND day-of-week mon: imported under dialect 'and'" in first_monday
    # Beat's instants (Celery's own code) and ours agree: the first Monday of each month.
    header = output.splitlines()[0]
    assert column(row_block(output, "first monday"), header, "beat: next") == column(
        row_block(output, "first monday"), header, "ours: next")
    assert "cron 0 9 1,15 * * UTC dialect vixie" in output
    twice = "\n".join(row_block(output, "twice monthly"))
    assert "cron 0 9 1,15 * * UTC" in twice and "import (day rule rewritten)" in twice
    assert "day-of-week admits every day" in twice
    assert "solar schedules" in "\n".join(row_block(output, "at dawn"))
    assert "once 2030-06-01T12:00:00Z" in row_block(output, "launch")[0]
    assert "interval 900s from 2027-03-10T00:00:01Z" in row_block(output, "poll partner")[0]
    assert "disabled in beat" in "\n".join(row_block(output, "retired"))
    assert "housekeeping" in "\n".join(row_block(output, "scheduler lease sweep"))
    assert output.rstrip().splitlines()[-2] == "dry run, nothing written: 6 import, 1 refused, 2 skipped"
    assert not Schedule.objects.exists() and not BeatImport.objects.exists()


@pytest.mark.parametrize("after, instants", [
    # Spring forward on 2027-03-14: 01:30 EST exists that day; the next is 01:30 EDT.
    ("2027-03-12T00:00:00Z", ["2027-03-12T06:30:00Z", "2027-03-13T06:30:00Z", "2027-03-14T06:30:00Z",
                              "2027-03-15T05:30:00Z", "2027-03-16T05:30:00Z"]),
    # Fall back on 2027-11-07: 01:30 happens twice (EDT, then EST); both beat and ours fire once, at the first.
    ("2027-11-05T00:00:00Z", ["2027-11-05T05:30:00Z", "2027-11-06T05:30:00Z", "2027-11-07T05:30:00Z",
                              "2027-11-08T06:30:00Z", "2027-11-09T06:30:00Z"]),
])
def test_dry_run__new_york_crontab_across_the_2027_transitions(beat_rows, after, instants):
    output = import_beat("--dry-run", "--after", after)
    header, block = output.splitlines()[0], row_block(output, "nightly export")
    assert column(block, header, "beat: next 5") == instants
    assert column(block, header, "ours: next 5") == instants
    assert "    - DST: beat and ours agree on the coming year" in block


def test_dry_run__a_dst_difference_is_noted_with_each_side_s_firings(beat_rows):
    output = import_beat("--dry-run", "--after", "2027-03-10T00:00:00Z")
    header, block = output.splitlines()[0], row_block(output, "early slots")
    # 02:00-02:40 do not exist on 2027-03-14: ours shifts each by the gap, beat keeps only the first.
    assert column(block, header, "ours: next 5")[-2:] == ["2027-03-14T07:00:00Z", "2027-03-14T07:20:00Z"]
    assert column(block, header, "beat: next 5")[-2:] == ["2027-03-14T07:00:00Z", "2027-04-07T05:00:00Z"]
    assert ("    - DST transition 2027-03-14 (clocks go forward): on 2027-03-14 beat fires 4x, ours 6x; "
            "only ours 03:20 EDT, 03:40 EDT") in block


def test_import__creates_bridged_schedules_once_even_when_run_twice(beat_rows):
    first = import_beat("--tenant", "team")
    assert "tenant team: 6 imported, 1 refused, 2 skipped" in first
    assert "allowlist of team: added tests.bridge.add" in first
    schedules = {s.name: s for s in Schedule.objects.filter(tenant=beat_rows)}
    assert sorted(schedules) == ["early slots", "first monday", "launch", "nightly export", "poll partner",
                                 "twice monthly"]
    assert schedules["first monday"].recurrence == {"kind": "cron", "cron": "0 9 1-7 * 1", "timezone": "Europe/London",
                                                    "dialect": "and"}
    nightly = schedules["nightly export"]
    assert nightly.job_type_id == "celery.task" and nightly.overlap_policy == "allow"
    assert nightly.params == {"task": "tests.bridge.add", "args": [1, 2], "kwargs": {"scale": 3}}
    assert nightly.recurrence == {"kind": "cron", "cron": "30 1 * * *", "timezone": "America/New_York",
                                  "dialect": "vixie"}
    assert schedules["launch"].recurrence == {"kind": "once", "at": "2030-06-01T12:00:00Z", "timezone": "UTC"}
    assert schedules["launch"].next_run_at == datetime(2030, 6, 1, 12, tzinfo=timezone.utc)
    team = Tenant.objects.get(id=beat_rows.id)
    assert team.celery_tasks == ["tests.bridge.add"] and team.allowed_job_types.filter(name="celery.task").exists()
    assert PeriodicTask.objects.filter(enabled=True).count() == 8  # beat rows untouched without --disable-beat

    second = import_beat("--tenant", "team")
    assert "tenant team: 6 already imported, 1 refused, 2 skipped" in second
    assert f"already imported {nightly.id}" in row_block(second, "nightly export")[0]
    assert Schedule.objects.count() == 6 and BeatImport.objects.count() == 6


def test_import__an_imported_schedule_runs_the_task_through_the_bridge(beat_rows, file_objects):
    import_beat()
    schedule = Schedule.objects.get(name="nightly export")
    run, _ = authority.run_once(tenant=schedule.tenant, schedule_id=schedule.id)
    claim_and_execute(resource_classes=["short"], worker_label="w")
    run.refresh_from_db()
    assert run.state == RunState.SUCCEEDED and run.result_content_type == "application/json"


def test_import__disable_beat_turns_off_exactly_the_imported_rows(beat_rows):
    marked = PeriodicTasks.last_change()
    import_beat("--disable-beat")
    disabled = set(PeriodicTask.objects.filter(enabled=False).values_list("name", flat=True))
    assert disabled == {"early slots", "first monday", "launch", "nightly export", "poll partner", "twice monthly",
                        "retired"}
    assert PeriodicTasks.last_change() != marked  # beat's database scheduler reloads its rows
    assert "tenant team: 6 already imported, 1 refused, 2 skipped" in import_beat("--disable-beat")
    assert Schedule.objects.count() == 6


def test_import__needs_a_tenant_when_there_are_several(beat_rows):
    make_tenant("other")
    with pytest.raises(CommandError, match="--tenant"):
        import_beat()
    with pytest.raises(CommandError, match="--after only goes with --dry-run"):
        import_beat("--tenant", "team", "--after", "2027-03-10T00:00:00Z")


def test_interval__continues_beat_s_cadence_from_its_last_run(db):
    every = IntervalSchedule.objects.create(every=2, period=IntervalSchedule.HOURS)
    last = datetime.now(timezone.utc) - timedelta(minutes=30)
    PeriodicTask.objects.create(name="sync", task="tests.bridge.add", interval=every, args="[1, 1]")
    PeriodicTask.objects.filter(name="sync").update(last_run_at=last)
    make_tenant("team")
    import_beat()
    recurrence = Schedule.objects.get(name="sync").recurrence
    assert recurrence["everySeconds"] == 7200
    assert datetime.fromisoformat(recurrence["anchor"]) == last + timedelta(hours=2)
