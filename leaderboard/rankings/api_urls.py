"""Read-only API of the public leaderboards (mounted under /api/v1/)."""

from django.urls import path

from leaderboard.rankings import challenge_views, views

urlpatterns = [
    path("leaderboards/<slug:track>", views.api_leaderboard, name="api-leaderboard"),
    path("leaderboards/<slug:track>/compare", views.api_compare, name="api-compare"),
    path("leaderboards/<slug:track>/progress", views.api_progress, name="api-progress"),
    path("leaderboards/<slug:track>/challenges/<slug:name>", challenge_views.api_challenge, name="api-challenge"),
    path("methods/<int:pk>", views.api_method, name="api-method"),
]
