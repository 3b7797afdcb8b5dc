"""Read-only API of the public leaderboards (mounted under /api/v1/)."""

from django.urls import path

from leaderboard.rankings import views

urlpatterns = [
    path("leaderboards/<slug:track>", views.api_leaderboard, name="api-leaderboard"),
    path("leaderboards/<slug:track>/compare", views.api_compare, name="api-compare"),
    path("leaderboards/<slug:track>/progress", views.api_progress, name="api-progress"),
    path("methods/<int:pk>", views.api_method, name="api-method"),
]
