"""Results below the leaderboard's groups: OpenScan per attribute, MMScan per sub-class.

The scorers record them in ``Result.details`` (``per_class``: ``"<aspect>/<attribute>":
{AP, AP50, AP25, count}``; ``per_sub_class``: ``"<sub_class>": {<metric>..., count}``).
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

# Where each track keeps its drill-down, what a row is called, and the metrics shown.
SOURCES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "openscan": ("per_class", "Attribute", ("AP", "AP50", "AP25")),
    "mmscan-vg": ("per_sub_class", "Sub-class", ()),  # every metric of the track
}
# Keys of Result.details that hold per-class values (the owner's API answer filters them too).
PER_CLASS_KEYS = ("per_class", "semantic_per_class", "per_sub_class")


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


def _sub_class_group(track: str) -> dict[str, str]:
    if track != "mmscan-vg":
        return {}
    from evaluation_workers.tracks.mmscan_vg.labels import SUB_CLASS_GROUP

    return SUB_CLASS_GROUP


def drilldown(details: dict[str, Any] | None, split: Any) -> Drilldown | None:
    """The drill-down of a result's ``details`` on ``split``, filtered for the public; None when
    the track has none or the result recorded none."""
    track = split.benchmark.track
    if track not in SOURCES or not isinstance(details, dict) or not isinstance(details.get(SOURCES[track][0]), dict):
        return None
    key, label, metrics = SOURCES[track]
    spec = split.benchmark.spec
    metrics = metrics or tuple(spec.metrics)
    public = bool(split.labels_public)
    minimum = int(settings.DRILLDOWN_MIN_GROUP_SIZE)
    groups: dict[str, DrillGroup] = {}
    parents = _sub_class_group(track)
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
    if split.labels_public or not any(k in details for k in PER_CLASS_KEYS):
        return details
    out = {k: v for k, v in details.items() if k not in PER_CLASS_KEYS}
    shown = drilldown(details, split)
    if shown is not None:
        key = SOURCES[split.benchmark.track][0]
        out[key] = {(f"{g.name}/{r.name}" if key == "per_class" else r.name): r.values
                    for g in shown.groups for r in g.rows}
    out["per_class_withheld"] = (f"Labels of {split} are hidden: per-class values are shown only for classes "
                                 f"with at least {settings.DRILLDOWN_MIN_GROUP_SIZE} instances, without counts.")
    return out
