"""The contract's endpoints, mounted under /api/v1/ (no trailing slashes)."""

from django.urls import path

from scheduler_project.http.calendars import (
    CalendarCollectionView, CalendarDetailView, CalendarImportView, CalendarRevisionsView,
)
from scheduler_project.http.capacity import CapacityForecastView, ScheduleBackfillView, ScheduleStatisticsView
from scheduler_project.http.concurrency_keys import ConcurrencyKeyListView, ConcurrencyKeyView
from scheduler_project.http.health import IncidentCollectionView, ScheduleHealthView
from scheduler_project.http.occurrences import ScheduleOccurrenceView, ScheduleOccurrencesView
from scheduler_project.http.runs import (
    RunCancelView, RunCollectionView, RunDetailView, RunReleaseView, RunReplayView, RunResultView,
)
from scheduler_project.http.schedules import (
    AuditView, BulkPauseView, BulkResumeView, JobTypeListView, ScheduleCollectionView, ScheduleDetailView,
    ScheduleInstantsView, SchedulePauseView, SchedulePreviewView, ScheduleResumeView, ScheduleRevisionsView,
    ScheduleRunsView,
)
from scheduler_project.http.workers import ClaimView, CompleteView, HeartbeatView, ResultUploadView

urlpatterns = [
    path("job-types", JobTypeListView.as_view(), name="job-type-list"),
    path("schedules", ScheduleCollectionView.as_view(), name="schedule-list"),
    # Before schedules/<id>, so "preview" is never taken for an id.
    path("schedules/preview", SchedulePreviewView.as_view(), name="schedule-preview"),
    path("schedules/pause", BulkPauseView.as_view(), name="schedule-bulk-pause"),
    path("schedules/resume", BulkResumeView.as_view(), name="schedule-bulk-resume"),
    path("schedules/<str:schedule_id>", ScheduleDetailView.as_view(), name="schedule-detail"),
    path("schedules/<str:schedule_id>/pause", SchedulePauseView.as_view(), name="schedule-pause"),
    path("schedules/<str:schedule_id>/resume", ScheduleResumeView.as_view(), name="schedule-resume"),
    path("schedules/<str:schedule_id>/runs", ScheduleRunsView.as_view(), name="schedule-runs"),
    path("schedules/<str:schedule_id>/revisions", ScheduleRevisionsView.as_view(), name="schedule-revisions"),
    path("schedules/<str:schedule_id>/preview", ScheduleInstantsView.as_view(), name="schedule-instants"),
    path("schedules/<str:schedule_id>/backfill", ScheduleBackfillView.as_view(), name="schedule-backfill"),
    path("schedules/<str:schedule_id>/statistics", ScheduleStatisticsView.as_view(), name="schedule-statistics"),
    path("calendars", CalendarCollectionView.as_view(), name="calendar-list"),
    path("calendars/<str:calendar_id>", CalendarDetailView.as_view(), name="calendar-detail"),
    path("calendars/<str:calendar_id>/import", CalendarImportView.as_view(), name="calendar-import"),
    path("calendars/<str:calendar_id>/revisions", CalendarRevisionsView.as_view(), name="calendar-revisions"),
    path("schedules/<str:schedule_id>/occurrences", ScheduleOccurrencesView.as_view(), name="schedule-occurrences"),
    path("schedules/<str:schedule_id>/occurrences/<str:at>", ScheduleOccurrenceView.as_view(),
         name="schedule-occurrence"),
    path("schedules/<str:schedule_id>/health", ScheduleHealthView.as_view(), name="schedule-health"),
    path("incidents", IncidentCollectionView.as_view(), name="incident-list"),
    path("audit", AuditView.as_view(), name="audit-list"),
    path("capacity/forecast", CapacityForecastView.as_view(), name="capacity-forecast"),
    path("concurrency-keys", ConcurrencyKeyListView.as_view(), name="concurrency-key-list"),
    path("concurrency-keys/<str:key>", ConcurrencyKeyView.as_view(), name="concurrency-key-detail"),
    path("runs", RunCollectionView.as_view(), name="run-list"),
    path("runs/<str:run_id>", RunDetailView.as_view(), name="run-detail"),
    path("runs/<str:run_id>/cancel", RunCancelView.as_view(), name="run-cancel"),
    path("runs/<str:run_id>/replay", RunReplayView.as_view(), name="run-replay"),
    path("runs/<str:run_id>/release", RunReleaseView.as_view(), name="run-release"),
    path("runs/<str:run_id>/result", RunResultView.as_view(), name="run-result"),
    path("worker/claim", ClaimView.as_view(), name="worker-claim"),
    path("worker/heartbeat", HeartbeatView.as_view(), name="worker-heartbeat"),
    path("worker/complete", CompleteView.as_view(), name="worker-complete"),
    path(
        "worker/runs/<str:run_id>/attempts/<str:attempt_id>/result",
        ResultUploadView.as_view(),
        name="worker-result-upload",
    ),
]
