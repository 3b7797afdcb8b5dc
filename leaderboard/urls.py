from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from leaderboard import openapi
from leaderboard.accounts import views as accounts_views
from leaderboard.benchmarks import views as benchmarks_views
from leaderboard.participation import views as participation_views
from leaderboard.submissions import api as submissions_api
from leaderboard.submissions import views as submissions_views

api_v1 = [
    path("tracks", benchmarks_views.api_tracks, name="api-tracks"),
    path("submissions", submissions_views.api_submissions, name="api-submissions"),
    path("submissions/<int:pk>", submissions_views.api_submission, name="api-submission"),
    path("submissions/<int:pk>/publish", submissions_views.api_publish, name="api-publish"),
    path("tracks/<slug:track>/<slug:split>/manifest", submissions_api.api_manifest, name="api-manifest"),
    path("benchmarks/<slug:track>/participation", participation_views.api_participation, name="api-participation"),
    path("me", accounts_views.api_me, name="api-me"),
    path("quota", submissions_api.api_quota, name="api-quota"),
    path("uploads", submissions_api.api_uploads, name="api-uploads"),
    path("uploads/<int:pk>", submissions_api.api_upload, name="api-upload"),
    path("uploads/<int:pk>/urls", submissions_api.api_upload_urls, name="api-upload-urls"),
    path("uploads/<int:pk>/parts/<int:number>", submissions_api.api_upload_part, name="api-upload-part"),
    path("uploads/<int:pk>/complete", submissions_api.api_upload_complete, name="api-upload-complete"),
    path("my/methods", submissions_api.api_methods, name="api-my-methods"),
    path("my/methods/<int:pk>", submissions_api.api_method, name="api-my-method"),
    path("my/methods/<int:pk>/reveal", submissions_api.api_method_reveal, name="api-my-method-reveal"),
    path("", include("leaderboard.rankings.api_urls")),
    path("openapi.json", openapi.openapi_json, name="api-openapi"),
]

# JSON under /api/ (leaderboard.api_errors), the site's page elsewhere: templates/403.html,
# 404.html (Django's default views render them with the reason) and 500.html (no database);
# 503.html with Retry-After when the 500 was a failed service (leaderboard.ops.unavailable).
# /healthz, /readyz and /metrics are answered before URLs are resolved (leaderboard.ops.probes).
handler500 = "leaderboard.ops.unavailable.server_error"

urlpatterns = [
    path("", include("leaderboard.benchmarks.urls")),
    path("", include("leaderboard.rankings.urls")),
    path("", include("leaderboard.participation.urls")),
    path("submissions/", include("leaderboard.submissions.urls")),
    path("accounts/", include("leaderboard.accounts.urls")),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/v1/", include(api_v1)),
    path("api/", openapi.api_docs, name="api-docs"),
    path("moderation/", include("leaderboard.moderation.urls")),
    path("admin/", admin.site.urls),
    # Browsers ask for /favicon.ico whatever the page links; send them to the SVG.
    path("favicon.ico", RedirectView.as_view(url=static("favicon.svg"), permanent=True), name="favicon"),
]
