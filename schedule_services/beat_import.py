"""Plan and apply an import of django-celery-beat's PeriodicTask rows as ``celery.task`` schedules.

Idempotent: every imported row is remembered (BeatImport, keyed on the tenant and the
PeriodicTask's name), so importing again creates nothing new. The whole import is one
transaction under the tenant's lock: the schedules, the import records, the tenant's
allowlist and, with ``disable_beat``, the beat rows' ``enabled=False`` all commit together,
so there is never a moment when beat and this scheduler both run a row.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime

from django.db import transaction

from kernel.errors import DomainError
from schedule_services.lifecycle import schedule_create
from schedules import recurrence
from schedules.audit import Actor
from schedules.beat.instants import beat_cron_instants, dst_notes
from schedules.beat.rules import Translation, translate
from schedules.celery_task_allowlist import CELERY_TASK_JOB_TYPE
from schedules.models import AuthorKind, BeatImport, JobType, Tenant
from schedules.specs import ScheduleSpec, validate_params

NEXT_COUNT = 5
# Beat rows that are not a team's tasks: this scheduler's housekeeping (install_housekeeping)
# and Celery's own (celery.backend_cleanup).
OWN_TASK_PREFIXES = ("scheduler.", "celery.")


@dataclass
class RowPlan:
    name: str
    task: str
    periodic_task_id: int
    status: str  # "import", "imported", "already imported", "refused", "skipped"
    reason: str = ""
    translation: Translation | None = None
    params: dict | None = None
    schedule_id: str | None = None
    beat_next: list[datetime] = field(default_factory=list)
    ours_next: list[datetime] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def beat_rule(self) -> str:
        return self.translation.beat_rule if self.translation else ""


def plan_import(tenant: Tenant, now: datetime, *, progress=None) -> list[RowPlan]:
    """What importing every PeriodicTask row for ``tenant`` would do, by row name.
    ``progress(total)``, if given, is a context manager yielding ``advance(n)`` per row planned."""
    from django_celery_beat.models import PeriodicTask

    imported = dict(BeatImport.objects.filter(tenant=tenant).values_list("periodic_task_name", "schedule_id"))
    rows = list(PeriodicTask.objects.select_related("crontab", "interval", "clocked", "solar").order_by("name"))
    if progress is None:
        return [_plan_row(row, imported, now) for row in rows]
    plans = []
    with progress(len(rows)) as advance:
        for row in rows:
            plans.append(_plan_row(row, imported, now))
            advance(1)
    return plans


def _plan_row(row, imported: dict, now: datetime) -> RowPlan:
    plan = RowPlan(name=row.name, task=row.task, periodic_task_id=row.id, status="import")
    if row.name in imported:
        plan.status, plan.schedule_id = "already imported", imported[row.name]
        return plan
    if row.task.startswith(OWN_TASK_PREFIXES):
        plan.status, plan.reason = "skipped", "the scheduler's or Celery's own housekeeping task"
        return plan
    plan.translation = translation = translate(row, now)
    plan.notes = list(translation.notes)
    if translation.refusal:
        plan.status, plan.reason = "refused", translation.refusal
        return plan
    if not row.enabled:
        plan.status, plan.reason = "skipped", "disabled in beat"
        return plan
    plan.params, problem = _params(row)
    if problem:
        plan.status, plan.reason = "refused", problem
        return plan
    _preview(plan, row, translation.rule, now)
    if not _registered(row.task):
        plan.notes.append(f"{row.task} is not registered in this process's Celery app: its runs fail until "
                          f"the workers have it")
    return plan


def _params(row) -> tuple[dict | None, str]:
    try:
        args, kwargs = json.loads(row.args or "[]"), json.loads(row.kwargs or "{}")
    except ValueError as exc:
        return None, f"args/kwargs are not JSON: {exc}"
    params = {"task": row.task, **({"args": args} if args else {}), **({"kwargs": kwargs} if kwargs else {})}
    job_type = JobType.objects.filter(name=CELERY_TASK_JOB_TYPE, enabled=True).first()
    if job_type is None:
        return None, f"the {CELERY_TASK_JOB_TYPE} job type is not in the catalog (run manage.py migrate)"
    try:
        validate_params(job_type, params)
    except DomainError as exc:
        return None, f"not valid {CELERY_TASK_JOB_TYPE} params: {exc.message}"
    return params, ""


def _preview(plan: RowPlan, row, rule: recurrence.Rule, now: datetime) -> None:
    plan.ours_next = recurrence.preview(rule, now, NEXT_COUNT)
    if row.crontab_id and rule.kind == "cron":
        plan.beat_next = beat_cron_instants(row.crontab.schedule, now, NEXT_COUNT)
        plan.notes += dst_notes(row.crontab.schedule, rule, now) or ["DST: beat and ours agree on the coming year"]
    else:
        plan.beat_next = list(plan.ours_next)  # elapsed time and single instants: the same by construction


def _registered(task_name: str) -> bool:
    from scheduler_project.celery import app

    return task_name in app.tasks


def apply_import(tenant: Tenant, plans: list[RowPlan], *, disable_beat: bool) -> list[str]:
    """Create the planned schedules; returns the task names added to the allowlist.

    The tenant's allowlist first, in one transaction; then each row: its schedule through the
    schedule service (a transaction of its own: it admits the schedule and cannot run inside
    a larger one), then, in one transaction right after, its import record and (with
    `disable_beat`) enabled=False on its beat row. No row is imported twice: the schedule
    carries an idempotency key named after the PeriodicTask and the import record is unique
    per task name, so a run stopped midway is completed by running it again, and a row
    imported meanwhile by another run is replayed, not created again."""
    with transaction.atomic(durable=True):
        tenant = Tenant.objects.select_for_update().get(id=tenant.id)
        done = set(BeatImport.objects.filter(tenant=tenant).values_list("periodic_task_name", flat=True))
        todo = [plan for plan in plans if plan.status == "import" and plan.name not in done]
        added = sorted({plan.task for plan in todo} - set(tenant.celery_tasks))
        _grant(tenant, added, bool(todo))
    for plan in todo:
        plan.schedule_id = _import(tenant, plan, disable_beat=disable_beat)
        plan.status = "imported"
    return added


def _grant(tenant: Tenant, task_names: list[str], needs_job_type: bool) -> None:
    """The tenant may run the imported tasks: they go on its allowlist, and it gets the job type."""
    if task_names:
        tenant.celery_tasks = sorted(set(tenant.celery_tasks) | set(task_names))
        tenant.save(update_fields=["celery_tasks"])
    if needs_job_type and not tenant.allowed_job_types.filter(name=CELERY_TASK_JOB_TYPE).exists():
        tenant.allowed_job_types.add(JobType.objects.get(name=CELERY_TASK_JOB_TYPE))


def _import(tenant: Tenant, plan: RowPlan, *, disable_beat: bool) -> str:
    from django_celery_beat.models import PeriodicTask, PeriodicTasks

    translation = plan.translation
    spec = ScheduleSpec(
        name=plan.name, job_type=CELERY_TASK_JOB_TYPE, params=plan.params, recurrence=translation.rule,
        overlap_policy="allow",  # beat sends every instant whatever still runs
        **translation.misfire,
    )
    schedule, _ = schedule_create(tenant=tenant, spec=spec, actor=Actor(AuthorKind.ADMIN, "import_beat"),
                                  idempotency_key=f"import_beat:{plan.name}")
    with transaction.atomic(durable=True):
        record, _ = BeatImport.objects.get_or_create(
            tenant=tenant, periodic_task_name=plan.name,
            defaults={"periodic_task_id": plan.periodic_task_id, "schedule": schedule},
        )
        if disable_beat:
            PeriodicTask.objects.filter(id=plan.periodic_task_id).update(enabled=False, last_run_at=None)
            PeriodicTasks.update_changed()  # beat's database scheduler reloads its rows on this mark
    return record.schedule_id
