from django.urls import path

from leaderboard.benchmarks import views

app_name = "benchmarks"
urlpatterns = [
    path("", views.home, name="home"),
    path("metrics/", views.metrics_page, name="metrics"),
    path("schemas/benchmark-bundle.json", views.bundle_schema, name="bundle_schema"),
    path("benchmarks/<slug:track>/format/", views.format_page, name="format"),
    path("benchmarks/<slug:track>/pages/<slug:page>/", views.host_page, name="page"),
    path("benchmarks/<slug:track>/format/sample/<str:form>", views.format_sample, name="format_sample"),
]
