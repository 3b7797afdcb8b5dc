"""Public leaderboard pages, exports, method and compare pages, and their API."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from typing import Any

import orjson
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse

from leaderboard.accounts.auth import api_auth
from leaderboard.api_errors import api_error
from leaderboard.benchmarks import phases
from leaderboard.benchmarks.models import Split
from leaderboard.benchmarks.permissions import results_embargoed
from leaderboard.benchmarks.selectors import get_split
from leaderboard.lib import thresholds
from leaderboard.lib.pagecache import cache_until, cached_page
from leaderboard.rankings import charts, paired_tests
from leaderboard.rankings.drilldown import Drilldown, drilldown
from leaderboard.rankings.models import ANONYMOUS_LABEL, LeaderboardEntry, interval_columns
from leaderboard.rankings.numbers import cleaned
from leaderboard.rankings.selectors import (
    LeaderboardView,
    PublicMethod,
    RankedRow,
    best_over_time,
    entry_as_json,
    export_rows,
    group_profile,
    group_references,
    leaderboard_page,
    missing_metric,
    ordered_entries,
    reference_entries,
    reference_lines,
)
from leaderboard.rankings.services import reveal_if_due
from leaderboard.submissions.models import Method

MAX_EXPORT_ROWS = 10_000
MAX_ID = 2**63 - 1  # a BigAutoField's largest value
# A spreadsheet runs a cell starting with one of these as a formula (OWASP "CSV injection").
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _csv_cell(value: Any) -> Any:
    """Text that a spreadsheet would run, quoted with a leading apostrophe; numbers stay numbers."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def _significance_cells(fields: dict[str, Any]) -> tuple[Any, Any, str]:
    """The CSV's ``adjusted_p_value``, ``no_significant_difference_from_row_above`` (True/False) and
    ``paired_test_note``; all empty where the row was not tested against the row above."""
    p = fields["adjusted_p_value"]
    if p is None:
        return "", "", ""
    return p, fields["no_significant_difference_from_entry_id"] is not None, fields["paired_test_note"]


def _embargoed(request: HttpRequest, split: Split) -> bool:
    # A cached copy must not outlive the embargo, nor the phase: the page shows more after them.
    cache_until(request, split.results_visible_after)
    following = phases.next_change(split)
    cache_until(request, following[1] if following else None)
    return results_embargoed(split, request.user)


def _view(request: HttpRequest, track: str) -> LeaderboardView:
    split = reveal_if_due(get_split(track, request.GET.get("split")))
    return LeaderboardView.from_query(split, request.GET, embargoed=_embargoed(request, split))


def _iou_links(view: LeaderboardView) -> list[tuple[str, str, bool]]:
    """The board's and compare's IoU toggle: the same metric and sort column at each threshold."""
    return thresholds.links(view.split.benchmark.spec, view.iou, lambda t: "?" + view.query(
        metric=thresholds.metric_at(view.metric, t), sort=thresholds.metric_at(view.sort, t), page=1))


def _reference_rows(view: LeaderboardView, references: list[LeaderboardEntry]) -> list[RankedRow]:
    return [RankedRow(rank=None, entry=e, cells=[e.scores.get(c) for c in view.columns],
                      bounds=[e.intervals.get(c) for c in view.columns], headers=view.headers)
            for e in references]


@cached_page("track")
def leaderboard(request: HttpRequest, track: str) -> HttpResponse:
    view = _view(request, track)
    page = leaderboard_page(view)
    references = reference_entries(view)
    spec = view.split.benchmark.spec
    context = {"benchmark": view.split.benchmark, "split": view.split, "splits": view.split.benchmark.splits.all(),
               "view": view, "spec": spec, "page": page, "references": _reference_rows(view, references),
               "sort_links": [(h, c, view.query(sort=c, order="asc" if view.sort == c and not view.ascending
                                                else "desc", page=1))
                              for h, c in zip(view.headers, view.columns)],
               "progress_chart": charts.progress(best_over_time(view), f"Best {view.metric} over time",
                                                 metric=view.metric, references=reference_lines(view, references))
               if not view.embargoed else "",
               "missing": missing_metric(view),
               "ci_query": view.query(ci="0" if view.intervals else "1"),
               "families": spec.metric_families or (spec.metrics,),
               "iou_links": _iou_links(view),
               "phase": phases.describe(view.split), "has_partition": view.split.has_partition,
               # Each row names its protocol only where the track has several; the first is this service's.
               "protocols": {p.key: p for p in spec.protocols} if len(spec.protocols) > 1 else {},
               "our_protocol": spec.protocols[0].key if spec.protocols else ""}
    return render(request, "rankings/leaderboard.html", context)


