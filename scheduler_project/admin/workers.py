"""django-celery-beat's models ("Periodic tasks", "Intervals", ...) drive the housekeeping
backstops of Redis mode only. Embedded mode (no REDIS_URL: no broker, no beat) never reads
them, so there the admin hides them and refuses their pages."""

import django_celery_beat.admin  # noqa: F401  registers beat's models before they are wrapped
from django.apps import apps
from django.conf import settings
from django.contrib import admin


def _with_broker_only(model_admin_class: type) -> type:
    def allowed(check):
        return lambda self, request, *args: bool(settings.REDIS_URL) and check(self, request, *args)

    checks = ("has_module_permission", "has_view_permission", "has_add_permission",
              "has_change_permission", "has_delete_permission")
    members = {name: allowed(getattr(model_admin_class, name)) for name in checks}
    return type(f"BrokerOnly{model_admin_class.__name__}", (model_admin_class,), members)


for model in apps.get_app_config("django_celery_beat").get_models():
    if admin.site.is_registered(model):
        model_admin = admin.site.get_model_admin(model)
        admin.site.unregister(model)
        admin.site.register(model, _with_broker_only(type(model_admin)))
