"""Filters of the tenant-wide run listing (`GET /runs`): their shape and limits; the body of a replay."""

import json

from rest_framework import serializers

from schedules.models import JobType
from scheduler_project.http.schedule_requests import MAX_JOB_TYPE_LENGTH, OneLineField
from scheduler_project.http.schemas import RUN_STATES
from scheduler_project.http.validation import (
    InstantField,
    StrictCharField,
    StrictSerializer,
    lookup_id,
    validate_body,
)

RUN_FILTERS = frozenset({"state", "scheduleId", "jobType", "since"})
MAX_REPLAY_NOTE = 500


class ReplaySerializer(StrictSerializer):
    note = OneLineField(required=False, allow_blank=True, max_length=MAX_REPLAY_NOTE,
                        help_text="Why the run is replayed, recorded with the replay: one line, at most 500 characters")


class RunStatesField(StrictCharField):
    """One state or several, comma-separated (`failed,canceled`)."""

    def to_internal_value(self, data):
        states = super().to_internal_value(data).split(",")
        unknown = [state for state in states if state not in RUN_STATES]
        if unknown:
            raise serializers.ValidationError(f"{unknown[0][:50]!r} is not a run state; one of {', '.join(RUN_STATES)}")
        return tuple(dict.fromkeys(states))


class JobTypeNameField(StrictCharField):
    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if not JobType.objects.filter(name=value).exists():
            raise serializers.ValidationError(f"no job type named {value[:100]!r}")
        return value


class ScheduleIdField(StrictCharField):
    def to_internal_value(self, data):
        return lookup_id(super().to_internal_value(data))  # an id that cannot exist is a 404


class RunFilterSerializer(StrictSerializer):
    state = RunStatesField(required=False, max_length=200, source="states")
    scheduleId = ScheduleIdField(required=False, max_length=100, source="schedule_id")
    jobType = JobTypeNameField(required=False, max_length=MAX_JOB_TYPE_LENGTH, source="job_type")
    since = InstantField(required=False, help_text="Runs scheduled at or after this instant")


def run_filters(query_params) -> dict:
    """`tenant_runs_page`'s filter arguments from the query string (a repeated name: its last value)."""
    given = {name: query_params.get(name) for name in RUN_FILTERS if name in query_params}
    return dict(validate_body(RunFilterSerializer, given))


def run_filters_scope(tenant_id: str, filters: dict) -> str:
    """A cursor's scope: the tenant and the exact filters, so a cursor pages only the listing it came from."""
    return f"tenant-runs:{tenant_id}:" + json.dumps(filters, sort_keys=True, default=str)
