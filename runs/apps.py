from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "runs"

    def ready(self):
        from django.db.backends.signals import connection_created

        from kernel.connections import compiled_timestamptz_loader, pool_checks_without_round_trip
        from runs import checks  # noqa: F401 - registers the database checks

        connection_created.connect(compiled_timestamptz_loader, dispatch_uid="compiled_timestamptz_loader")
        connection_created.connect(pool_checks_without_round_trip, dispatch_uid="pool_checks_without_round_trip")
