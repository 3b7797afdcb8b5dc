"""Public leaderboard pages, exports, method and compare pages, and their API."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse

from leaderboard.accounts.auth import api_auth
from leaderboard.api_errors import api_error
from leaderboard.benchmarks import phases
from leaderboard.benchmarks.disclosure import labels_cell, labels_json
from leaderboard.benchmarks.models import Split
from leaderboard.benchmarks.permissions import results_embargoed
from leaderboard.benchmarks.selectors import get_split, metric_specs_json
from leaderboard.lib import host_pages, thresholds
from leaderboard.lib.method_fields import declared
from leaderboard.lib.pagecache import cache_until, cached_page
from leaderboard.participation.selectors import banners
from leaderboard.rankings import charts, paired_verdicts
from leaderboard.rankings.bibtex import paper_row_bibtex
from leaderboard.rankings.challenges import challenge_states
from leaderboard.rankings.drilldown import Drilldown, drilldown
from leaderboard.rankings.exports import csv_text, export_rows, json_text
from leaderboard.rankings.like_with_like import ALL_PROTOCOLS, is_other_protocol
from leaderboard.rankings.models import LeaderboardEntry
from leaderboard.rankings.numbers import cleaned, difference_unit, direction_words, is_better
from leaderboard.rankings.selectors import (
    LeaderboardView,
    PublicMethod,
    RankedRow,
    best_over_time,
    entry_as_json,
    group_profile,
    group_references,
    leaderboard_page,
    missing_metric,
    ordered_entries,
    reference_lines,
    unranked_entries,
)
from leaderboard.rankings.services import reveal_if_due
from leaderboard.submissions.models import Method

MAX_EXPORT_ROWS = 10_000
MAX_ID = 2**63 - 1  # a BigAutoField's largest value


def _embargoed(request: HttpRequest, split: Split) -> bool:
    # A cached copy must not outlive the embargo, nor the phase: the page shows more after them.
    cache_until(request, split.results_visible_after)
    following = phases.next_change(split)
    cache_until(request, following[1] if following else None)
    return results_embargoed(split, request.user)


def _view(request: HttpRequest, track: str) -> LeaderboardView:
    split = reveal_if_due(get_split(track, request.GET.get("split")))
    return LeaderboardView.from_query(split, request.GET, embargoed=_embargoed(request, split))


def _announcements(request: HttpRequest, benchmark: Any) -> list[Any]:
    """The maintainers' banners shown now; a cached copy ends when one starts or ends."""
    shown, changes_at = banners(benchmark)
    cache_until(request, changes_at)
    return shown


def _iou_links(view: LeaderboardView) -> list[tuple[str, str, bool]]:
    """The board's and compare's IoU toggle: the same metric and sort column at each threshold."""
    return thresholds.links(view.split.benchmark.spec, view.iou, lambda t: "?" + view.query(
        metric=thresholds.metric_at(view.metric, t), sort=thresholds.metric_at(view.sort, t), page=1))


def _reference_rows(view: LeaderboardView, references: list[LeaderboardEntry], apart: bool = False) -> list[RankedRow]:
    """Unranked rows of the board (references, the rows not current, or with ``apart`` the paper rows
    listed apart)."""
    specs = view.column_specs
    return [RankedRow(rank=None, entry=e, cells=[e.scores.get(c) for c in view.columns],
                      bounds=[e.intervals.get(c) for c in view.columns], headers=view.headers, apart=apart,
                      specs=specs, fields=view.field_columns)
            for e in references]


@cached_page("track")
def leaderboard(request: HttpRequest, track: str) -> HttpResponse:
    view = _view(request, track)
    page = leaderboard_page(view)
    apart, references, stale = unranked_entries(view)
    spec = view.split.benchmark.spec
    challenges = challenge_states(view.split.benchmark)
    context = {"benchmark": view.split.benchmark, "split": view.split, "splits": view.split.benchmark.splits.all(),
               "tabs": host_pages.tabs(view.split.benchmark), "challenges": challenges,
               "archives": [c for c in challenges if c.archive is not None],
               "view": view, "spec": spec, "page": page, "references": _reference_rows(view, references),
               "apart": _reference_rows(view, apart, apart=True), "stale": _reference_rows(view, stale),
               "sort_links": [(h, c, view.sort_query(c)) for h, c in zip(view.headers, view.columns)],
               "metric_spec": view.spec_of(view.metric), "sort_spec": view.spec_of(view.sort),
               "progress_chart": charts.progress(best_over_time(view), f"Best {view.metric} over time",
                                                 metric=view.metric, references=reference_lines(view, references),
                                                 spec=view.spec_of(view.metric))
               if not view.embargoed else "",
               "missing": missing_metric(view),
               "ci_query": view.query(ci="0" if view.intervals else "1"),
               "families": spec.metric_families or (spec.metrics,),
               "iou_links": _iou_links(view),
               "phase": phases.describe(view.split), "has_partition": view.split.has_partition,
               # Each row names its protocol only where the track has several; the first is this service's.
               "protocols": {p.key: p for p in spec.protocols} if len(spec.protocols) > 1 else {},
               "our_protocol": spec.protocols[0].key if spec.protocols else "", "all_protocols": ALL_PROTOCOLS,
               "announcements": _announcements(request, view.split.benchmark)}
    return render(request, "rankings/leaderboard.html", context)


