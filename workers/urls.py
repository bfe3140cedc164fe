from django.urls import path

from scheduler_project.http.errors import read_only
from scheduler_project.http.objects import object_download

urlpatterns = [
    path("api/v1/objects/<str:token>", read_only(object_download), name="object-download"),
]
