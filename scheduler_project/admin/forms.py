"""The admin's schedule form. An operator's create or edit is the API's request: the same
body validation (scheduler_project/http/schedule_requests.py) and the same services
(schedule_create, schedule_update), recorded on the revision as written by the admin. Their
errors are form errors, and a strict start promise passes the API's admission. A rule is saved only after its next five instants were shown."""

import json
from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django import forms

from kernel.clock import instant
from kernel.errors import DeadlineInfeasible, DomainError, JobTypeForbidden, QuotaExceeded
from schedule_services.lifecycle import rule_warnings, schedule_create, schedule_edit, schedule_preview, schedule_update
from schedules import recurrence
from schedules.audit import Actor
from schedules.models import (
    AuthorKind, JobType, MAX_CONCURRENCY_KEY_LENGTH, MisfirePolicy, OverlapPolicy, Schedule, Tenant,
)
from schedules.specs import DEFAULT_POLICIES

PREVIEW_COUNT = 5
DIFF_SHOWN = 10  # instants of each side of an edit's diff shown on the form
RECURRENCE_KINDS = [("cron", "cron"), ("interval", "interval"), ("after_completion", "after completion"),
                    ("rrule", "RRULE"), ("business_day", "business day")]
# Form field -> key of the request body's recurrence object, per kind (timezone for every kind).
RECURRENCE_KEYS = {"cron": "cron", "dialect": "dialect", "every_seconds": "everySeconds", "anchor": "anchor",
                   "delay_seconds": "delaySeconds", "rrule": "rrule", "dtstart": "dtstart", "exdates": "exdates",
                   "rdates": "rdates", "days": "days", "at_time": "at", "calendar_ids": "calendarIds"}
KIND_FIELDS = {"cron": ("cron", "dialect"), "interval": ("every_seconds", "anchor"), "after_completion": ("delay_seconds",),
               "rrule": ("rrule", "dtstart", "exdates", "rdates"), "business_day": ("days", "at_time", "calendar_ids")}
# The schedule's calendar shapes its instants too: shown before saving like the rule.
RECURRENCE_FIELDS = ("recurrence_kind", "timezone", *RECURRENCE_KEYS, "calendar")
RETRY_KEYS = {
    "retry_max_attempts": "maxAttempts",
    "retry_initial_delay_seconds": "initialDelaySeconds",
    "retry_max_delay_seconds": "maxDelaySeconds",
}
BODY_KEYS = {
    "name": "name",
    "params": "params",
    "misfire_policy": "misfirePolicy",
    "misfire_grace_seconds": "misfireGraceSeconds",
    "overlap_policy": "overlapPolicy",
    "effects": "effects",
    "start_deadline_seconds": "startDeadlineSeconds",
    "jitter_seconds": "jitterSeconds",
    "concurrency_key": "concurrencyKey",
    "labels": "labels",
    "calendar": "calendar",
    "expectations": "expectations",
}
# Window fields (instants as the admin's date and time boxes give them); an emptied box clears one.
WINDOW_KEYS = {"active_from": "activeFrom", "active_until": "activeUntil", "end_after_occurrences": "endAfterOccurrences"}
# The form field showing an error of a request field (its dotted path, or a prefix of it).
FORM_FIELD_OF = {
    **{key: field for field, key in BODY_KEYS.items()},
    **{f"retry.{key}": field for field, key in RETRY_KEYS.items()},
    **{f"recurrence.{key}": field for field, key in RECURRENCE_KEYS.items()},
    **{key: field for field, key in WINDOW_KEYS.items()},
    "jobType": "job_type",
    "recurrence": "recurrence_kind",
    "recurrence.kind": "recurrence_kind",
    "recurrence.timezone": "timezone",
    "retry": "retry_max_attempts",
}
CONTROL_FIELDS = {"expected_revision", "previewed"}


def schedule_zone(schedule: Schedule) -> str:
    return (schedule.recurrence or {}).get("timezone") or "UTC"


def zoned(moment: datetime | None, zone_name: str) -> str:
    """`moment` on the wall clock of `zone_name`, the zone named: 'Mon 2027-03-15 09:00:00 EDT (America/New_York)'."""
    if moment is None:
        return "-"
    try:
        local = moment.astimezone(ZoneInfo(zone_name))
    except (ZoneInfoNotFoundError, ValueError, OverflowError):
        return f"{instant(moment)} (UTC)"
    return f"{local:%a %Y-%m-%d %H:%M:%S %Z} ({zone_name})"


