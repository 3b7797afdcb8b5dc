from django.urls import path

from leaderboard.moderation import participation_views, views

app_name = "moderation"
urlpatterns = [
    path("", views.desk, name="desk"),
    path("audit/", views.audit, name="audit"),
    path("health/", views.health_page, name="health"),
    path("submissions/<int:pk>/", views.submission, name="submission"),
    path("submissions/<int:pk>/<slug:action>/", views.act, name="act"),
    path("tracks/<slug:track>/", views.track, name="track"),
    path("tracks/<slug:track>/finals/<slug:split>.zip", views.finals, name="finals"),
    path("tracks/<slug:track>/participants/", participation_views.participants, name="participants"),
    path("tracks/<slug:track>/participants.csv", participation_views.participants_csv, name="participants_csv"),
    path("tracks/<slug:track>/announcements/", participation_views.outreach, name="outreach"),
    path("bans/", participation_views.bans, name="bans"),
]
