from django.urls import path

from leaderboard.moderation import views

app_name = "moderation"
urlpatterns = [
    path("", views.desk, name="desk"),
    path("audit/", views.audit, name="audit"),
    path("health/", views.health_page, name="health"),
    path("submissions/<int:pk>/", views.submission, name="submission"),
    path("submissions/<int:pk>/<slug:action>/", views.act, name="act"),
    path("tracks/<slug:track>/", views.track, name="track"),
    path("tracks/<slug:track>/finals/<slug:split>.zip", views.finals, name="finals"),
]
