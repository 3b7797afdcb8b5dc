from django.urls import path

from leaderboard.rankings import views

app_name = "rankings"
urlpatterns = [
    path("benchmarks/<slug:track>/", views.leaderboard, name="leaderboard"),
]
