from django.apps import AppConfig


class WorkersConfig(AppConfig):
    name = "workers"

    def ready(self):
        # The built-in jobs register themselves with the job registry on import.
        import workers.jobs.builtin  # noqa: F401
