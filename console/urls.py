from django.contrib.auth.views import LogoutView
from django.urls import path

from console import health_views, run_views, schedule_views, views

app_name = "console"

urlpatterns = [
    path("", views.overview, name="overview"),
    path("login/", views.ConsoleLoginView.as_view(), name="login"),
    path("logout/", LogoutView.as_view(next_page="console:login"), name="logout"),
    path("next-24-hours/", views.next_day, name="next_day"),
    path("schedules/", schedule_views.schedule_list, name="schedules"),
    path("schedules/<str:schedule_id>/", schedule_views.schedule_detail, name="schedule"),
    path("schedules/<str:schedule_id>/occurrences/<str:verb>/", schedule_views.occurrence_action,
         name="occurrence_action"),
    path("schedules/<str:schedule_id>/<str:verb>/", schedule_views.schedule_action, name="schedule_action"),
    path("runs/", run_views.run_list, name="runs"),
    path("runs/<str:run_id>/", run_views.run_detail, name="run"),
    path("runs/<str:run_id>/result/", run_views.run_result, name="run_result"),
    path("runs/<str:run_id>/cancel/", run_views.run_cancel_view, name="run_cancel"),
    path("runs/<str:run_id>/replay/", run_views.run_replay_view, name="run_replay"),
    path("runs/<str:run_id>/release/", run_views.run_release_view, name="run_release"),
    path("health/", health_views.health, name="health"),
    path("effects/", views.uncertain_effects, name="effects"),
    path("effects/<str:effect_id>/resolve/", views.resolve_effect, name="resolve_effect"),
]