@cached_page("track")
def export(request: HttpRequest, track: str, fmt: str) -> HttpResponse:
    """The rows of the same view as the page (all pages), as CSV or JSON."""
    if fmt not in {"csv", "json"}:
        raise Http404("Exports are .csv or .json.")
    view = _view(request, track)
    rows, significance = export_rows(view, MAX_EXPORT_ROWS, fmt)
    name = f"{track}-{view.split.name}-{view.metric}"
    if fmt == "json":
        # The rows' scores are stored as JSON text; the document is assembled around them.
        ranked, references = ([r for r in rows if r.fields["reference"] is flag] for flag in (False, True))
        head = json.dumps({"track": track, "split": view.split.name, "sort": view.sort,
                           "scorer_version": view.split.benchmark.spec.scorer_version,
                           "columns": view.all_columns, "interval_level": 0.95,
                           "significance": significance.as_json()})
        if request.GET.get("drilldown") == "1":  # per attribute / sub-class, as the split's labels allow
            details = dict(LeaderboardEntry.objects.filter(pk__in=[r.fields["entry_id"] for r in rows])
                           .values_list("pk", "result__details"))
            for r in rows:
                shown = drilldown(details.get(r.fields["entry_id"]), view.split)
                r.fields["drilldown"] = shown.as_json() if shown else None
        # ``r.scores`` holds the members ``"scores": {..}, "intervals": {..}`` (``models.export_texts``);
        # orjson writes each row's fields (``published_at`` as ISO 8601) 5-10x faster than json.dumps.
        body, apart = (", ".join(f"{orjson.dumps(r.fields).decode()[:-1]}, {r.scores}}}" for r in part)
                       for part in (ranked, references))
        response = HttpResponse(f'{head[:-1]}, "rows": [{body}], "references": [{apart}]}}',
                                content_type="application/json")
    else:
        buffer = io.StringIO()
        csv.writer(buffer).writerow(["rank", "method", "team", "reported_in_paper", "uses_extra_data", "verified",
                                     "scorer_version", "published_at", "venue", "paper_url", "protocol",
                                     "reference", "adjusted_p_value", "no_significant_difference_from_row_above",
                                     "paired_test_note",
                                     *view.all_columns, *interval_columns(view.all_columns)])
        # Each row's fields end in a comma, then come its stored score cells.
        writer = csv.writer(buffer, lineterminator=",")
        for r in rows:
            f = r.fields
            team = ANONYMOUS_LABEL if f["anonymous"] else f["team"]
            writer.writerow([_csv_cell(v) for v in (f["rank"], f["method"], team, f["reported_in_paper"],
                                                    f["uses_extra_data"], f["verified"], f["scorer_version"],
                                                    f["published_at"].isoformat(), f["venue"], f["paper_url"],
                                                    f["protocol"], f["reference"], *_significance_cells(f))])
            buffer.write(r.scores)  # numbers only, stored as CSV cells when the row was written
            buffer.write("\r\n")
        response = HttpResponse(buffer.getvalue(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{name}.{fmt}"'
    return response


def _entry_chart(entry: LeaderboardEntry, iou: str | None) -> Any:
    """Radar for OpenScan's aspects, grouped bars elsewhere: the entry vs the best and the median
    of the ranked rows, on the primary metric (at IoU ``iou``); references drawn as lines."""
    spec = entry.split.benchmark.spec
    metric = thresholds.metric_at(spec.primary_metric, iou) if iou else spec.primary_metric
    profile = group_profile(entry.split, metric)
    series = [(entry.name, [entry.scores.get(f"{g}/{metric}") for g in spec.groups]),
              ("Best", [profile[g]["best"] for g in spec.groups]),
              ("Median", [profile[g]["median"] for g in spec.groups])]
    references = group_references(entry.split, metric, but=entry.pk)
    title = f"{entry.name}: {metric} per {spec.group_label.lower()} on {spec.title} {entry.split.name}"
    errors = [entry.intervals.get(f"{g}/{metric}") for g in spec.groups]
    if entry.split.benchmark.chart == "radar":
        return charts.radar(spec.groups, series, title, errors, metric=metric, references=references)
    return charts.bars(spec.groups, series, title, errors, metric=metric, group_label=spec.group_label,
                       references=references)


@dataclass
class ResultCard:
    """One result on a method or paper-row page: its scores table shows ``metrics`` (one IoU
    threshold of MMScan's, ``iou_links`` to switch), then its chart and drill-down."""

    entry: LeaderboardEntry
    spec: Any
    metrics: list[str]
    iou_links: list[tuple[str, str, bool]]
    chart: Any
    protocol: Any
    drill: Drilldown | None = None


def _card(request: HttpRequest, entry: LeaderboardEntry) -> ResultCard:
    spec = entry.split.benchmark.spec
    iou = thresholds.chosen(spec, request.GET)
    return ResultCard(entry=entry, spec=spec, metrics=thresholds.metrics_at(spec, iou),
                      iou_links=thresholds.links(spec, iou, lambda t: f"?iou={t}"),
                      chart=_entry_chart(entry, iou), protocol=_protocol(entry), drill=_drilldown(entry, iou))


def _visible_entries(request: HttpRequest, entries: Any) -> list[LeaderboardEntry]:
    return [e for e in entries if not _embargoed(request, e.split)]


def _drilldown(entry: LeaderboardEntry, iou: str | None) -> Drilldown | None:
    """Per attribute / sub-class, as the split's labels allow (rankings.drilldown); on the page,
    the primary metric's family only, at IoU ``iou`` (the JSON has every metric)."""
    shown = drilldown(entry.result.details if entry.result else None, entry.split)
    if shown is not None:
        spec = entry.split.benchmark.spec
        primary = thresholds.metric_at(spec.primary_metric, iou) if iou else spec.primary_metric
        family = next((f for f in spec.metric_families if primary in f), None)
        shown.page_metrics = [m for m in shown.metrics if family is None or m in family]
    return shown


def _protocol(entry: LeaderboardEntry) -> Any:
    """The entry's scoring protocol where its track declares several (else None: nothing to tell apart)."""
    spec = entry.split.benchmark.spec
    return spec.protocol(entry.protocol) if len(spec.protocols) > 1 else None


@cached_page()
def method_detail(request: HttpRequest, pk: int) -> HttpResponse:
    method = get_object_or_404(Method.objects.select_related("team"), pk=pk)
    entries = _visible_entries(request, method.entries.select_related("split__benchmark", "result"))
    disqualified = method.submissions.filter(is_disqualified=True).select_related("split__benchmark")
    if not entries and not disqualified:
        raise Http404("This method has no public results.")
    # The page gets what the public may see of the method (never the Method: no team when anonymous).
    # Its members are told how to reveal it; a page with that note is never cached (they are signed in).
    member = bool(method.is_anonymous and request.user.is_authenticated
                  and method.team.members.filter(pk=request.user.pk).exists())
    return render(request, "rankings/method.html", {
        "method": PublicMethod.of(method), "disqualified": disqualified, "member_of_anonymous": member,
        "cards": [_card(request, e) for e in entries]})


@cached_page()
def entry_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """A row "reported in paper" (no method page of its own)."""
    entry = get_object_or_404(LeaderboardEntry.objects.select_related("split__benchmark"), pk=pk)
    if entry.method_id:
        return redirect("rankings:method", pk=entry.method_id)
    return render(request, "rankings/entry.html", {"entry": entry, "card": _card(request, entry)})


@cached_page()
def bibtex(request: HttpRequest, pk: int) -> HttpResponse:
    method = get_object_or_404(Method, pk=pk)
    # An anonymous method has no public paper or authors until it is revealed.
    if method.is_anonymous or not method.paper_url or not method.entries.exists():
        raise Http404("No paper for this method.")
    key = "".join(ch for ch in method.name if ch.isalnum()) or f"method{method.pk}"
    fields = {"title": method.name, "author": method.authors.replace(", ", " and "), "url": method.paper_url,
              "howpublished": f"\\url{{{method.paper_url}}}", "note": method.description[:200]}
    body = ",\n".join(f"  {k} = {{{v}}}" for k, v in fields.items() if v)
    return HttpResponse(f"@misc{{{key},\n{body}\n}}\n", content_type="application/x-bibtex; charset=utf-8")


def _entry_ids(values: list[str]) -> list[int]:
    """The ``e`` parameters as entry ids; 404 for one that no row can have (not a whole number, or
    beyond the largest id a database holds: it reached the database as a 500)."""
    ids = []
    for value in values:
        if not (value.isascii() and value.isdigit() and len(value) <= 19 and 0 < int(value) <= MAX_ID):
            raise Http404(f"Expected e to be entry ids (whole numbers from 1 to {MAX_ID}), but got {value[:30]!r}.")
        ids.append(int(value))
    return ids


def _compare_entries(request: HttpRequest, split: Split) -> list[LeaderboardEntry]:
    ids = _entry_ids(request.GET.getlist("e"))[:4]
    by_id = {e.pk: e for e in LeaderboardEntry.objects.filter(split=split, pk__in=ids).select_related("result")}
    return _visible_entries(request, [by_id[i] for i in ids if i in by_id])


@cached_page("track")
def compare(request: HttpRequest, track: str) -> HttpResponse:
    view = _view(request, track)
    spec = view.split.benchmark.spec
    entries = _compare_entries(request, view.split)
    rows = []
    for header, column in zip(view.headers, view.columns):
        values = [e.scores.get(column) for e in entries]
        base = values[0] if values else None
        rows.append((header, [(entries[i].name, v, None if (i == 0 or v is None or base is None) else cleaned(v - base),
                               entries[i].intervals.get(column)) for i, v in enumerate(values)]))
    contenders = [e for e in entries if not e.is_reference]
    chart = charts.bars(spec.groups, [(e.name, [e.scores.get(f"{g}/{view.metric}") for g in spec.groups])
                                      for e in contenders], f"{view.metric} per {spec.group_label.lower()}",
                        metric=view.metric, group_label=spec.group_label,
                        references=[(e.name, [e.scores.get(f"{g}/{view.metric}") for g in spec.groups])
                                    for e in entries if e.is_reference]) if len(entries) >= 2 else ""
    candidates = list(ordered_entries(view)[:200]) + reference_entries(view)
    names = {e.pk: e.name for e in entries}
    tests, family, notice = _pair_tests(request, track, entries, view.metric)
    return render(request, "rankings/compare.html", {
        "benchmark": view.split.benchmark, "split": view.split, "view": view, "spec": spec, "entries": entries,
        "rows": rows, "chart": chart, "candidates": candidates, "selected": {e.pk for e in entries},
        "iou_links": _iou_links(view),
        "tests": [{**t, "a_name": names[t["a"]], "b_name": names[t["b"]]} for t in tests],
        "family": family, "notice": notice})


def _pair_tests(request: HttpRequest, track: str, entries: list[LeaderboardEntry],
                metric: str) -> tuple[list[dict[str, Any]], paired_tests.Family, str]:
    """Each pair's paired test on ``metric``, adjusted together; a signed-in user's request asks
    for the pairs nobody asked yet (bounded per user: the notice says so); a visitor's asks nothing."""
    asker = request.user if request.user.is_authenticated else None
    return paired_tests.compare_verdicts(entries, metric, track, asker=asker)


# API (read anonymously)


@cached_page("track")
def api_leaderboard(request: HttpRequest, track: str) -> JsonResponse:
    view = _view(request, track)
    spec = view.split.benchmark.spec
    if request.GET.get("metric") and request.GET["metric"] not in spec.metrics:
        return api_error(f"Expected metric to be one of {', '.join(spec.metrics)}, "
                         f"but got {request.GET['metric']!r}.", 400)
    if request.GET.get("protocol") and request.GET["protocol"] != view.protocol:
        keys = [p.key for p in spec.protocols] if len(spec.protocols) > 1 else []
        return api_error(f"Expected protocol to be one of {', '.join(keys) or 'nothing (one protocol)'}, "
                         f"but got {request.GET['protocol']!r}.", 400)
    if request.GET.get("iou") and request.GET["iou"] not in thresholds.thresholds(spec):
        return api_error(f"Expected iou to be one of {', '.join(thresholds.thresholds(spec)) or 'nothing'} "
                         f"(IoU thresholds of {track}), but got {request.GET['iou']!r}.", 400)
    page = leaderboard_page(view)
    return JsonResponse({"track": track, "split": view.split.name, "primary_metric": spec.primary_metric,
                         "metrics": list(spec.metrics), "groups": list(spec.groups), "sort": view.sort,
                         "order": "asc" if view.ascending else "desc", "scorer_version": spec.scorer_version,
                         "page": page.number, "pages": page.pages, "count": page.count,
                         "results_embargoed": view.embargoed, **phases.phase_json(view.split),
                         "public_subset": view.split.has_partition,
                         "scores_of": _scores_of(view.split),
                         "significance": page.significance.as_json() if page.significance else None,
                         "rows": [entry_as_json(row, view.all_columns) for row in page.rows],
                         "references": [entry_as_json(row, view.all_columns)
                                        for row in _reference_rows(view, reference_entries(view))]})


def _scores_of(split: Split) -> str:
    """Which units the scores cover: "all", or "public" (the public subset, until the reveal), or "private"."""
    if not split.has_partition:
        return "all"
    return "private" if split.is_revealed else "public"


@cached_page()
def api_method(request: HttpRequest, pk: int) -> JsonResponse:
    method = get_object_or_404(Method.objects.select_related("team"), pk=pk)
    entries = _visible_entries(request, method.entries.select_related("split__benchmark", "result"))
    if not entries:
        raise Http404("This method has no public results.")
    public = PublicMethod.of(method)
    drills = {e.pk: drilldown(e.result.details if e.result else None, e.split) for e in entries}
    return JsonResponse({
        "id": public.pk, "name": public.name, "team": public.team, "anonymous": public.is_anonymous,
        "description": public.description, "paper_url": public.paper_url, "code_url": public.code_url,
        "authors": public.authors, "uses_extra_data": public.uses_extra_data,
        "url": request.build_absolute_uri(reverse("rankings:method", args=[method.pk])),
        "results": [{"track": e.split.benchmark.track, "split": e.split.name, "scores": e.scores,
                     "intervals": e.intervals,
                     "scorer_version": e.scorer_version, "verified": e.is_verified, "protocol": e.protocol,
                     "drilldown": drills[e.pk].as_json() if drills[e.pk] else None}
                    for e in entries]})


@cached_page("track")
@api_auth(required=False)
def api_compare(request: HttpRequest, track: str) -> JsonResponse:
    view = _view(request, track)
    entries = _compare_entries(request, view.split)
    tests, family, notice = _pair_tests(request, track, entries, view.metric)
    return JsonResponse({"track": track, "split": view.split.name, "columns": view.all_columns,
                         "metric": view.metric,
                         "entries": [{"entry_id": e.pk, "method": e.name, "reported_in_paper": e.is_paper,
                                      "scores": {c: e.scores.get(c) for c in view.all_columns},
                                      "intervals": {c: e.intervals[c] for c in view.all_columns
                                                    if e.intervals.get(c) is not None}}
                                     for e in entries],
                         "tests": tests, "significance": family.as_json(), "notice": notice})


@cached_page("track")
def api_progress(request: HttpRequest, track: str) -> JsonResponse:
    view = _view(request, track)
    points = [] if view.embargoed else best_over_time(view)
    return JsonResponse({"track": track, "split": view.split.name, "metric": view.metric,
                         "points": [{"date": t.isoformat(), "best": v, "method": name} for t, v, name in points],
                         "references": [{"method": name, "value": v} for name, v in reference_lines(view)]})
