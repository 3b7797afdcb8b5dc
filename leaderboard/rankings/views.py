from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from leaderboard.accounts.auth import api_auth, api_error
from leaderboard.benchmarks.models import Split
from leaderboard.benchmarks.selectors import get_split
from leaderboard.rankings.selectors import entry_as_json, list_entries, rank


def _view_spec(split: Split, metric: str | None) -> dict[str, Any]:
    """The columns of one leaderboard view: overall then each group, for one metric."""
    spec = split.benchmark.spec
    metric = metric if metric in spec.metrics else spec.primary_metric
    columns = [metric] + [f"{group}/{metric}" for group in spec.groups]
    headers = ["Overall"] + list(spec.groups)
    return {"spec": spec, "metric": metric, "columns": columns, "headers": headers}


def leaderboard(request: HttpRequest, track: str) -> HttpResponse:
    split = get_split(track, request.GET.get("split"))
    view = _view_spec(split, request.GET.get("metric"))
    rows = rank(list(list_entries(split)))
    context = {"benchmark": split.benchmark, "split": split, "splits": split.benchmark.splits.all(),
               **view, "table": [(row, [row.entry.scores.get(c) for c in view["columns"]]) for row in rows]}
    return render(request, "rankings/leaderboard.html", context)


@api_auth(required=False)
def api_leaderboard(request: HttpRequest, track: str) -> JsonResponse:
    split = get_split(track, request.GET.get("split"))
    view = _view_spec(split, request.GET.get("metric"))
    spec = view["spec"]
    if request.GET.get("metric") and request.GET["metric"] not in spec.metrics:
        return api_error(f"Expected metric to be one of {', '.join(spec.metrics)}, "
                         f"but got {request.GET['metric']!r}.", 400)
    columns = list(spec.metrics) + [f"{g}/{m}" for g in spec.groups for m in spec.metrics]
    rows = rank(list(list_entries(split)))
    return JsonResponse({"track": track, "split": split.name, "primary_metric": spec.primary_metric,
                         "metrics": list(spec.metrics), "groups": list(spec.groups),
                         "rows": [entry_as_json(row, columns) for row in rows]})
