"""The scheduling authority: the only code that changes an occurrence's state, fence,
lease, attempts or result pointer. API views, Celery tasks, admin actions and commands
call these functions; each is one durable database transaction (none can run inside a
caller's transaction, so none can hold row locks across a caller's network call), with
locks taken in the order tenant, schedule, occurrence, and authority time read from the
database after lock waits. Every SQL statement they run is a named function of the
statement catalogue, runs/authority/statements/ (the PostgreSQL/SQLite differences in its
dialect.py alone).
"""

from runs.authority.armed_timers import Armed, arm, fire_armed
from runs.authority.backfill import Backfilled, release_backfill, schedule_backfill
from runs.authority.claims import claim, claim_many, claimable_exists
from runs.authority.completer import Outcome, complete_many
from runs.authority.completion import complete
from runs.authority.group_commit import Completed, Success, complete_succeeded
from runs.authority.materialize import MaterializeStats, ScanCycle, materialize_due
from runs.authority.operations import promote_due_runs, run_cancel, run_once, run_release, run_replay
from runs.authority.ownership import heartbeat, heartbeat_many, restart_deadline, still_owns
from runs.authority.run_progress import record_progress
from runs.authority.resume import resume_due_pauses, schedule_resume, schedules_resume_action
from runs.authority.staging import Upload, check_result_size, result_key, stage_record, stage_register
from runs.authority.sweep import sweep_expired_leases
from runs.authority.unknown_job_types import pass_over

__all__ = [
    "Armed",
    "Backfilled",
    "Completed",
    "MaterializeStats",
    "Outcome",
    "ScanCycle",
    "Success",
    "Upload",
    "arm",
    "check_result_size",
    "claim",
    "claim_many",
    "claimable_exists",
    "complete",
    "complete_many",
    "complete_succeeded",
    "fire_armed",
    "heartbeat",
    "heartbeat_many",
    "materialize_due",
    "pass_over",
    "promote_due_runs",
    "record_progress",
    "release_backfill",
    "result_key",
    "restart_deadline",
    "resume_due_pauses",
    "run_cancel",
    "run_once",
    "run_release",
    "run_replay",
    "schedule_backfill",
    "schedule_resume",
    "schedules_resume_action",
    "stage_record",
    "stage_register",
    "still_owns",
    "sweep_expired_leases",
]
