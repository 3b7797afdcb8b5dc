from django.urls import path

from leaderboard.benchmarks import views

app_name = "benchmarks"
urlpatterns = [
    path("", views.home, name="home"),
]
