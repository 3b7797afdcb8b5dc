from django.urls import path

from leaderboard.participation import views

app_name = "participation"
urlpatterns = [
    path("benchmarks/<slug:track>/terms/", views.terms, name="terms"),
]
