"""Random interleavings of the worker protocol against PostgreSQL.

Several simulated workers claim, heartbeat, stage, complete and go stale while leases expire,
the sweeper runs, clients cancel and replay failed runs, and retries are promoted. Each worker remembers every
(run, attempt, fence) it was given, so stale workers keep calling. After every step the
authority's invariants are checked from the database, and every call made with a fence that
is not current must be refused and change nothing.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.db import connection
from django.forms.models import model_to_dict
from hypothesis import HealthCheck, event, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from kernel.clock import authority_now
from kernel.errors import InvalidState, StaleFence
from runs import authority
from runs.models import (
    ACTIVE_STATES, Attempt, AttemptState, EffectIntent, ObjectState, Outbox, PendingReason, Run, RunState, StoredObject,
    TERMINAL_STATES,
)
from schedules.models import Schedule
from tests.authority_steps import create_schedule, make_due
from tests.factories import make_tenant
from workers import uploads

pytestmark = pytest.mark.usefixtures("file_objects")

WORKERS = ("w0", "w1", "w2")
MAX_ATTEMPTS = 3
RETRY_AT_ONCE = {"maxAttempts": MAX_ATTEMPTS, "initialDelaySeconds": 0, "maxDelaySeconds": 0}
PICK = st.integers(min_value=0, max_value=7)
# Drawn uniformly; repeats weight the actions that move runs forward.
ACTIONS = (
    ["claim"] * 3 + ["run_once"] * 2 + ["complete_succeeded"] * 2 + ["complete_failed"] * 2
    + ["lease_passes", "sweep", "lease_passes_then_sweep", "lease_passes_then_sweep"]
    + ["materialize", "promote", "cancel", "heartbeat", "forged_fence", "stage", "complete_canceled", "replay"]
)

PROFILE = settings(
    max_examples=50,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@dataclass(frozen=True)
class Claim:
    run_id: str
    attempt_id: str
    fence: int

    @property
    def data(self) -> bytes:
        return f"result of {self.attempt_id}".encode()


def db_state() -> tuple:
    """Everything a refused call must leave untouched."""
    return (
        [model_to_dict(r) for r in Run.objects.order_by("id")],
        [model_to_dict(a) for a in Attempt.objects.order_by("id")],
        [model_to_dict(o) for o in StoredObject.objects.order_by("id")],
        list(Schedule.objects.order_by("id").values_list("id", "active_run_id", "next_run_at", "revision")),
        Outbox.objects.count(),
        EffectIntent.objects.count(),
    )


class AuthorityMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        with connection.cursor() as cursor:
            # Cascades to schedules, runs, attempts, outbox, objects and effects of earlier examples.
            cursor.execute("TRUNCATE schedules_tenant CASCADE")
        self.tenant = make_tenant("machine")
        effects = {"email": {"to": ["ops@example.com"]}}
        self.schedules = [
            create_schedule(self.tenant, name="exclusive", retry=RETRY_AT_ONCE, effects=effects),
            create_schedule(self.tenant, name="parallel", retry=RETRY_AT_ONCE, overlapPolicy="allow"),
        ]
        self.claims: dict[str, list[Claim]] = {w: [] for w in WORKERS}
        self.terminal: dict[str, tuple] = {}  # run id -> snapshot taken when it became terminal
        self.fences: dict[str, int] = {}  # run id -> highest fence seen

    # --- helpers ----------------------------------------------------------------------

    def pick_claim(self, worker: str, i: int) -> Claim | None:
        claims = self.claims[worker]
        return claims[-1 - i % len(claims)] if claims else None

    def is_current(self, claim: Claim) -> bool:
        """What the authority must decide: the run's latest fence, a running attempt, a live lease."""
        run = Run.objects.get(id=claim.run_id)
        attempt = Attempt.objects.get(id=claim.attempt_id)
        return (
            run.state == RunState.RUNNING
            and run.current_attempt_id == attempt.id
            and run.fence == claim.fence == attempt.fence
            and attempt.state == AttemptState.RUNNING
            and run.lease_expires_at > authority_now()
        )

    def refused_and_unchanged(self, call, *allowed):
        """A stale call: it raises one of ``allowed`` (StaleFence by default) and changes nothing."""
        before = db_state()
        with pytest.raises(allowed or (StaleFence,)) as refused:
            call()
        assert db_state() == before
        event(f"refused: {type(refused.value).__name__}")

    # --- schedule side ----------------------------------------------------------------

    @initialize(manual=st.integers(1, 3))
    def some_work(self, manual):
        """Start with claimable work on both schedules, so early steps have something to race on."""
        for _ in range(manual):
            self.run_once(1)
        self.materialize(0)

    def materialize(self, which: int):
        make_due(self.schedules[which])
        authority.materialize_due()

    def run_once(self, which: int):
        authority.run_once(tenant=self.tenant, schedule_id=self.schedules[which].id)

    def promote(self):
        authority.promote_due_runs()

    def cancel(self, i):
        runs = list(Run.objects.order_by("created_at", "id"))
        if not runs:
            return
        run = runs[i % len(runs)]
        if run.state in TERMINAL_STATES:
            self.refused_and_unchanged(lambda: authority.run_cancel(tenant=self.tenant, run_id=run.id), InvalidState)
            return
        authority.run_cancel(tenant=self.tenant, run_id=run.id)
        after = Run.objects.get(id=run.id)
        if run.state == RunState.RUNNING:
            assert after.state == RunState.RUNNING and after.cancellation_requested
        else:
            assert after.state == RunState.CANCELED and after.cancellation_accepted

    def replay(self, i):
        runs = list(Run.objects.order_by("created_at", "id"))
        if not runs:
            return
        run = runs[i % len(runs)]
        call = lambda: authority.run_replay(tenant=self.tenant, run_id=run.id, note="again")  # noqa: E731
        if run.state != RunState.FAILED:
            self.refused_and_unchanged(call, InvalidState)
            return
        call()
        event("replayed")
        self.terminal.pop(run.id)  # the one way a terminal run changes: failed, then queued again
        after = Run.objects.get(id=run.id)
        assert (after.state, after.finished_at, after.fence) == (RunState.QUEUED, None, run.fence)
        assert after.max_attempts == run.attempt_count + MAX_ATTEMPTS

    # --- time and the sweeper -----------------------------------------------------------

    def lease_passes(self, i):
        running = list(Run.objects.filter(state=RunState.RUNNING).order_by("id"))
        if running:
            run = running[i % len(running)]
            Run.objects.filter(id=run.id).update(lease_expires_at=authority_now() - timedelta(seconds=1))

    def sweep(self):
        passed = set(Run.objects.filter(state=RunState.RUNNING, lease_expires_at__lte=authority_now())
                     .values_list("id", flat=True))
        assert authority.sweep_expired_leases() == len(passed)
        for run in Run.objects.filter(id__in=passed):
            assert run.state in (RunState.QUEUED, RunState.FAILED, RunState.CANCELED)
            assert Attempt.objects.get(id=run.current_attempt_id).state == AttemptState.EXPIRED

    # --- workers ------------------------------------------------------------------------

    def claim(self, worker):
        fences = dict(Run.objects.values_list("id", "fence"))
        run = authority.claim(worker_label=worker, lease_seconds=60)
        if run is None:
            return
        assert run.fence == fences[run.id] + 1
        assert run.state == RunState.RUNNING and run.current_attempt.fence == run.fence
        self.claims[worker].append(Claim(run.id, run.current_attempt_id, run.fence))

    def heartbeat(self, worker, i):
        claim = self.pick_claim(worker, i)
        if claim is None:
            return
        ids = dict(run_id=claim.run_id, attempt_id=claim.attempt_id, fence=claim.fence)
        if not self.is_current(claim):
            self.refused_and_unchanged(lambda: authority.heartbeat(**ids))
            return
        before = Run.objects.get(id=claim.run_id).lease_expires_at
        assert authority.heartbeat(**ids).lease_expires_at >= before

    def forged_fence(self, worker, i, delta: int):
        claim = self.pick_claim(worker, i)
        if claim is not None:
            self.refused_and_unchanged(lambda: authority.heartbeat(
                run_id=claim.run_id, attempt_id=claim.attempt_id, fence=claim.fence + delta))

    def stage(self, worker, i):
        claim = self.pick_claim(worker, i)
        if claim is not None:
            self._stage(claim)

    def _stage(self, claim: Claim) -> StoredObject | None:
        def upload():
            return uploads.stage_result(run_id=claim.run_id, attempt_id=claim.attempt_id, fence=claim.fence,
                                        data=claim.data, content_type="text/plain")

        if self.is_current(claim):
            obj = upload()
            assert obj.attempt_id == claim.attempt_id and obj.fence == claim.fence and obj.version_id
            return obj
        # Stale: refused even when this attempt staged an object while it was current.
        staged = StoredObject.objects.filter(attempt_id=claim.attempt_id).first()
        self.refused_and_unchanged(upload)
        return staged

    def complete_succeeded(self, worker, i):
        claim = self.pick_claim(worker, i)
        if claim is None:
            return
        obj = self._stage(claim)
        checksum = "sha256:" + hashlib.sha256(claim.data).hexdigest()
        self._complete(claim, "succeeded", object_key=obj.key if obj else f"runs/{claim.run_id}/x/result",
                       version_id=obj.version_id if obj else None, checksum=checksum)

    def complete_failed(self, worker, i, retryable):
        claim = self.pick_claim(worker, i)
        if claim is not None:
            self._complete(claim, "failed", error="boom", retryable=retryable)

    def complete_canceled(self, worker, i):
        claim = self.pick_claim(worker, i)
        if claim is not None:
            self._complete(claim, "canceled")

    def _complete(self, claim: Claim, outcome: str, **kwargs):
        def call():
            return authority.complete(run_id=claim.run_id, attempt_id=claim.attempt_id, fence=claim.fence,
                                      outcome=outcome, **kwargs)

        run = Run.objects.get(id=claim.run_id)
        attempt = Attempt.objects.get(id=claim.attempt_id)
        if not self.is_current(claim):
            if attempt.state == outcome and (outcome != "succeeded" or run.result_checksum == kwargs["checksum"]):
                # A repeat of this attempt's accepted completion: the saved run, nothing changes.
                before = db_state()
                assert call().id == run.id
                assert db_state() == before
                event("repeat of an accepted completion")
            elif attempt.state in (AttemptState.SUCCEEDED, AttemptState.FAILED, AttemptState.CANCELED):
                # This attempt completed otherwise: a conflicting repeat, or it no longer owns the run.
                self.refused_and_unchanged(call, StaleFence, InvalidState)
            else:
                self.refused_and_unchanged(call)
            return
        if outcome == "canceled" and not run.cancellation_requested:
            self.refused_and_unchanged(call, InvalidState)
            return
        done = call()
        event(f"accepted: {outcome}")
        after = Run.objects.get(id=claim.run_id)
        assert (after.state, after.fence) == (done.state, claim.fence)
        if outcome == "succeeded":
            assert after.state == RunState.SUCCEEDED and after.accepted_attempt_id == claim.attempt_id
        elif outcome == "canceled" or run.cancellation_requested:
            assert after.state == RunState.CANCELED and after.cancellation_accepted
        elif kwargs["retryable"] and run.attempt_count < run.max_attempts:
            assert (after.state, after.pending_reason) == (RunState.PENDING, PendingReason.RETRY)
        else:
            assert after.state == RunState.FAILED

    # --- one rule for every action ----------------------------------------------------

    @rule(action=st.sampled_from(ACTIONS), worker=st.sampled_from(WORKERS), i=PICK, flag=st.booleans())
    def step(self, action, worker, i, flag):
        """A single rule, so every example mixes all actions (separate rules get swarmed:
        most examples would run without claims or completions)."""
        {
            "materialize": lambda: self.materialize(i % 2),
            "run_once": lambda: self.run_once(i % 2),
            "promote": self.promote,
            "cancel": lambda: self.cancel(i),
            "lease_passes": lambda: self.lease_passes(i),
            "sweep": self.sweep,
            "lease_passes_then_sweep": lambda: (self.lease_passes(i), self.sweep()),
            "claim": lambda: self.claim(worker),
            "heartbeat": lambda: self.heartbeat(worker, i),
            "forged_fence": lambda: self.forged_fence(worker, i, 1 if flag else -1),
            "stage": lambda: self.stage(worker, i),
            "complete_succeeded": lambda: self.complete_succeeded(worker, i),
            "complete_failed": lambda: self.complete_failed(worker, i, retryable=flag),
            "complete_canceled": lambda: self.complete_canceled(worker, i),
            "replay": lambda: self.replay(i),
        }[action]()

    # --- invariants, from the database after every step ------------------------------

    @invariant()
    def authority_invariants(self):
        runs = list(Run.objects.all())
        attempts: dict[str, list[Attempt]] = {}
        for attempt in Attempt.objects.order_by("run_id", "number"):
            attempts.setdefault(attempt.run_id, []).append(attempt)
        referenced: dict[str, list[StoredObject]] = {}
        for obj in StoredObject.objects.filter(state=ObjectState.REFERENCED):
            referenced.setdefault(obj.run_id, []).append(obj)
        for run in runs:
            mine = attempts.get(run.id, [])
            # Fences strictly increase across attempts, and never go back between steps.
            assert [a.number for a in mine] == list(range(1, len(mine) + 1))
            assert all(x.fence < y.fence for x, y in zip(mine, mine[1:]))
            assert run.fence == (mine[-1].fence if mine else 0)
            assert run.fence >= self.fences.get(run.id, 0)
            self.fences[run.id] = run.fence
            # A replay grants the attempts it found plus a fresh budget.
            budget_from = run.replays[-1]["afterAttempt"] if run.replays else 0
            assert run.attempt_count == len(mine) <= run.max_attempts == budget_from + MAX_ATTEMPTS

            # Only the current attempt of a running run is running.
            running = [a for a in mine if a.state == AttemptState.RUNNING]
            if run.state == RunState.RUNNING:
                assert [a.id for a in running] == [run.current_attempt_id]
                assert running[0].fence == run.fence and run.lease_expires_at is not None
            else:
                assert not running

            # One canonical result, pointed to by the run, only for a succeeded run.
            objs = referenced.get(run.id, [])
            assert len(objs) <= 1
            if run.state == RunState.SUCCEEDED:
                (obj,) = objs
                assert (run.result_key, run.result_version_id, run.result_checksum) == (
                    obj.key, obj.version_id, obj.checksum)
                assert run.accepted_attempt_id == obj.attempt_id
                accepted = next(a for a in mine if a.id == obj.attempt_id)
                assert accepted.state == AttemptState.SUCCEEDED and accepted.fence == obj.fence == run.fence
            else:
                assert not objs and run.result_checksum is None and run.accepted_attempt_id is None

            assert not run.cancellation_accepted or run.state == RunState.CANCELED
            assert not run.holds_guard or run.state in ACTIVE_STATES

            # A terminal run never changes again.
            if run.state in TERMINAL_STATES:
                snapshot = (model_to_dict(run), [model_to_dict(a) for a in mine])
                assert self.terminal.setdefault(run.id, snapshot) == snapshot
        assert set(self.terminal) <= {run.id for run in runs}
        assert all(r.state in TERMINAL_STATES for r in runs if r.id in self.terminal)

        # The active-run guard: at most one holder per schedule, the one the schedule names.
        for schedule in Schedule.objects.all():
            mine = [r for r in runs if r.schedule_id == schedule.id]
            holders = [r.id for r in mine if r.holds_guard]
            assert len(holders) <= 1
            assert schedule.active_run_id == (holders[0] if holders else None)
            if schedule.overlap_policy == "allow":
                assert not holders
            else:
                running = [r for r in mine if r.state == RunState.RUNNING]
                assert len(running) <= 1 and all(r.holds_guard for r in running)
                # buffer_one: at most one scheduled occurrence waits besides the holder.
                # A replayed failed occurrence waits for the guard too, asked for explicitly.
                waiting = [r for r in mine if r.state in ACTIVE_STATES and not r.holds_guard
                           and r.trigger == "schedule" and not r.replays]
                assert len(waiting) <= 1


@pytest.mark.django_db(transaction=True)
def test_authority_state_machine__random_interleavings_keep_invariants():
    run_state_machine_as_test(AuthorityMachine, settings=PROFILE)