def preview_lines(rule, tenant=None) -> list[str]:
    """The next instants of `rule` as the admin shows them: local with the zone named, and UTC
    (a calendar's moved instant says where from); then its warnings (both cron day fields
    restricted: each dialect's next instants). With `tenant`, its calendars are read."""
    lines = [f"{zoned(at, rule.timezone)} = {instant(at)}" + (f" (moved from {instant(moved)})" if moved else "")
             for at, _, moved, _ in schedule_preview(rule=rule, count=PREVIEW_COUNT, tenant=tenant)]
    if rule.kind == "after_completion":  # one instant: the delay after a run ending now
        return [f"{rule.delay_seconds}s after the previous run ends; for a run ending now: {line}" for line in lines]
    for warning in rule_warnings(rule):
        lines.append(f"warning {warning['code']}: {warning['message']}")
        lines += [f"under {dialect}: {', '.join(at) or 'never'}" for dialect, at in warning["alternatives"].items()]
    return lines


def recurrence_body(values: dict) -> dict:
    """The request's recurrence object from the form's values: the chosen kind's keys only."""
    kind = values.get("recurrence_kind")
    body = {"kind": kind, "timezone": values.get("timezone") or "UTC"}
    for field in KIND_FIELDS.get(kind, ()):
        if values.get(field) not in (None, ""):
            body[RECURRENCE_KEYS[field]] = values[field]
    return body


def recurrence_initial(recurrence: dict) -> dict:
    initial = {field: recurrence.get(key) for field, key in RECURRENCE_KEYS.items()}
    if recurrence.get("kind") == "cron":
        initial["dialect"] = recurrence.get("dialect") or "vixie"
    return {**initial, "recurrence_kind": recurrence.get("kind"), "timezone": recurrence.get("timezone", "UTC")}


def canonical(body: dict) -> str:
    return json.dumps(body, sort_keys=True, separators=(",", ":"))


def shown(values: dict) -> str:
    """What a preview showed: the rule and the schedule's calendar (saving them is confirmed)."""
    return canonical({"recurrence": recurrence_body(values), "calendar": values.get("calendar") or None})


