"""Catch-up planning, done before the materializing transaction locks anything.

Planning walks every missed instant of a backlog: after a six-hour outage a minutely
schedule has 360 of them, a fast rule up to WALK_CAP. Done under the schedule locks, that
Python work outlasted idle_in_transaction_session_timeout, PostgreSQL killed the session,
and the same batch failed again forever. So the scanner and resume plan first, lock
afterwards, and keep a plan only for a row whose planning inputs (first due instant, rule,
misfire policy, grace) are unchanged; the transaction then only writes rows, at most
SCAN_ROWS_PER_TRANSACTION of them whatever the backlog.

A plan judges lateness at the authority time read before planning: the moment the scan
(or the resume) looked, exactly as if it had locked then. Rows still carry the authority
time of their own transaction.
"""

from __future__ import annotations

import time

from django.conf import settings
from django.db import transaction

from runs.catch_up import CatchUpPlan, plan_catch_up
from schedules import recurrence

# Candidates stop being planned after this long, so a backlog's first rows commit soon.
PLANNING_SECONDS = 1.0

Planned = tuple[recurrence.Rule, CatchUpPlan]


class WavePlans:
    """The rules and catch-up plans of one wave, judged at authority time ``now``.

    A wave shares few distinct rules and due instants: each (rule, first due instant,
    misfire policy, grace) is parsed and planned once. Rules are keyed by the identity of
    their decoded dict, which rows read for one wave share per distinct rule text.
    """

    def __init__(self, now, *, from_pause: bool = False):
        self.now = now
        self.from_pause = from_pause
        self.recurrences: dict[str, dict] = {}  # rule text -> its one decoded dict in this wave
        self._rules: dict[int, recurrence.Rule] = {}
        self._plans: dict[tuple, Planned] = {}

    def key(self, schedule) -> tuple:
        first_due = schedule.resume_from if self.from_pause else schedule.next_run_at
        return (id(schedule.recurrence), first_due, schedule.misfire_policy, schedule.misfire_grace_seconds)

    def plan(self, schedule) -> Planned | None:
        """The schedule's rule and catch-up plan, planned now unless its key already was;
        None when it has no due instant."""
        key = self.key(schedule)
        rule_id, first_due, policy, grace = key
        if first_due is None:
            return None
        planned = self._plans.get(key)
        if planned is None:
            rule = self._rules.get(rule_id)
            if rule is None:
                rule = self._rules[rule_id] = recurrence.parse_rule(schedule.recurrence)
            plan = plan_catch_up(rule, first_due, self.now, policy=policy, grace_seconds=grace,
                                 all_missed=self.from_pause)
            planned = self._plans[key] = (rule, plan)
        return planned

    def planned(self, schedule) -> Planned | None:
        """The plan made for exactly this schedule state, if any; never plans."""
        return self._plans.get(self.key(schedule))


def refuse_callers_transaction() -> None:
    """Planning is an entry point's first step: under a caller's transaction it would hold
    the caller's locks, the very thing it avoids. Refused as the durable block refuses."""
    with transaction.atomic(durable=True):
        pass


def plan_within_budget(plans: WavePlans, candidates: list) -> list:
    """Plan candidates in due order while their rows fit one transaction
    (SCAN_ROWS_PER_TRANSACTION) and PLANNING_SECONDS have not passed; returns those that
    fit. The first candidate always does, so every call makes progress."""
    budget = settings.SCAN_ROWS_PER_TRANSACTION
    started = time.monotonic()
    chosen, rows = [], 0
    for schedule in candidates:
        planned = plans.plan(schedule)
        if planned is None:
            continue
        rows += plan_rows(planned[1])
        if chosen and (rows > budget or time.monotonic() - started > PLANNING_SECONDS):
            break
        chosen.append(schedule)
    return chosen


def plan_rows(plan: CatchUpPlan) -> int:
    """Occurrence rows the plan writes (run, skipped, range record), each at most with one
    outbox row."""
    return len(plan.run) + len(plan.skipped) + (1 if plan.skipped_range else 0)
