"""Admission of strict start promises. A schedule with `startDeadlineSeconds` is admitted
only if the forecast says its occurrences will start within that many seconds of their
due instant (`dueAt`: the nominal instant plus its jitter offset) at p99, queued behind everything else due at the same time (the
conservative order: among simultaneous arrivals it is served last). Checked over its
instants in the next CAPACITY_ADMISSION_HORIZON_SECONDS (at most MAX_CHECKED_INSTANTS),
each at every offset its jitter may give it: the answer does not depend on the schedule's
id, so a suggested jitter holds for the schedule created with it."""

from datetime import timedelta

from django.conf import settings
from django.db import connection

from runs.capacity.demand import Source, occurrences_due, rule_instants
from runs.capacity.forecast import class_work, expected_durations
from runs.capacity.live import live_slots
from runs.capacity.waves import Arrival, Lateness, fewest, simulate
from scheduler_project.clock import authority_now, instant as instant_text
from scheduler_project.errors import DeadlineInfeasible

ADMISSION_LOCK_SPACE = 17_002  # first key of pg_advisory_xact_lock(int, int); the reserve's is 17_001
MAX_CHECKED_INSTANTS = 100
JITTER_LADDER = (5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600)
PROBE = "probe"
PROBE_BUDGET = 5000  # probes per simulation over all instants checked; each instant gets at least 101


def admit_start_deadline(*, schedule, job_type, payload: dict, rule) -> None:
    """Raise DeadlineInfeasible when `schedule` as `payload` describes it would miss its
    start deadline at p99; nothing to check for an ordinary schedule. The schedule services
    call it (their `admit`) under their lock, before anything is written; strict admissions
    of every tenant take turns (serialize_admissions) until the caller's transaction ends."""
    schedule_id, tenant_id = schedule.id, schedule.tenant_id
    deadline = payload.get("startDeadlineSeconds")
    if not deadline or rule.kind == "after_completion":
        return
    jitter = payload.get("jitterSeconds") or 0
    serialize_admissions()
    start = authority_now()
    instants = rule_instants(rule, start, start + timedelta(seconds=settings.CAPACITY_ADMISSION_HORIZON_SECONDS))
    instants = instants[:MAX_CHECKED_INSTANTS]
    if not instants:
        return
    rc = job_type.resource_class
    end = instants[-1] + timedelta(seconds=max(JITTER_LADDER) + 1)
    candidate = Source(schedule_id, tenant_id, job_type.name, rc, rule, jitter)
    due = [d for d in occurrences_due(start, end, exclude=schedule_id, extra=[candidate]) if d.resource_class == rc]
    expected = expected_durations({d.job_type for d in due} | {job_type.name})
    work = class_work(start, due, expected, None)[rc]
    slots = live_slots().get(rc, 0)

    def p99(jitter_seconds: int, with_slots: int) -> tuple[float, int]:
        """The p99 start lateness over its instants and the offsets its jitter may give
        them (whichever schedule id draws them), and the instant of the worst start."""
        offsets = _offsets(jitter_seconds, max(101, PROBE_BUDGET // len(instants)))
        probes = [Arrival(_offset(start, at) + offset, 0.0, 1, (PROBE, i))
                  for i, at in enumerate(instants) for offset in offsets]
        lateness = simulate(work.arrivals + probes, with_slots, busy_until=work.busy_until)
        overall, worst = Lateness(), {}
        for key, part in lateness.items():
            if isinstance(key, tuple):
                worst[key[1]] = part.percentile(100)
                for seconds, count in part.counts.items():
                    overall.add(seconds, count)
        return overall.percentile(99), max(worst, key=lambda i: (worst[i], -i))

    predicted, worst = p99(jitter, slots)
    if predicted <= deadline:
        return
    suggested = next((j for j in JITTER_LADDER if j > jitter and p99(j, slots)[0] <= deadline), None)
    needed = fewest(lambda n: p99(jitter, n)[0] <= deadline, low=slots + 1, high=max(slots + 1, _total(work)))
    raise DeadlineInfeasible(
        f"the {rc} slots cannot start this schedule within {deadline} s at p99 (predicted {_text(predicted)} s)",
        details={
            "instant": instant_text(instants[worst]),
            "resourceClass": rc,
            "startDeadlineSeconds": deadline,
            "predictedP99Seconds": None if predicted == float("inf") else predicted,
            "liveSlots": slots,
            "slotsNeeded": needed,
            "suggestedJitterSeconds": suggested,
        },
    )


def serialize_admissions() -> None:
    """Strict admissions take turns across every tenant, until the admitting transaction ends:
    the forecast read next sees every strict schedule admitted before (committed), so two
    promises that each fit alone but not together are never both admitted. A transaction-level
    advisory lock: safe behind PgBouncer's transaction pooling. Taken after the service's
    tenant or schedule lock; nothing holding it waits for a tenant or schedule lock."""
    if connection.vendor == "postgresql":  # the embedded SQLite has one writer at a time
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s, 0)", [ADMISSION_LOCK_SPACE])


def _offsets(jitter_seconds: int, most: int) -> list[int]:
    """Offsets in [0, jitter_seconds] standing for all of them (the hash draws each whole
    second alike): every one, or `most` evenly spread."""
    if jitter_seconds < most:
        return list(range(jitter_seconds + 1))
    step = jitter_seconds / (most - 1)
    return [round(k * step) for k in range(most)]


def _offset(start, at) -> float:
    return (at - start).total_seconds()


def _total(work) -> int:
    return sum(a.count for a in work.arrivals) + len(work.busy_until) + 1


def _text(seconds: float) -> str:
    return "never (no live slots)" if seconds == float("inf") else f"{seconds:g}"
