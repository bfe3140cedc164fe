"""Catch-up planning within bounds: what a materializing transaction may plan while it holds
schedule locks, and planning with no transaction open for what it may not.

Planning walks every missed instant of a backlog. Done for a whole batch under the schedule
locks, a long scanner outage made that Python work outlast idle_in_transaction_session_timeout;
PostgreSQL killed the session and the same batch failed again forever. So a transaction plans
its locked schedules only while their rows fit SCAN_ROWS_PER_TRANSACTION and PLANNING_SECONDS
have not passed (the rest stay due for the next one), and never a schedule whose plan could
walk more than WALK_UNDER_LOCK instants: that one is planned after the commit, with no
transaction open, then locked again and written only if its planning inputs (first due
instant, rule, misfire policy, grace) are unchanged. Resume plans that way always.
"""

from __future__ import annotations

import time

from django.conf import settings

from runs.catch_up import CatchUpPlan, plan_catch_up
from schedules import recurrence
from schedules.selectors import occurrences_left

PLANNING_SECONDS = 1.0  # planning a transaction's batch stops after about this long
WALK_UNDER_LOCK = 20_000  # instants a plan under locks may walk: ~0.2 s of the slowest rules
RRULE_MIN_PERIOD_SECONDS = 1  # an RRULE may fire every second (FREQ=SECONDLY, rdates)

Planned = tuple[recurrence.Rule, CatchUpPlan]


class WavePlans:
    """The rules and catch-up plans of one wave, judged at authority time ``now``.

    A wave shares few distinct rules and due instants: each (rule, first due instant,
    misfire policy, grace) is parsed and planned once. Rules are keyed by the identity of
    their decoded dict, which rows read with one ``recurrences`` cache share per rule text.
    """

    def __init__(self, now, *, from_pause: bool = False, recurrences: dict | None = None):
        self.now = now
        self.from_pause = from_pause
        self.recurrences = {} if recurrences is None else recurrences  # rule text -> its decoded dict
        self._rules: dict[int, recurrence.Rule] = {}
        self._plans: dict[tuple, Planned] = {}
        self.calendars: dict = {}  # calendar id -> CalendarDays, read once per wave

    def read_calendars(self, schedules) -> None:
        """The calendars the schedules use and this wave has not read: one query."""
        from schedules.calendars import calendar_days_for

        wanted = set()
        for schedule in schedules:
            calendar = getattr(schedule, "calendar", None)
            wanted.update((calendar or {}).get("calendarIds") or ())
            if isinstance(schedule.recurrence, dict) and schedule.recurrence.get("kind") == "business_day":
                wanted.update(schedule.recurrence.get("calendarIds") or ())
        wanted -= set(self.calendars)
        if wanted:
            self.calendars.update(calendar_days_for(wanted))

    def key(self, schedule) -> tuple:
        first_due = schedule.resume_from if self.from_pause else schedule.next_run_at
        return (id(schedule.recurrence), first_due, schedule.misfire_policy, schedule.misfire_grace_seconds,
                schedule.active_from, schedule.active_until, occurrences_left(schedule),
                _calendar_key(schedule), getattr(schedule, "next_run_from", None))

    def rule(self, schedule) -> recurrence.Rule:
        """The schedule's rule in its window (activeFrom, activeUntil)."""
        key = (id(schedule.recurrence), schedule.active_from, schedule.active_until, _calendar_key(schedule))
        rule = self._rules.get(key)
        if rule is None:
            rule = recurrence.parse_rule(schedule.recurrence).within(schedule.active_from, schedule.active_until)
            calendar = getattr(schedule, "calendar", None)
            if calendar:
                rule = rule.calendared(calendar.get("calendarIds") or (), calendar.get("policy") or "skip")
            if rule.calendar_refs():
                self.read_calendars([schedule])
                rule = rule.bound(self.calendars)
            self._rules[key] = rule
        return rule

    def plan(self, schedule) -> Planned | None:
        """The schedule's rule and catch-up plan, planned now unless its key already was;
        None when it has no due instant."""
        key = self.key(schedule)
        _, first_due, policy, grace, _, _, left, _, calendar_from = key
        if first_due is None:
            return None
        planned = self._plans.get(key)
        if planned is None:
            rule = self.rule(schedule)
            plan = plan_catch_up(rule, first_due, self.now, policy=policy, grace_seconds=grace,
                                 all_missed=self.from_pause, max_instants=left, calendar_from=calendar_from)
            planned = self._plans[key] = (rule, plan)
        return planned

    def planned(self, schedule) -> Planned | None:
        """The plan made for exactly this schedule state, if any; never plans."""
        return self._plans.get(self.key(schedule))

    def walk_bound(self, schedule) -> int:
        """At most how many instants planning the schedule can walk, without walking them."""
        key = self.key(schedule)
        if key not in self._plans and key[1] is not None and key[1] < self.now:
            rule = self.rule(schedule)
            if rule.kind not in ("after_completion", "once"):
                if rule.kind == "interval":
                    period = rule.every_seconds
                elif rule.kind == "rrule":
                    period = RRULE_MIN_PERIOD_SECONDS
                elif rule.kind == "business_day":
                    period = 86400  # at most one instant a day
                else:
                    period = recurrence.min_period_seconds(rule.cron)
                return int((self.now - key[1]).total_seconds() // period) + 1
        return 1


def plan_within_budget(plans: WavePlans, candidates: list, *, walk_limit: int | None = None) -> tuple[list, list]:
    """Plan candidates in due order while their rows fit one transaction
    (SCAN_ROWS_PER_TRANSACTION) and PLANNING_SECONDS have not passed; the first one always
    fits, so every call makes progress. A candidate whose plan could walk more than
    ``walk_limit`` instants is not planned here. Returns (planned, too long to plan here);
    candidates past the budget are in neither and stay due."""
    budget = settings.SCAN_ROWS_PER_TRANSACTION
    plans.read_calendars(candidates)
    started = time.monotonic()
    chosen, deferred, rows = [], [], 0
    for schedule in candidates:
        if walk_limit is not None and plans.walk_bound(schedule) > walk_limit:
            deferred.append(schedule)
            continue
        planned = plans.plan(schedule)
        if planned is None:
            continue
        rows += plan_rows(planned[1])
        if chosen and (rows > budget or time.monotonic() - started > PLANNING_SECONDS):
            break
        chosen.append(schedule)
    return chosen, deferred


def plan_rows(plan: CatchUpPlan) -> int:
    """Occurrence rows the plan writes (run, skipped, range record, calendar-skipped), each
    at most with one outbox row."""
    return len(plan.run) + len(plan.skipped) + (1 if plan.skipped_range else 0) + len(plan.calendar_skipped)


def _calendar_key(schedule) -> tuple:
    calendar = getattr(schedule, "calendar", None) or {}
    return tuple(calendar.get("calendarIds") or ()), calendar.get("policy")

