"""The admin: every registration of this project's models, one module per app's models
(schedules, calendars, runs, effects, workers' beat tables), with the schedule form that
validates through the HTTP request rules and the schedule services. Read where the admin's
URLs are (scheduler_project/urls.py calls autodiscover): a worker or scanner process never
imports it."""

from scheduler_project.admin import calendars, effects, runs, schedules, workers  # noqa: F401  registers each