class ScheduleForm(forms.ModelForm):
    tenant = forms.ModelChoiceField(Tenant.objects.order_by("name"))
    name = forms.CharField(max_length=200)
    job_type = forms.ModelChoiceField(JobType.objects.filter(enabled=True).order_by("name"))
    params = forms.JSONField(required=False, initial=dict, help_text="A JSON object, checked against the job type's parameter schema.")
    recurrence_kind = forms.ChoiceField(label="Recurrence", choices=RECURRENCE_KINDS, initial="cron")
    cron = forms.CharField(required=False, strip=False,
                           help_text="cron: 5 fields, or 6 with seconds first (or @daily, ...) on the zone's wall "
                                     "clock; L, W, #, ? and H (fixed by the schedule's id once saved) as in docs/api.md.")
    dialect = forms.ChoiceField(
        required=False, initial="vixie", choices=[(d, d) for d in ("vixie", "and", "or")],
        help_text="cron: how the two day fields combine when both are restricted. vixie: either matches unless a "
                  "field begins with '*'; and: both must match (celery crontab); or: either matches unless one is '*'.",
    )
    timezone = forms.CharField(initial="UTC", help_text="IANA zone name, e.g. America/New_York.")
    every_seconds = forms.IntegerField(required=False, help_text="interval: seconds between instants.")
    anchor = forms.CharField(required=False, help_text="interval: an ISO 8601 instant; default: the time of saving.")
    delay_seconds = forms.IntegerField(required=False, help_text="after completion: seconds after the previous run ends.")
    rrule = forms.CharField(required=False, help_text="RRULE: an RFC 5545 rule, e.g. FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=17;BYMINUTE=0.")
    dtstart = forms.CharField(required=False, help_text="RRULE: its start on the zone's wall clock, e.g. 2027-01-01T00:00:00.")
    exdates = forms.JSONField(required=False, help_text='RRULE: local times left out, e.g. ["2027-12-31T17:00:00"].')
    rdates = forms.JSONField(required=False, help_text="RRULE: local times added.")
    active_from = forms.DateTimeField(required=False, help_text="No occurrence before it (UTC unless an offset is given); empty: open.")
    active_until = forms.DateTimeField(required=False, help_text="No occurrence after it; empty: open.")
    end_after_occurrences = forms.IntegerField(
        required=False, help_text="The schedule ends once this many rule instants were materialized; empty: no end by count.")
    misfire_policy = forms.ChoiceField(choices=MisfirePolicy.choices, initial=DEFAULT_POLICIES["misfirePolicy"])
    misfire_grace_seconds = forms.IntegerField(required=False, initial=DEFAULT_POLICIES["misfireGraceSeconds"])
    overlap_policy = forms.ChoiceField(choices=OverlapPolicy.choices, initial=DEFAULT_POLICIES["overlapPolicy"])
    retry_max_attempts = forms.IntegerField(required=False, help_text="Empty: the job type's default.")
    retry_initial_delay_seconds = forms.FloatField(required=False, help_text="Empty: the job type's default.")
    retry_max_delay_seconds = forms.FloatField(required=False, help_text="Empty: the job type's default.")
    effects = forms.JSONField(
        required=False, initial=dict,
        help_text='e.g. {"email": {"to": ["ops@example.com"]}, "webhook": {"url": "https://hooks.example.com/x"}}',
    )
    start_deadline_seconds = forms.IntegerField(
        required=False, label="Start deadline (seconds)",
        help_text="A strict start promise: each run starts within this many seconds of its due instant at p99. "
                  "Checked against the capacity forecast (admission), as the API does. Empty: ordinary.",
    )
    jitter_seconds = forms.IntegerField(
        required=False, initial=0, help_text="Each occurrence is due a fixed offset of 0 to this many seconds late.",
    )
    concurrency_key = forms.CharField(
        required=False, max_length=MAX_CONCURRENCY_KEY_LENGTH,
        help_text="At most the key's limit (1 unless set under Concurrency limits) of this tenant's attempts with "
                  "this key run at once. Empty: none.",
    )
    days = forms.JSONField(required=False, help_text="business day: which of the month, e.g. [1, -1] (first and last).")
    at_time = forms.CharField(required=False, label="At", help_text="business day: local time HH:MM, e.g. 17:00.")
    calendar_ids = forms.JSONField(required=False, label="Calendar ids",
                                   help_text='business day: calendars whose dates are no business days, e.g. ["cal_..."].')
    calendar = forms.JSONField(
        required=False, help_text='Calendars whose excluded dates the instants skip or move around, e.g. '
                                  '{"calendarIds": ["cal_..."], "policy": "skip" | "shift_before" | "shift_after"}; '
                                  'empty: none.')
    labels = forms.JSONField(
        required=False, initial=dict,
        help_text='At most 20 string pairs, e.g. {"team": "finance"}; the API\'s filters select by them.',
    )
    expectations = forms.JSONField(
        required=False, label="Health expectations",
        help_text='e.g. {"startWithinSeconds": 120, "finishWithinSeconds": 900, "maxConsecutiveFailures": 3, '
                  '"alert": {"email": {"to": ["ops@example.com"]}}}; empty: none.',
    )
    # The revision this edit applies to, and the rule whose instants were last shown.
    expected_revision = forms.IntegerField(required=False, widget=forms.HiddenInput)
    previewed = forms.CharField(required=False, widget=forms.HiddenInput)

    # The staff user saving the form (ScheduleAdmin.get_form): the revision's and the audit's author.
    actor = Actor(AuthorKind.ADMIN, "")

    class Meta:
        model = Schedule
        fields = ()

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.preview: list[str] | None = None  # set when the rule's instants are shown instead of saving
        self.diff: list[str] = []  # an edit's preview: the instants it adds and removes, the directives it orphans
        self.editing = not self.instance._state.adding
        if self.editing:  # tenant and job type stay what they are
            self.fields.pop("tenant", None)
            self.fields.pop("job_type", None)
            self.initial.update(recurrence_initial(self.instance.recurrence), expected_revision=self.instance.revision,
                                calendar=self.instance.calendar)
            self.initial["previewed"] = shown(self.initial)

    def is_valid(self):
        return super().is_valid() and self.preview is None

    def _post_clean(self):
        """Not the model's validation: the API's, then the service, which writes."""
        if self.errors:
            return
        changed = set(self.changed_data) - CONTROL_FIELDS if self.editing else set(self.fields)
        rule = recurrence_body(self.cleaned_data)
        unconfirmed = bool(changed & set(RECURRENCE_FIELDS)) and shown(self.cleaned_data) != self.cleaned_data.get("previewed")
        try:
            spec = self._request_spec(changed) if changed else None
            if "_preview" in self.data or unconfirmed:
                self._show_preview(rule)
                if self.editing and spec is not None:
                    self._show_diff(spec)
            elif spec is not None:  # an edit that changes nothing writes no revision
                self._save(spec)
        except DomainError as exc:
            self._add_domain_error(exc)

    def _request_spec(self, changed: set):
        # The API's request parsing, imported on use: it brings DRF and drf-spectacular, which
        # every process that loads the admin's registrations (workers and loops too) would carry.
        from scheduler_project.http.schedule_requests import schedule_changes, schedule_spec

        values = self.cleaned_data
        body = {key: values[field] for field, key in BODY_KEYS.items() if field in changed and values.get(field) is not None}
        for field in ("params", "effects", "labels"):
            if field in changed and values.get(field) is None:
                body[BODY_KEYS[field]] = {}  # an emptied box clears them
        if "calendar" in changed and values.get("calendar") is None:
            body["calendar"] = None  # an emptied box removes the calendars
        if "expectations" in changed and not values.get("expectations"):
            body["expectations"] = None  # an emptied box removes them
        if "start_deadline_seconds" in changed and values.get("start_deadline_seconds") is None:
            body["startDeadlineSeconds"] = None  # an emptied box removes the promise
        if changed & set(RECURRENCE_FIELDS):
            body["recurrence"] = recurrence_body(values)
        for field, key in WINDOW_KEYS.items():
            if field in changed:
                value = values.get(field)
                body[key] = instant(value) if isinstance(value, datetime) else value
        retry = {key: values[field] for field, key in RETRY_KEYS.items() if field in changed and values.get(field) is not None}
        if retry:
            body["retry"] = retry
        if not self.editing:
            return schedule_spec({**body, "jobType": values["job_type"].name})
        return schedule_changes({**body, "expectedRevision": values.get("expected_revision") or self.instance.revision})[1]

    def _show_preview(self, rule: dict) -> None:
        from scheduler_project.http.schedule_requests import preview_arguments  # on use, see _request_spec

        calendar = self.cleaned_data.get("calendar")
        body = {"recurrence": rule, **({"hashKey": self.instance.id} if self.editing else {}),
                **({"calendar": calendar} if calendar else {})}
        arguments = preview_arguments(body)
        tenant = self.instance.tenant if self.editing else self.cleaned_data["tenant"]
        self.preview = preview_lines(arguments["rule"], tenant)
        self.data = self.data.copy()
        self.data[self.add_prefix("previewed")] = shown(self.cleaned_data)  # saving these next is confirmed

    def _show_diff(self, spec) -> None:
        """What saving this edit would change, from a dry run of it (nothing stored)."""
        edit = schedule_edit(tenant=self.instance.tenant, schedule_id=self.instance.id, changes=spec,
                             expected_revision=self.cleaned_data.get("expected_revision") or self.instance.revision,
                             actor=self.actor, dry_run=True)
        zone = schedule_zone(edit.schedule)
        for side in ("added", "removed"):
            instants = edit.instants_diff[side]
            self.diff.append(f"{side} ({len(instants)}): " + (", ".join(
                zoned(recurrence.parse_instant(at), zone) for at in instants[:DIFF_SHOWN]) or "none")
                + (" ..." if len(instants) > DIFF_SHOWN else ""))
        for directive in edit.orphaned:
            self.diff.append(f"directive orphaned: {directive.action} at {zoned(directive.instant, zone)}"
                             + (f" ({directive.note})" if directive.note else ""))

    def _save(self, spec) -> None:
        if not self.editing:
            self.instance, _ = schedule_create(
                tenant=self.cleaned_data["tenant"], spec=spec, actor=self.actor
            )
            return
        self.instance = schedule_update(
            tenant=self.instance.tenant,
            schedule_id=self.instance.id,
            expected_revision=self.cleaned_data.get("expected_revision") or self.instance.revision,
            changes=spec,
            actor=self.actor,
        )

    def _add_domain_error(self, exc: DomainError) -> None:
        field = exc.details.get("field") or ""
        while field and field not in FORM_FIELD_OF:
            field = field.rpartition(".")[0]
        target = FORM_FIELD_OF.get(field)
        if isinstance(exc, JobTypeForbidden):
            target = "job_type"
        elif isinstance(exc, QuotaExceeded):
            target = "tenant"
        elif isinstance(exc, DeadlineInfeasible):
            target = "start_deadline_seconds"
        self.add_error(target if target in self.fields else None, exc.message)
