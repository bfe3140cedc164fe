from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from runs.metrics import metrics_view
from scheduler_project.http.errors import read_only

admin.autodiscover()  # here, not at start-up (settings.py): only processes that serve URLs need it

urlpatterns = [
    path("admin/", admin.site.urls),
    path("console/", include("console.urls")),
    # Outside DRF: read_only answers a write method with the contract's 405, not a CSRF page.
    path("metrics", read_only(metrics_view), name="metrics"),
    # What a browser asks for on a page that names no icon (the admin's, an API answer).
    path("favicon.ico", RedirectView.as_view(url=static("scheduler/favicon.svg"), permanent=True)),
    path("", include("workers.urls")),
    # DRF views, but their renderers (YAML, HTML) cannot render an error body.
    path("api/schema/", read_only(SpectacularAPIView.as_view()), name="schema"),
    path("api/docs/", read_only(SpectacularSwaggerView.as_view(url_name="schema")), name="docs"),
    path("api/redoc/", read_only(SpectacularRedocView.as_view(url_name="schema", template_name="api_docs/redoc.html")),
         name="redoc"),
    path("api/v1/", include("scheduler_project.api_urls")),
]

# Every error, even one that never reaches a view, has the contract's JSON body.
handler400 = "scheduler_project.http.errors.bad_request"
handler403 = "scheduler_project.http.errors.permission_denied"
handler404 = "scheduler_project.http.errors.page_not_found"
handler500 = "scheduler_project.http.errors.server_error"
