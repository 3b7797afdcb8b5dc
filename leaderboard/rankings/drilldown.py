"""Results below the leaderboard's groups (OpenScan per attribute, MMScan per sub-class).

A track says where its scorer records them (``Track.detail_rows``: a key of ``Result.details``,
e.g. OpenScan's ``per_class``: ``"<aspect>/<attribute>": {AP, AP50, AP25, count}``).
What the public sees of them depends on the split:

- labels public (``Split.labels_public``, set by maintainers): every attribute or
  sub-class, with its count of valid instances or prompts;
- labels hidden: only those with at least ``DRILLDOWN_MIN_GROUP_SIZE`` of them, and
  never a count. An attribute without ground truth (the scorer's ``null``) and a
  small one are withheld alike, so ``null`` vs ``0.0`` tells nothing about which
  hidden classes exist; which rows are shown depends on the labels only, the same
  for every submission. A result without counts (scored before they were recorded)
  shows nothing on a hidden split.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.conf import settings


@dataclass
class DrillRow:
    name: str
    values: dict[str, float | None]
    count: int | None  # None on hidden splits


@dataclass
class DrillGroup:
    name: str
    rows: list[DrillRow] = field(default_factory=list)


@dataclass
class Drilldown:
    """What may be shown below one result's groups (``groups`` may be empty)."""

    label: str
    metrics: list[str]
    labels_public: bool
    min_group_size: int | None  # hidden splits: the size a shown row has at least
    groups: list[DrillGroup]
    page_metrics: list[str] = field(default_factory=list)  # the columns a page shows (the JSON has all)

    @property
    def plural(self) -> str:
        word = self.label.lower()
        return word + ("es" if word.endswith("s") else "s")

    @property
    def shown(self) -> int:
        return sum(len(g.rows) for g in self.groups)

    def as_json(self) -> dict[str, Any]:
        return {"level": self.label.lower(), "labels_public": self.labels_public,
                "min_group_size": self.min_group_size, "metrics": self.metrics,
                "groups": {g.name: {r.name: {**r.values, **({"count": r.count} if r.count is not None else {})}
                                    for r in g.rows} for g in self.groups}}


def drilldown(details: dict[str, Any] | None, split: Any) -> Drilldown | None:
    """The drill-down of a result's ``details`` on ``split``, filtered for the public; None when
    the track has none or the result recorded none."""
    spec = split.benchmark.spec
    rows = spec.detail_rows
    if rows is None or not isinstance(details, dict) or not isinstance(details.get(rows.key), dict):
        return None
    key, label = rows.key, rows.label
    metrics = rows.metrics or tuple(spec.metrics)
    public = bool(split.labels_public)
    minimum = int(settings.DRILLDOWN_MIN_GROUP_SIZE)
    groups: dict[str, DrillGroup] = {}
    parents = rows.parents
    for name, values in details[key].items():
        if not isinstance(values, dict):
            continue
        count = values.get("count")
        if not public and (not isinstance(count, int) or count < minimum):
            continue  # small, empty, or of unknown size: withheld alike on hidden labels
        group, _, row = name.partition("/") if "/" in name else (parents.get(name, ""), "", name)
        groups.setdefault(group, DrillGroup(group)).rows.append(
            DrillRow(row, {m: values.get(m) for m in metrics}, count if public else None))
    order = {g: i for i, g in enumerate(spec.groups)}
    return Drilldown(label=label, metrics=list(metrics), labels_public=public,
                     min_group_size=None if public else minimum,
                     groups=sorted(groups.values(), key=lambda g: order.get(g.name, len(order))))


def public_details(details: dict[str, Any], split: Any) -> dict[str, Any]:
    """``details`` as a submitter may see them: on a hidden split, per-class values only where
    the drill-down shows them (no counts, no ``null`` of an empty class)."""
    spec = split.benchmark.spec
    per_class = spec.per_class_keys
    if split.labels_public or not any(k in details for k in per_class):
        return details
    out = {k: v for k, v in details.items() if k not in per_class}
    shown = drilldown(details, split)
    if shown is not None:
        rows = spec.detail_rows
        out[rows.key] = {(r.name if rows.parents else f"{g.name}/{r.name}"): r.values
                    for g in shown.groups for r in g.rows}
    out["per_class_withheld"] = (f"Labels of {split} are hidden: per-class values are shown only for classes "
                                 f"with at least {settings.DRILLDOWN_MIN_GROUP_SIZE} instances, without counts.")
    return out
