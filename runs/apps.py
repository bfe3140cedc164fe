from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "runs"

    def ready(self):
        from runs import checks  # noqa: F401 - registers the database checks
        from runs.capacity.admission import admit_start_deadline
        from schedules.services import admission_register

        admission_register(admit_start_deadline)  # every schedule create and edit passes it
