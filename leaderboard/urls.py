from django.contrib import admin
from django.urls import include, path

from leaderboard import openapi
from leaderboard.benchmarks import views as benchmarks_views
from leaderboard.submissions import views as submissions_views

api_v1 = [
    path("tracks", benchmarks_views.api_tracks, name="api-tracks"),
    path("submissions", submissions_views.api_submissions, name="api-submissions"),
    path("submissions/<int:pk>", submissions_views.api_submission, name="api-submission"),
    path("submissions/<int:pk>/publish", submissions_views.api_publish, name="api-publish"),
    path("", include("leaderboard.rankings.api_urls")),
    path("openapi.json", openapi.openapi_json, name="api-openapi"),
]

urlpatterns = [
    path("", include("leaderboard.benchmarks.urls")),
    path("", include("leaderboard.rankings.urls")),
    path("submissions/", include("leaderboard.submissions.urls")),
    path("accounts/", include("leaderboard.accounts.urls")),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/v1/", include(api_v1)),
    path("api/", openapi.api_docs, name="api-docs"),
    path("moderation/", include("leaderboard.moderation.urls")),
    path("admin/", admin.site.urls),
]
