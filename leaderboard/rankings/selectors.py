"""Reads of leaderboards: one view = one split, one metric, a sort, filters.

The same ``LeaderboardView`` feeds the page, the JSON/CSV exports and the
API, so a link and an export always show the same rows. Rows are the
precomputed ``LeaderboardEntry`` table; sorting and paging happen in SQL.

Ranking rule (documented on the page): rows are ordered by the sort column
(best first; missing values last), then by the primary metric, then by the
earlier publication (``published_at``: a paper row's publication date, a
scored row's publishing here), then by the lower row id; the index
``(split, -primary_score, published_at, id)`` serves this order. Ranks are
competition ranks (1, 2, 2, 4) over the sort column: equal values share a rank.

Reference rows (``is_reference``: human performance, oracles, upper bounds copied
from papers) are not contestants: the filters choose them like any row, but they
are listed apart (``reference_entries``), never ranked, never a chart's best or
median, and drawn on charts as lines. Paper rows of another protocol, and every paper
row on a split with synthetic labels, are listed apart too (``apart_entries``; the rule:
``like_with_like``).

Rows whose result predates the split's current labels (``state`` "awaiting re-score" or "re-score
failed": ``submissions.result_state``) are not contestants either: they stay on the board, listed
apart and marked (``unranked_entries``), never ranked, tested, a chart's best or median, or a record.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db.models import F, FloatField, IntegerField, Q, QuerySet
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast

from evaluation_workers.tracks.base import FRACTION, MetricSpec
from leaderboard.benchmarks.models import Split
from leaderboard.lib.method_fields import MethodField, declared
from leaderboard.lib.thresholds import metric_at, threshold_of, thresholds
from leaderboard.rankings.like_with_like import ALL_PROTOCOLS, apart_reason, apart_rows, is_other_protocol
from leaderboard.rankings.models import (
    ANONYMOUS_LABEL,
    LeaderboardEntry,
    export_columns,
)
from leaderboard.rankings.numbers import best, is_better
from leaderboard.rankings.paired_verdicts import Family, Verdict, board_verdicts, rung, significance_json
from leaderboard.submissions.models import ResultState

PAGE_SIZE = 50


def score_expression(column: str) -> Any:
    """A numeric SQL expression for one flat score key (``"What/EM"``); NULL where absent."""
    return Cast(KeyTextTransform(column, "scores"), FloatField())


@dataclass(frozen=True)
class LeaderboardView:
    """What a leaderboard URL asks for, validated against the track.

    Query parameters: ``metric`` (one of the track's metrics), ``sort`` (a
    column key, default the primary metric), ``order`` (``desc``|``asc``; default:
    best first, which is ``asc`` for a metric where lower is better),
    ``paper`` (``0`` hides paper-reported rows), ``extra`` (``no`` hides
    methods using extra training data, ``only`` keeps only those), ``protocol``
    (absent: this service's protocol ranked, the other protocols' paper rows listed
    apart; ``all``: every protocol ranked together; one of the track's protocol keys:
    only the rows it produced; a row that declares none counts as this service's,
    the first), ``iou`` (MMScan: the same
    metric and sort column at this IoU threshold), ``ci`` (``1`` shows each
    score's 95 % interval as ±), ``field.<name>`` (a method field the benchmark
    declares as a filter: only the rows with that answer; ``yes``/``no`` for a
    yes/no field), ``page``.
    """

    split: Split
    metric: str
    sort: str
    ascending: bool = False
    include_paper: bool = True
    extra: str = "any"
    page: int = 1
    intervals: bool = False
    embargoed: bool = False
    protocol: str = ""
    columns: list[str] = field(default_factory=list)
    headers: list[str] = field(default_factory=list)
    method_fields: list[MethodField] = field(default_factory=list)  # every field the benchmark declares
    field_filters: dict[str, str] = field(default_factory=dict)  # name -> the URL value asked for

    @classmethod
    def from_query(cls, split: Split, query: Mapping[str, str], embargoed: bool = False) -> LeaderboardView:
        spec, board = split.benchmark.spec, split.benchmark.board  # board: the bundle's default view
        default_metric = board.get("metric") if board.get("metric") in spec.metrics else spec.primary_metric
        metric = query.get("metric") if query.get("metric") in spec.metrics else default_metric
        groups = [g for g in board.get("groups", ()) if g in spec.groups] or list(spec.groups)
        columns = [metric] + [f"{g}/{metric}" for g in groups]
        sortable = set(spec.metrics) | {f"{g}/{m}" for g in spec.groups for m in spec.metrics}
        default_sort = board.get("sort") if board.get("sort") in sortable and not query.get("metric") else metric
        sort = query.get("sort") if query.get("sort") in sortable else default_sort
        if query.get("iou") in thresholds(spec):
            metric, sort = (metric_at(metric, query["iou"]), metric_at(sort, query["iou"]))
            columns = [metric] + [f"{g}/{metric}" for g in groups]
        wanted = query.get("protocol", "")
        protocol = wanted if len(spec.protocols) > 1 and (wanted == ALL_PROTOCOLS or spec.protocol(wanted)) else ""
        try:
            page = max(1, int(query.get("page", 1)))
        except ValueError:
            page = 1
        extra = query.get("extra") if query.get("extra") in {"no", "only"} else "any"
        order = query.get("order")
        ascending = order == "asc" if order in ("asc", "desc") else split.benchmark.metric_spec(sort).lower_is_better
        fields = declared(split.benchmark)
        filters = {f.name: query[f"field.{f.name}"] for f in fields
                   if f.filter and f.filter_value(query.get(f"field.{f.name}", "")) is not None}
        return cls(split=split, metric=metric, sort=sort, ascending=ascending,
                   include_paper=query.get("paper") != "0", extra=extra, page=page,
                   intervals=query.get("ci") == "1", embargoed=embargoed, protocol=protocol,
                   columns=columns, headers=["Overall", *groups], method_fields=fields, field_filters=filters)

    @property
    def field_columns(self) -> list[MethodField]:
        """The method fields the board shows as columns (after the method's)."""
        return [f for f in self.method_fields if f.column]

    @property
    def filters(self) -> list[tuple[MethodField, str]]:
        """The method fields the board filters by, each with the value asked for ("" for any)."""
        return [(f, self.field_filters.get(f.name, "")) for f in self.method_fields if f.filter]

    @property
    def width(self) -> int:
        """The board's columns: pick, rank, method, the field columns, then the scores."""
        return 3 + len(self.field_columns) + len(self.headers)

    def spec_of(self, column: str) -> MetricSpec:
        """How the numbers of a column read (its metric's spec, with the bundle's precision)."""
        return self.split.benchmark.metric_spec(column)

    @property
    def column_specs(self) -> list[MetricSpec]:
        return [self.spec_of(c) for c in self.columns]

    @property
    def best_first(self) -> bool:
        """Whether the rows are listed best first on the sorted column (its metric's direction)."""
        return self.ascending == self.spec_of(self.sort).lower_is_better

    def sort_query(self, column: str) -> str:
        """The link of a column's header: the sorted column turns round; another is sorted best first."""
        if column == self.sort:
            return self.query(order="desc" if self.ascending else "asc", page=1)
        return self.query(sort=column, order="asc" if self.spec_of(column).lower_is_better else "desc", page=1)

    @property
    def iou(self) -> str | None:
        """The IoU threshold of the view's metric, where the track has several (else None)."""
        return threshold_of(self.metric) if thresholds(self.split.benchmark.spec) else None

    @property
    def protocol_filter(self) -> str:
        """The one protocol whose rows the view keeps ("" when it keeps every protocol's)."""
        return "" if self.protocol == ALL_PROTOCOLS else self.protocol

    @property
    def apart_reason(self) -> str:
        """Why paper rows are listed apart on this view (``like_with_like.apart_reason``), or ""."""
        return apart_reason(self.split, self.protocol)

    @property
    def all_columns(self) -> list[str]:
        """Every metric overall and per group, for exports."""
        return export_columns(self.split.benchmark.spec)

    def query(self, **changes: Any) -> str:
        """This view's URL query with some parameters changed (for links and controls)."""
        from urllib.parse import urlencode

        params = {"split": self.split.name, "metric": self.metric, "sort": self.sort,
                  "order": "asc" if self.ascending else "desc", "paper": "1" if self.include_paper else "0",
                  "extra": self.extra, "protocol": self.protocol, "ci": "1" if self.intervals else "0",
                  "page": self.page, **{f"field.{k}": v for k, v in self.field_filters.items()}}
        params.update(changes)
        best_first = "asc" if self.spec_of(str(params["sort"])).lower_is_better else "desc"
        defaults = {"order": best_first, "paper": "1", "extra": "any", "protocol": "", "ci": "0", "page": 1}
        return urlencode({k: v for k, v in params.items() if defaults.get(k) != v and v != ""})


def filtered_entries(view: LeaderboardView) -> QuerySet[LeaderboardEntry]:
    """The rows the view's filters choose, references included."""
    entries = LeaderboardEntry.objects.filter(split=view.split)
    if view.embargoed:
        entries = entries.filter(is_paper=True)
    # Switching the metric keeps every row: one without the metric (a paper
    # that reported only EM) shows dashes and ranks last (``missing_metric``).
    if not view.include_paper:
        entries = entries.filter(is_paper=False)
    for method_field in view.method_fields:
        if method_field.name in view.field_filters:
            wanted = method_field.filter_value(view.field_filters[method_field.name])
            entries = entries.filter(**{f"fields__{method_field.name}": wanted})
    if view.extra == "no":
        entries = entries.filter(uses_extra_data=False)
    elif view.extra == "only":
        entries = entries.filter(uses_extra_data=True)
    if view.protocol_filter:
        ours = view.protocol_filter == view.split.benchmark.spec.protocols[0].key
        entries = entries.filter(Q(protocol=view.protocol_filter) | Q(protocol="")) if ours else \
            entries.filter(protocol=view.protocol_filter)
    return entries


def contestants(view: LeaderboardView) -> QuerySet[LeaderboardEntry]:
    """The view's rows that are ranked: every row but the references, the rows listed apart and the
    rows not current."""
    apart = apart_rows(view.split, view.protocol)
    entries = filtered_entries(view).filter(is_reference=False, state=ResultState.CURRENT)
    return entries if apart is None else entries.exclude(apart)


def apart_entries(view: LeaderboardView) -> list[LeaderboardEntry]:
    """The view's paper rows listed apart, not ranked (``like_with_like``): best first on its sort
    column (missing values last), then by name."""
    return unranked_entries(view)[0]


def unranked_entries(view: LeaderboardView) -> tuple[list[LeaderboardEntry], list[LeaderboardEntry],
                                                     list[LeaderboardEntry]]:
    """The view's rows that are not ranked, in one query: the paper rows listed apart, the references,
    and the rows whose result predates the split's current labels (awaiting re-score, or re-score
    failed: their earlier scores), each best first on its sort column (missing values last), then by name."""
    apart = apart_rows(view.split, view.protocol)
    value = score_expression(view.sort)
    chosen = Q(is_reference=True) | ~Q(state=ResultState.CURRENT)
    rows = list(filtered_entries(view).filter(chosen if apart is None else chosen | apart).annotate(sort_value=value)
                .order_by(best_first(view), "name"))
    stale = [e for e in rows if not e.is_reference and e.state != ResultState.CURRENT]
    return ([e for e in rows if not e.is_reference and e.state == ResultState.CURRENT],
            [e for e in rows if e.is_reference], stale)


def best_first(view: LeaderboardView) -> Any:
    """The sort column, best first (missing values last): the order of the reference rows."""
    value = score_expression(view.sort)
    return value.asc(nulls_last=True) if view.spec_of(view.sort).lower_is_better else value.desc(nulls_last=True)


def reference_entries(view: LeaderboardView) -> list[LeaderboardEntry]:
    """The view's reference rows, best first on its sort column (missing values last), never ranked."""
    return list(filtered_entries(view).filter(is_reference=True).annotate(sort_value=score_expression(view.sort))
                .order_by(best_first(view), "name"))


def missing_metric(view: LeaderboardView) -> dict[str, int]:
    """How many of the view's ranked rows have no value of its metric, paper rows and scored rows apart."""
    missing = contestants(view).exclude(scores__has_key=view.metric)
    return {"paper": missing.filter(is_paper=True).count(), "scored": missing.filter(is_paper=False).count()}


def ordered_entries(view: LeaderboardView) -> QuerySet[LeaderboardEntry]:
    """The view's rows in ranking order, with ``sort_value`` annotated: the sort column as asked
    (best first by default), ties by the primary metric best first (lower first where lower is
    better), then earlier publication, then the row id."""
    primary = view.split.benchmark.spec.primary_metric
    value = F("primary_score") if view.sort == primary else score_expression(view.sort)
    direction = (value.asc(nulls_last=True) if view.ascending else value.desc(nulls_last=True))
    primary_best = (F("primary_score").asc(nulls_last=True) if view.spec_of(primary).lower_is_better
                    else F("primary_score").desc(nulls_last=True))
    return (contestants(view).annotate(sort_value=value)
            .order_by(direction, primary_best, "published_at", "id"))


def with_units(entries: QuerySet[LeaderboardEntry]) -> QuerySet[LeaderboardEntry]:
    """``entries`` with what tells whether two rows can be tested against each other
    (``paired_tests.testable_units``, ``too_few_scenes``): their results' labels, scorer and
    partition, and the scenes their bootstrap recorded with its minimum."""
    def recorded(name: str) -> Cast:
        return Cast(KeyTextTransform(name, "result__bootstrap"), IntegerField())

    return entries.annotate(test_labels=F("result__labels_sha256"), test_scorer=F("result__scorer_version"),
                            test_partition=F("result__partition"), test_scenes=recorded("units"),
                            test_min_scenes=recorded("min_scenes"))


@dataclass
class RankedRow:
    """``cells``: the view's columns' values; ``bounds``: their intervals ([lo, hi] or None);
    ``versus_above``: the paired test against the row just above on the sorted column (None:
    the page's first row, or a pair that is not tested), ``above_id`` that row's entry id;
    ``apart``: a paper row listed apart, not ranked (``like_with_like``)."""

    rank: int | None
    entry: LeaderboardEntry
    cells: list[Any]
    bounds: list[Any] = field(default_factory=list)
    versus_above: Verdict | None = None
    above_id: int | None = None
    headers: list[str] = field(default_factory=list)
    apart: bool = False

    specs: list[MetricSpec] = field(default_factory=list)
    fields: list[MethodField] = field(default_factory=list)  # the view's field columns

    @property
    def field_cells(self) -> list[tuple[str, str]]:
        """(label, value as shown) of each field column of the row."""
        answers = self.entry.fields or {}
        return [(f.label, f.shown(answers.get(f.name))) for f in self.fields]

    @property
    def labelled(self) -> list[tuple[str, Any, Any, MetricSpec]]:
        """(column header, value, interval, spec) of each cell: a phone shows the header beside the value."""
        return list(zip(self.headers, self.cells, self.bounds, self.specs or [FRACTION] * len(self.cells)))


@dataclass
class Page:
    """``significance``: the paired tests of the page's adjacent rows, adjusted together."""

    rows: list[RankedRow]
    number: int
    count: int
    page_size: int
    significance: Family | None = None

    @property
    def pages(self) -> int:
        return max(1, -(-self.count // self.page_size))


def leaderboard_page(view: LeaderboardView, page_size: int = PAGE_SIZE) -> Page:
    """One page of ranked rows: three queries (count, rank of the page's first value, rows), and
    one more for the paired tests of its adjacent rows on the sorted column when it has any."""
    entries = ordered_entries(view)
    count = entries.count()
    number = min(view.page, max(1, -(-count // page_size)))
    offset = (number - 1) * page_size
    page_entries = list(with_units(entries)[offset:offset + page_size])
    specs = view.column_specs
    rows: list[RankedRow] = []
    for i, entry in enumerate(page_entries):
        value = entry.sort_value
        if value is None:
            rank = None
        elif rows and rows[-1].entry.sort_value == value:
            rank = rows[-1].rank
        elif i == 0 and offset > 0:
            better = (contestants(view).annotate(v=score_expression(view.sort))
                      .filter(**{"v__lt" if view.ascending else "v__gt": value}).count())
            rank = better + 1
        else:
            rank = offset + i + 1
        rows.append(RankedRow(rank=rank, entry=entry, cells=[entry.scores.get(c) for c in view.columns],
                              bounds=[entry.intervals.get(c) for c in view.columns], headers=view.headers,
                              specs=specs, fields=view.field_columns))
    verdicts, family = board_verdicts([rung(e.pk, e.result_id, e.test_labels, e.test_scorer, e.test_partition,
                                            e.sort_value, e.test_scenes, e.test_min_scenes) for e in page_entries],
                                      view.sort, view.split.pk, "shown")
    for above, row, verdict in zip([None, *rows], rows, verdicts):
        row.versus_above, row.above_id = verdict, above.entry.pk if above and verdict else None
    return Page(rows=rows, number=number, count=count, page_size=page_size, significance=family)


def entry_as_json(row: RankedRow, columns: list[str]) -> dict[str, Any]:
    e = row.entry
    return {"rank": row.rank, "entry_id": e.pk, "method": e.name, "method_id": e.method_id,
            "team": None if e.is_anonymous else e.team_name, "anonymous": e.is_anonymous,
            "reported_in_paper": e.is_paper, "reference": e.is_reference, "listed_apart": row.apart,
            "note": e.paper_note,
            "paper_url": e.paper_url, "venue": e.venue, "method_paper": e.method_paper or None,
            "protocol": e.protocol, "uses_extra_data": e.uses_extra_data,
            "verified": e.is_verified, "scorer_version": e.scorer_version, "submission_id": e.submission_id,
            "published_at": e.published_at.isoformat(), "fields": e.fields, "after_challenge": e.after_challenge,
            "state": e.state,
            "scores": {c: e.scores.get(c) for c in columns},
            "intervals": {c: e.intervals[c] for c in columns if e.intervals.get(c) is not None},
            **significance_json(row.versus_above, row.above_id)}


@dataclass(frozen=True)
class PublicMethod:
    """What public pages and the API may show of a method. For an anonymous one: no
    team, authors, paper or code (its page gets this, never the ``Method`` itself)."""

    pk: int
    name: str
    team: str | None
    authors: str
    paper_url: str
    code_url: str
    description: str
    details: str
    uses_extra_data: bool | None
    is_anonymous: bool

    @classmethod
    def of(cls, method: Any) -> PublicMethod:
        hidden = bool(method.is_anonymous)
        return cls(pk=method.pk, name=method.name, team=None if hidden else method.team.name,
                   authors="" if hidden else method.authors, paper_url="" if hidden else method.paper_url,
                   code_url="" if hidden else method.code_url, description=method.description,
                   details=method.details, uses_extra_data=method.uses_extra_data, is_anonymous=hidden)

    @property
    def byline(self) -> str:
        return ANONYMOUS_LABEL if self.is_anonymous else f"team {self.team}"


@dataclass
class TrackSummary:
    """What the home page shows of a track's default split: its leaders (each with its rank on the
    board, ties alike, and its protocol where it is another than this service's), how many rows it
    has, and the view they come from."""

    split: Split
    leaders: list[tuple[int, LeaderboardEntry, Any]]
    scored: int
    paper: int
    spec: MetricSpec = FRACTION  # the sorted column's: how the leaders' scores read
    view: LeaderboardView | None = None


def track_summary(split: Split, embargoed: bool, top: int = 3) -> TrackSummary:
    """The ``top`` ranked rows of the split's default view with their board ranks (competition
    ranks: a tie is numbered alike), and its counts of scored and paper rows."""
    view = LeaderboardView.from_query(split, {}, embargoed=embargoed)
    entries = filtered_entries(view)
    leaders: list[tuple[int, LeaderboardEntry, Any]] = []
    protocols = {p.key: p for p in split.benchmark.spec.protocols}
    for i, entry in enumerate(ordered_entries(view).filter(sort_value__isnull=False)[:top]):
        tied = leaders and leaders[-1][1].sort_value == entry.sort_value
        other = protocols.get(entry.protocol) if is_other_protocol(split, entry.protocol) else None
        leaders.append((leaders[-1][0] if tied else i + 1, entry, other))
    return TrackSummary(split=split, leaders=leaders, scored=entries.filter(is_paper=False).count(),
                        paper=entries.filter(is_paper=True).count(), view=view,
                        spec=split.benchmark.metric_spec(view.sort))


def group_profile(split: Split, metric: str) -> dict[str, dict[str, float | None]]:
    """Per group: the best value (the lowest where lower is better) and the median over the rows the
    split's default board ranks (for charts; references and the rows listed apart are neither)."""
    spec = split.benchmark.spec
    metric_spec = split.benchmark.metric_spec(metric)
    values: dict[str, list[float]] = {g: [] for g in spec.groups}
    ranked = LeaderboardEntry.objects.filter(split=split, is_reference=False, state=ResultState.CURRENT)
    apart = apart_rows(split, "")
    for scores in (ranked if apart is None else ranked.exclude(apart)).values_list("scores", flat=True):
        for g in spec.groups:
            v = scores.get(f"{g}/{metric}")
            if v is not None:
                values[g].append(v)
    return {g: {"best": best(metric_spec, v), "median": statistics.median(v) if v else None}
            for g, v in values.items()}


def group_references(split: Split, metric: str, but: int | None = None) -> list[tuple[str, list[float | None]]]:
    """The split's reference rows (except entry ``but``) and their value of ``metric`` per group,
    as charts draw them: a line across each group."""
    spec = split.benchmark.spec
    return [(name, [scores.get(f"{g}/{metric}") for g in spec.groups])
            for name, scores in LeaderboardEntry.objects.filter(split=split, is_reference=True).exclude(pk=but)
            .order_by("name").values_list("name", "scores")]


def best_over_time(view: LeaderboardView) -> list[tuple[Any, float, str]]:
    """(date, best value of the view's metric so far, method) at each date the best improved
    (went down, where lower is better).

    Over the ranked rows the table shows (paper rows included unless the view
    hides them; references never), so the last point is the table's best. A
    paper row's date is its paper's publication date (``published_at``).
    """
    spec = view.spec_of(view.metric)
    points: list[tuple[Any, float, str]] = []
    for published_at, score, name in (contestants(view).annotate(v=score_expression(view.metric))
                                      .filter(v__isnull=False).order_by("published_at", "id")
                                      .values_list("published_at", "v", "name")):
        if not points or is_better(spec, score, points[-1][1]):
            if points and points[-1][0] == published_at:  # rows of one paper share its date: keep its best
                points.pop()
            points.append((published_at, score, name))
    return points


def reference_lines(view: LeaderboardView, references: list[LeaderboardEntry] | None = None) -> list[tuple[str, float]]:
    """(method, value of the view's metric) of each reference row the view shows with that metric
    (``references``: the view's ``reference_entries``, when the caller has them)."""
    return [(e.name, e.scores[view.metric]) for e in (reference_entries(view) if references is None else references)
            if e.scores.get(view.metric) is not None]
