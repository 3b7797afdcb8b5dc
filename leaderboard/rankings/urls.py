from django.urls import path

from leaderboard.rankings import challenge_views, views

app_name = "rankings"
urlpatterns = [
    path("benchmarks/<slug:track>/", views.leaderboard, name="leaderboard"),
    path("benchmarks/<slug:track>/export.<str:fmt>", views.export, name="export"),
    path("benchmarks/<slug:track>/compare/", views.compare, name="compare"),
    path("benchmarks/<slug:track>/challenges/<slug:name>/", challenge_views.challenge, name="challenge"),
    path("benchmarks/<slug:track>/challenges/<slug:name>/export.<str:fmt>", challenge_views.challenge_export,
         name="challenge-export"),
    path("benchmarks/<slug:track>/challenges/<slug:name>/bibtex", challenge_views.challenge_bibtex,
         name="challenge-bibtex"),
    path("methods/<int:pk>/", views.method_detail, name="method"),
    path("methods/<int:pk>/bibtex", views.bibtex, name="bibtex"),
    path("entries/<int:pk>/", views.entry_detail, name="entry"),
    path("entries/<int:pk>/bibtex", views.entry_bibtex, name="entry_bibtex"),
]
