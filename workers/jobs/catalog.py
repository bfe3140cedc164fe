"""The job type catalog (schedules.JobType rows) kept in step with the job declarations.

The declarations are the source; the rows are what the authority and the API read. A row
whose declaration is gone is disabled, never deleted: schedules and runs still refer to it.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.db import transaction

from schedules.models import JobType
from workers.jobs.framework import JobDeclaration, declared_jobs


class CatalogConflict(Exception):
    """The declarations cannot be synced as they are; the message says what to change."""


@dataclass(frozen=True)
class CatalogChange:
    name: str
    kind: str  # "added", "changed" or "disabled"
    fields: dict[str, tuple]  # column -> (row's value, declared value); None for an added row's old value

    def describe(self) -> str:
        if self.kind == "added":
            declared = ", ".join(f"{column}={new!r}" for column, (_, new) in self.fields.items())
            return f"added    {self.name}: {declared}"
        if self.kind == "disabled":
            return f"disabled {self.name}: no declaration any more (its schedules and runs keep the row)"
        changed = ", ".join(f"{column} {old!r} -> {new!r}" for column, (old, new) in self.fields.items())
        return f"changed  {self.name}: {changed}"


def catalog_diff(declarations: dict[str, JobDeclaration], using: str = "default") -> list[CatalogChange]:
    """What syncing would change, by job type name: added and changed rows, then disabled ones."""
    rows = {row.name: row for row in JobType.objects.using(using).order_by("name")}
    changes = []
    for name, declaration in sorted(declarations.items()):
        declared = declaration.catalog_fields() | {"enabled": True}
        row = rows.get(name)
        if row is None:
            changes.append(CatalogChange(name, "added", {column: (None, v) for column, v in declared.items()}))
            continue
        differing = {column: (getattr(row, column), v) for column, v in declared.items() if getattr(row, column) != v}
        if differing:
            changes.append(CatalogChange(name, "changed", differing))
    changes += [CatalogChange(name, "disabled", {"enabled": (True, False)})
                for name, row in rows.items() if name not in declarations and row.enabled]
    return changes


def catalog_refusals(changes: list[CatalogChange], declarations: dict[str, JobDeclaration]) -> list[str]:
    """Why the changes may not be applied: a schema changed in place, or a declaration the catalog rejects."""
    refusals = []
    for change in changes:
        if change.kind == "changed":
            refusals += _schema_version_refusals(change, declarations[change.name])
        if change.kind != "disabled":
            refusals += _invalid_declaration(declarations[change.name])
    return refusals


def _schema_version_refusals(change: CatalogChange, declaration: JobDeclaration) -> list[str]:
    # Schedules pin the schema version their params were validated against, so a new schema
    # needs a new number; reusing one would make two schemas claim the same version.
    declared = declaration.params_schema_version
    current = change.fields.get("params_schema_version", (declared, declared))[0]
    if declared < current:
        return [f"{change.name}: params_schema_version goes back from {current} to {declared}"]
    if "params_schema" in change.fields and declared == current:
        return [f"{change.name}: params_schema changed but params_schema_version is still {current}; "
                f"declare params_schema_version={current + 1} (existing schedules keep their pinned version)"]
    return []


def _invalid_declaration(declaration: JobDeclaration) -> list[str]:
    import jsonschema  # only a sync needs it; schedules.specs says why it is not imported at the top

    row = JobType(name=declaration.name, **declaration.catalog_fields())
    problems = []
    try:
        row.full_clean(validate_unique=False)
    except ValidationError as exc:
        problems += [f"{declaration.name}: {message}" for message in exc.messages]
    try:
        jsonschema.Draft202012Validator.check_schema(declaration.params_schema)
    except jsonschema.SchemaError as exc:
        problems.append(f"{declaration.name}: params_schema is not a JSON Schema: {exc.message}")
    return problems


def job_types_sync(
    declarations: dict[str, JobDeclaration] | None = None, *, apply: bool = True, using: str = "default"
) -> list[CatalogChange]:
    """Bring the catalog in step with the declarations (all declared jobs by default).

    Returns the changes (made, or with ``apply=False`` only found); raises CatalogConflict,
    changing nothing, when any of them is refused.
    """
    declarations = declared_jobs() if declarations is None else declarations
    with transaction.atomic(using=using):
        changes = catalog_diff(declarations, using)
        refusals = catalog_refusals(changes, declarations)
        if refusals:
            raise CatalogConflict("job type declarations refused:\n  " + "\n  ".join(refusals))
        if apply:
            _apply(changes, using)
    return changes


def _apply(changes: list[CatalogChange], using: str) -> None:
    job_types = JobType.objects.using(using)
    added = [JobType(name=c.name, **{column: new for column, (_, new) in c.fields.items()})
             for c in changes if c.kind == "added"]
    # Another process syncing the same declarations at the same time adds the same rows.
    job_types.bulk_create(added, ignore_conflicts=True)
    for change in changes:
        if change.kind != "added":
            job_types.filter(name=change.name).update(**{column: new for column, (_, new) in change.fields.items()})


def schedules_without_job_type(*, limit: int = 20, using: str = "default") -> tuple[int, list[str]]:
    """Live schedules whose job type has no declaration any more: how many, and up to `limit`
    of them described (tenant, id, name, job type) for a start-up warning."""
    from schedules.models import Schedule

    orphans = Schedule.objects.using(using).filter(deleted_at__isnull=True, job_type__enabled=False)
    shown = orphans.order_by("job_type_id", "id").values_list("tenant_id", "id", "name", "job_type_id")[:limit]
    return orphans.count(), [f"{tenant} {sid} {name!r}: job type {job_type}" for tenant, sid, name, job_type in shown]
