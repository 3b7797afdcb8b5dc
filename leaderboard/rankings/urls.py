from django.urls import path

from leaderboard.rankings import views

app_name = "rankings"
urlpatterns = [
    path("benchmarks/<slug:track>/", views.leaderboard, name="leaderboard"),
    path("benchmarks/<slug:track>/export.<str:fmt>", views.export, name="export"),
    path("benchmarks/<slug:track>/compare/", views.compare, name="compare"),
    path("methods/<int:pk>/", views.method_detail, name="method"),
    path("methods/<int:pk>/bibtex", views.bibtex, name="bibtex"),
    path("entries/<int:pk>/", views.entry_detail, name="entry"),
    path("entries/<int:pk>/bibtex", views.entry_bibtex, name="entry_bibtex"),
]
