from django.urls import path

from leaderboard.submissions import views

app_name = "submissions"
urlpatterns = [
    path("", views.mine, name="mine"),
    path("new/<slug:track>/", views.submit, name="submit"),
    path("methods/", views.methods, name="methods"),
    path("methods/<int:pk>/", views.method, name="method"),
    path("methods/<int:pk>/reveal/", views.reveal, name="reveal"),
    path("teams/<slug:slug>/", views.team_history, name="team"),
    path("<int:pk>/", views.detail, name="detail"),
    path("<int:pk>/status.json", views.status, name="status"),
    path("<int:pk>/publish/", views.publish, name="publish"),
    path("<int:pk>/cancel/", views.cancel, name="cancel"),
]
