from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from leaderboard.benchmarks.selectors import list_benchmarks


def home(request: HttpRequest) -> HttpResponse:
    return render(request, "benchmarks/home.html", {"benchmarks": list_benchmarks()})
