from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "runs"

    def ready(self):
        from runs import checks  # noqa: F401 - registers the database checks
