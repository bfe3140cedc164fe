"""The schedule services: every change a user asks of a schedule or of its coming occurrences
(create, edit, pause and resume, delete, with strict-start admission; occurrence directives;
concurrency-key limits; bulk actions; a celery beat import), each one durable transaction
under the locks of runs.authority.locks. Above the authority: they read runs (is this instant
materialized, how many run under this key) and ask runs.capacity to admit a strict schedule;
the authority never calls them. HTTP views, the admin, the console and commands call them."""
