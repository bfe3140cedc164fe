from django.urls import path

from workers.object_views import object_download

urlpatterns = [
    path("api/v1/objects/<str:token>", object_download, name="object-download"),
]