@cached_page("track")
def export(request: HttpRequest, track: str, fmt: str) -> HttpResponse:
    """The rows of the same view as the page (all pages), as CSV or JSON."""
    if fmt not in {"csv", "json"}:
        raise Http404("Exports are .csv or .json.")
    view = _view(request, track)
    rows, significance = export_rows(view, MAX_EXPORT_ROWS, fmt)
    # A file saved from a split with synthetic labels says so in its name too.
    name = f"{track}-{view.split.name}-{view.metric}{'-synthetic-labels' if view.split.labels_synthetic else ''}"
    fields = declared(view.split.benchmark)
    if fmt == "json":
        head = {"track": track, "split": view.split.name, "sort": view.sort,
                "scorer_version": view.split.benchmark.spec.scorer_version,
                "labels": labels_json(view.split), "protocol": view.protocol or None,
                "apart_reason": view.apart_reason or None, "columns": view.all_columns,
                "metric_specs": metric_specs_json(view.split.benchmark),
                "method_fields": [f.as_json() for f in fields], "interval_level": 0.95,
                "significance": significance.as_json()}
        if request.GET.get("drilldown") == "1":  # per attribute / sub-class, as the split's labels allow
            details = dict(LeaderboardEntry.objects.filter(pk__in=[r.fields["entry_id"] for r in rows])
                           .values_list("pk", "result__details"))
            for r in rows:
                shown = drilldown(details.get(r.fields["entry_id"]), view.split)
                r.fields["drilldown"] = shown.as_json() if shown else None
        response = HttpResponse(json_text(head, rows), content_type="application/json")
    else:
        response = HttpResponse(csv_text(view, rows, fields, labels_cell(view.split)),
                                content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{name}.{fmt}"'
    return response


def _entry_chart(entry: LeaderboardEntry, iou: str | None) -> Any:
    """Radar for OpenScan's aspects, grouped bars elsewhere: the entry vs the best and the median
    of the ranked rows, on the primary metric (at IoU ``iou``); references drawn as lines."""
    spec = entry.split.benchmark.spec
    metric = thresholds.metric_at(spec.primary_metric, iou) if iou else spec.primary_metric
    metric_spec = entry.split.benchmark.metric_spec(metric)
    profile = group_profile(entry.split, metric)
    series = [(entry.name, [entry.scores.get(f"{g}/{metric}") for g in spec.groups]),
              ("Best", [profile[g]["best"] for g in spec.groups]),
              ("Median", [profile[g]["median"] for g in spec.groups])]
    references = group_references(entry.split, metric, but=entry.pk)
    title = f"{entry.name}: {metric} per {spec.group_label.lower()} on {spec.title} {entry.split.name}"
    errors = [entry.intervals.get(f"{g}/{metric}") for g in spec.groups]
    if entry.split.benchmark.chart == "radar":
        return charts.radar(spec.groups, series, title, errors, metric=metric, references=references,
                            spec=metric_spec)
    return charts.bars(spec.groups, series, title, errors, metric=metric, group_label=spec.group_label,
                       references=references, spec=metric_spec)


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
    specs: dict[str, Any] = field(default_factory=dict)  # metric -> MetricSpec, as the scores table writes it
    fields: list[tuple[str, str]] = field(default_factory=list)  # (label, answer) of the benchmark's method fields


def _card(request: HttpRequest, entry: LeaderboardEntry) -> ResultCard:
    spec = entry.split.benchmark.spec
    iou = thresholds.chosen(spec, request.GET)
    return ResultCard(entry=entry, spec=spec, metrics=thresholds.metrics_at(spec, iou),
                      iou_links=thresholds.links(spec, iou, lambda t: f"?iou={t}"),
                      chart=_entry_chart(entry, iou), protocol=_protocol(entry), drill=_drilldown(entry, iou),
                      specs={m: entry.split.benchmark.metric_spec(m) for m in spec.metrics},
                      fields=[(f.label, f.shown(entry.fields.get(f.name))) for f in declared(entry.split.benchmark)
                              if entry.fields.get(f.name) is not None])


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


@cached_page()
def entry_bibtex(request: HttpRequest, pk: int) -> HttpResponse:
    """A paper row's BibTeX: its method's own paper and the source of its numbers."""
    entry = get_object_or_404(LeaderboardEntry.objects.select_related("split__benchmark"), pk=pk, is_paper=True)
    return HttpResponse(paper_row_bibtex(entry), content_type="application/x-bibtex; charset=utf-8")


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
    """The rows named by ``e`` (the first four), in that order; 404 when one is not a row this viewer
    sees on this board (unknown, on another split, or a scored row whose split's scores are not
    visible yet): a page of fewer rows than asked would compare something else than was linked."""
    ids = _entry_ids(request.GET.getlist("e"))[:4]
    by_id = {e.pk: e for e in LeaderboardEntry.objects.filter(split=split, pk__in=ids).select_related("result")}
    embargoed = _embargoed(request, split) if ids else False
    for pk in ids:
        entry = by_id.get(pk)
        if entry is None or (embargoed and not entry.is_paper):
            raise Http404(f"Expected e to be rows of the {split.benchmark.track} {split.name} board, but {pk} is not "
                          f"one (unknown, on another split, or not visible yet).")
    return [by_id[pk] for pk in ids]


def _unlike(split: Split, a: LeaderboardEntry, b: LeaderboardEntry) -> bool:
    """Whether ``a`` and ``b`` were not produced the same way (``like_with_like``): one of another
    protocol than the other, or a paper's numbers beside numbers scored on synthetic labels."""
    return (is_other_protocol(split, a.protocol) != is_other_protocol(split, b.protocol)
            or (split.labels_synthetic and a.is_paper != b.is_paper))


@cached_page("track")
def compare(request: HttpRequest, track: str) -> HttpResponse:
    view = _view(request, track)
    spec = view.split.benchmark.spec
    entries = _compare_entries(request, view.split)
    metric_spec = view.spec_of(view.metric)
    unlike = [i > 0 and _unlike(view.split, entries[0], e) for i, e in enumerate(entries)]
    # A phone shows each value under its row's name: other protocols are marked there too.
    labels = [f"{e.name} (other protocol)" if is_other_protocol(view.split, e.protocol) else e.name for e in entries]
    rows = []
    for header, column in zip(view.headers, view.columns):
        values = [e.scores.get(column) for e in entries]
        base = values[0] if values else None
        rows.append((header, [CompareCell(labels[i], v, None if (i == 0 or v is None or base is None)
                                          else cleaned(v - base), entries[i].intervals.get(column), metric_spec,
                                          unlike[i])
                              for i, v in enumerate(values)]))
    contenders = [e for e in entries if not e.is_reference]
    chart = charts.bars(spec.groups, [(e.name, [e.scores.get(f"{g}/{view.metric}") for g in spec.groups])
                                      for e in contenders], f"{view.metric} per {spec.group_label.lower()}",
                        metric=view.metric, group_label=spec.group_label,
                        references=[(e.name, [e.scores.get(f"{g}/{view.metric}") for g in spec.groups])
                                    for e in entries if e.is_reference], spec=metric_spec) if len(entries) >= 2 else ""
    apart, references, _ = unranked_entries(view)  # rows not current are compared only when linked
    candidates = list(ordered_entries(view)[:200]) + apart + references
    names = {e.pk: e.name for e in entries}
    tests, family, notice = _pair_tests(request, track, entries, view.metric)
    protocols = {p.key: p for p in spec.protocols}
    return render(request, "rankings/compare.html", {
        "benchmark": view.split.benchmark, "split": view.split, "view": view, "spec": spec, "entries": entries,
        "entries_marked": [(e, _other_protocol(view.split, e, protocols)) for e in entries], "any_unlike": any(unlike),
        "candidate_marks": {c.pk: _other_protocol(view.split, c, protocols) for c in candidates},
        "rows": rows, "chart": chart, "candidates": candidates, "selected": {e.pk for e in entries},
        "iou_links": _iou_links(view), "metric_spec": metric_spec,
        "difference_unit": difference_unit(metric_spec), "direction": direction_words(metric_spec),
        "tests": [{**t, "a_name": names[t["a"]], "b_name": names[t["b"]],
                   "better": _better_of(t, names, metric_spec)} for t in tests],
        "family": family, "notice": notice, "announcements": _announcements(request, view.split.benchmark)})


def _other_protocol(split: Split, entry: LeaderboardEntry, protocols: dict[str, Any]) -> Any:
    """The protocol of ``entry`` when it is another than this service's (a page marks it), else None."""
    return protocols.get(entry.protocol) if is_other_protocol(split, entry.protocol) else None


@dataclass
class CompareCell:
    """One value of the compare table, its difference from the first entry's, and whether that is better."""

    name: str
    value: Any
    diff: float | None
    bounds: Any
    spec: Any
    unlike: bool = False  # not like with like against the first entry (like_with_like)

    @property
    def verdict(self) -> str:
        """``better``, ``worse`` or "" (no difference, or none shown), by the metric's direction."""
        if not self.diff:
            return ""
        return "better" if is_better(self.spec, self.diff, 0.0) else "worse"


def _better_of(test: dict[str, Any], names: dict[int, str], spec: Any) -> str:
    """The name of the better of a tested pair (a - b), by the metric's direction; "" when not significant."""
    if not test.get("significant") or not test.get("difference"):
        return ""
    return names[test["a"]] if is_better(spec, test["difference"], 0.0) else names[test["b"]]


def _pair_tests(request: HttpRequest, track: str, entries: list[LeaderboardEntry],
                metric: str) -> tuple[list[dict[str, Any]], paired_verdicts.Family, str]:
    """Each pair's paired test on ``metric``, adjusted together; a signed-in user's request asks
    for the pairs nobody asked yet (bounded per user: the notice says so); a visitor's asks nothing."""
    asker = request.user if request.user.is_authenticated else None
    return paired_verdicts.compare_verdicts(entries, metric, track, asker=asker)


# API (read anonymously)


@cached_page("track")
def api_leaderboard(request: HttpRequest, track: str) -> JsonResponse:
    view = _view(request, track)
    spec = view.split.benchmark.spec
    if request.GET.get("metric") and request.GET["metric"] not in spec.metrics:
        return api_error(f"Expected metric to be one of {', '.join(spec.metrics)}, "
                         f"but got {request.GET['metric']!r}.", 400)
    if request.GET.get("protocol") and request.GET["protocol"] != view.protocol:
        keys = [ALL_PROTOCOLS, *(p.key for p in spec.protocols)] if len(spec.protocols) > 1 else []
        return api_error(f"Expected protocol to be one of {', '.join(keys) or 'nothing (one protocol)'}, "
                         f"but got {request.GET['protocol']!r}.", 400)
    if request.GET.get("iou") and request.GET["iou"] not in thresholds.thresholds(spec):
        return api_error(f"Expected iou to be one of {', '.join(thresholds.thresholds(spec)) or 'nothing'} "
                         f"(IoU thresholds of {track}), but got {request.GET['iou']!r}.", 400)
    page = leaderboard_page(view)
    apart, references, stale = unranked_entries(view)
    return JsonResponse({"track": track, "split": view.split.name, "primary_metric": spec.primary_metric,
                         "metrics": list(spec.metrics), "metric_specs": metric_specs_json(view.split.benchmark),
                         "method_fields": [f.as_json() for f in view.method_fields],
                         "groups": list(spec.groups), "sort": view.sort,
                         "order": "asc" if view.ascending else "desc", "scorer_version": spec.scorer_version,
                         "page": page.number, "pages": page.pages, "count": page.count,
                         "results_embargoed": view.embargoed, **phases.phase_json(view.split),
                         "public_subset": view.split.has_partition,
                         "scores_of": _scores_of(view.split), "labels": labels_json(view.split),
                         "protocol": view.protocol or None, "apart_reason": view.apart_reason or None,
                         "significance": page.significance.as_json() if page.significance else None,
                         "rows": [entry_as_json(row, view.all_columns) for row in page.rows],
                         "apart": [entry_as_json(row, view.all_columns)
                                   for row in _reference_rows(view, apart, apart=True)],
                         "references": [entry_as_json(row, view.all_columns)
                                        for row in _reference_rows(view, references)],
                         "not_current": [entry_as_json(row, view.all_columns)
                                         for row in _reference_rows(view, stale)]})


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
        "results": [{"track": e.split.benchmark.track, "split": e.split.name, "labels": labels_json(e.split),
                     "scores": e.scores, "intervals": e.intervals,
                     "scorer_version": e.scorer_version, "verified": e.is_verified, "protocol": e.protocol,
                     "fields": e.fields,
                     "state": e.state,
                     "drilldown": drills[e.pk].as_json() if drills[e.pk] else None}
                    for e in entries]})


@cached_page("track")
@api_auth(required=False)
def api_compare(request: HttpRequest, track: str) -> JsonResponse:
    view = _view(request, track)
    entries = _compare_entries(request, view.split)
    tests, family, notice = _pair_tests(request, track, entries, view.metric)
    return JsonResponse({"track": track, "split": view.split.name, "columns": view.all_columns,
                         "metric": view.metric, "labels": labels_json(view.split),
                         "entries": [{"entry_id": e.pk, "method": e.name, "reported_in_paper": e.is_paper,
                                      "reference": e.is_reference, "protocol": e.protocol,
                                      "other_protocol": is_other_protocol(view.split, e.protocol),
                                      "state": e.state,
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
