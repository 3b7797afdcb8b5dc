"""Writing a benchmark bundle (``bundles``) to the database: ``manage.py load_benchmark`` and ``load_demo``.

``plan`` compares the bundle with what the database holds and lists the changes, each with
the step that makes it; ``apply`` makes them in one transaction and records them in the audit
log. The same bundle loaded twice changes nothing the second time. A change that would
re-score or hide published results (new labels, a split dropped, results hidden for longer,
labels made private, a revealed board un-revealed) is refused unless ``allow_rescore``.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import transaction
from django.utils import timezone

from evaluation_workers.errors import LabelsError
from evaluation_workers.tracks import get_track
from leaderboard.benchmarks.bundle_participation_plan import plan_participation
from leaderboard.benchmarks.bundles import (
    BUNDLES_DIR,
    Bundle,
    BundleError,
    SplitSpec,
    bundled_paths,
    read_bundle,
)
from leaderboard.benchmarks.challenge_plans import PHASE_FIELDS, archived_refusal, plan_challenges
from leaderboard.benchmarks.models import Benchmark, Split
from leaderboard.benchmarks.permissions import maintainer_group
from leaderboard.benchmarks.services import discard_labels, do_load_labels, labels_checksum
from leaderboard.lib.host_pages import removed
from leaderboard.lib.pagecache import bump
from leaderboard.moderation.models import AuditEntry
from leaderboard.rankings.models import LeaderboardEntry
from leaderboard.rankings.services import do_load_paper_rows, do_refresh_split, paper_row_fields
from leaderboard.submissions.models import SplitLimit, Submission
from leaderboard.submissions.new_labels import do_new_labels

SPLIT_FIELDS = ("description", "is_default", "accepting_submissions", "results_visible_after", "labels_public",
                "starts_at", "freeze_at", "deadline", "reveal_at_deadline", "board_hidden", "max_published_per_team")
LOADED_BY = "manage.py load_benchmark"


def demo_writer(track: str) -> Callable[[Path, str], tuple[Path, Path]] | None:
    """The track's generator of small demo labels and predictions, ``write_demo(folder, split)``, or None."""
    return get_track(track).write_demo


@dataclass
class Change:
    text: str
    affected: str = ""  # the published results it would re-score or hide; empty when none
    diff: list[str] = field(default_factory=list)  # a long value's change, line by line (``_changed``)

    @property
    def whole(self) -> str:
        """The change with its diff, as the audit log keeps it."""
        return "\n".join([self.text, *self.diff])


@dataclass
class Context:
    actor_name: str
    notes: list[str] = field(default_factory=list)  # what the steps say besides the changes (demo predictions)
    stored: list[str] = field(default_factory=list)  # labels versions written, removed again if a later step fails


@dataclass
class Plan:
    bundle: Bundle
    changes: list[Change] = field(default_factory=list)
    steps: list[Callable[[Context], Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def change(self, text: str, step: Callable[[Context], Any] | None = None, affected: str = "",
               diff: list[str] | None = None) -> None:
        self.changes.append(Change(text, affected, diff or []))
        if step is not None:
            self.steps.append(step)

    @property
    def refusals(self) -> list[Change]:
        return [c for c in self.changes if c.affected]


class RescoreRefused(Exception):
    """Changes that would re-score or hide published results, asked without ``allow_rescore``."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        lines = [f"{plan.bundle.path.name}: refused: these changes would re-score or hide published results "
                 f"(load it again with --allow-rescore to make them):"]
        for c in plan.refusals:
            lines += [f"  - {c.text}: {c.affected}", *(f"      {line}" for line in c.diff)]
        super().__init__("\n".join(lines))


def published_results(split: Split) -> str:
    """``2 published results: NetA, NetB`` on ``split``, or empty."""
    names = sorted(set(Submission.objects.filter(split=split, is_published=True)
                       .values_list("method__name", flat=True)))
    return f"{len(names)} published result{'s' * (len(names) != 1)}: {', '.join(names)}" if names else ""


SHORT = 60  # a value this long or shorter is shown inline (``old -> new``); a longer one as a diff


def _show(value: Any) -> str:
    if isinstance(value, datetime):
        return f"{value.astimezone(UTC):%Y-%m-%d %H:%M} UTC"
    if isinstance(value, dict):  # keys in order: PostgreSQL's jsonb gives them back in its own
        value = dict(sorted(value.items()))
    return repr(value)


def _lines(value: Any) -> list[str]:
    if isinstance(value, str):
        return value.splitlines() or [""]
    if isinstance(value, (dict, list)):
        return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str).splitlines()
    return [_show(value)]


def _changed(subject: str, name: str, old: Any, new: Any) -> tuple[str, list[str]]:
    """``subject: name old -> new`` with both values whole, or, when either is long or spans lines,
    ``subject: name changed:`` and a unified diff of the two (never a value cut short)."""
    a, b = _show(old), _show(new)
    if len(a) <= SHORT and len(b) <= SHORT and "\n" not in a + b:
        return f"{subject}: {name} {a} -> {b}", []
    diff = difflib.unified_diff(_lines(old), _lines(new), "now", "bundle", lineterm="", n=2)
    return f"{subject}: {name} changed:", list(diff)[2:]  # without the ---/+++ header


def _split(track: str, name: str) -> Split:
    return Split.objects.select_related("benchmark").get(benchmark__track=track, name=name)


def _draft(track: str, name: str) -> Split:
    """An unsaved split of ``track``: what checksums and paper rows need of a split not created yet."""
    return Split(benchmark=Benchmark(track=track), name=name)


def _hides(split: Split, name: str, new: Any) -> bool:
    """Whether setting ``name`` to ``new`` hides results that ``split`` shows now."""
    now, old = timezone.now(), getattr(split, name)
    if name == "results_visible_after":
        return new is not None and new > now and (old is None or new > old)
    if name == "labels_public":
        return bool(old) and not new
    if name == "deadline":  # a revealed board goes back to hiding its private scores
        return split.revealed_at is not None and new is not None and new > now
    return False


def _plan_benchmark(plan: Plan, benchmark: Benchmark | None) -> None:
    b = plan.bundle
    wanted = {"title": b.title, "description": b.description, "order": b.order, "board": b.board,
              "method_fields": list(b.method_fields)}
    if benchmark is None:
        plan.change(f"create benchmark {b.track} ({b.title})",
                    lambda ctx: Benchmark.objects.create(track=b.track, **wanted))
        return
    diff = {k: v for k, v in wanted.items() if getattr(benchmark, k) != v}
    for k, v in diff.items():
        text, lines = _changed(f"benchmark {b.track}", k, getattr(benchmark, k), v)
        plan.change(text, diff=lines)
    if diff:
        plan.steps.append(lambda ctx: Benchmark.objects.filter(pk=benchmark.pk).update(**diff))


def _plan_pages(plan: Plan, benchmark: Benchmark | None) -> None:
    """Each host page added, changed (its Markdown as a diff) or removed; what the sanitiser will leave
    out of a page is said as a note, the dry run included."""
    b = plan.bundle
    have = dict(benchmark.pages) if benchmark else {}
    for key, source in b.pages.items():
        if dropped := removed(source):
            plan.notes.append(f"{b.path.name}: pages.{key}: the sanitiser removes {', '.join(dropped)}; the page "
                              f"shows the rest")
        if key not in have:
            plan.change(f"benchmark {b.track}: add page {key} ({len(source.splitlines())} lines)")
        elif have[key] != source:
            text, lines = _changed(f"benchmark {b.track}", f"page {key}", have[key], source)
            plan.change(text, diff=lines)
    for key in have:
        if key not in b.pages:
            plan.change(f"benchmark {b.track}: remove page {key}")
    if have != b.pages:
        plan.steps.append(lambda ctx: Benchmark.objects.filter(track=b.track).update(pages=dict(b.pages)))


def _update_split(track: str, name: str, diff: dict[str, Any]) -> None:
    split = _split(track, name)
    fields = dict(diff)
    if PHASE_FIELDS & set(diff):  # as moderation.check_set_phases: a deadline ahead un-reveals the split
        deadline = diff.get("deadline", split.deadline)
        if deadline and deadline > timezone.now():
            fields["revealed_at"] = None
    Split.objects.filter(pk=split.pk).update(**fields)
    if PHASE_FIELDS & set(diff):
        do_refresh_split(_split(track, name))


def _plan_fields(plan: Plan, split: Split | None, spec: SplitSpec) -> None:
    track = plan.bundle.track
    wanted = {"description": spec.description, "is_default": spec.default, **{
        k: getattr(spec, k) for k in SPLIT_FIELDS if k not in ("description", "is_default")}}
    if split is None:
        plan.change(f"create split {track}/{spec.name}",
                    lambda ctx: Split.objects.create(benchmark=Benchmark.objects.get(track=track), name=spec.name,
                                                     **wanted))
        return
    diff = {k: v for k, v in wanted.items() if getattr(split, k) != v}
    if refusal := archived_refusal(split, PHASE_FIELDS & set(diff)):
        raise BundleError([f"{plan.bundle.path.name}: {refusal}"])
    shown = published_results(split) if diff else ""
    for k, v in diff.items():
        text, lines = _changed(f"split {split}", k, getattr(split, k), v)
        plan.change(text, affected=shown if _hides(split, k, v) else "", diff=lines)
    if diff:
        plan.steps.append(lambda ctx: _update_split(track, spec.name, diff))


def _plan_limits(plan: Plan, split: Split | None, spec: SplitSpec) -> None:
    track = plan.bundle.track
    have = {limit.scope: limit for limit in SplitLimit.objects.filter(split=split)} if split else {}
    for scope, values in spec.limits.items():
        old = have.get(scope)
        if old is None or any(getattr(old, k) != v for k, v in values.items()):
            was = "" if old is None else f" (was {', '.join(f'{k} {getattr(old, k)}' for k in values)})"
            plan.change(f"split {track}/{spec.name}: {scope} limits {', '.join(f'{k} {v}' for k, v in values.items())}"
                        f"{was}", lambda ctx, scope=scope, values=values: SplitLimit.objects.update_or_create(
                            split=_split(track, spec.name), scope=scope, defaults=values))
    for scope, old in have.items():
        if scope not in spec.limits:
            plan.change(f"split {track}/{spec.name}: {scope} limits removed (the defaults apply)",
                        lambda ctx, pk=old.pk: SplitLimit.objects.filter(pk=pk).delete())


@contextmanager
def _about(bundle: Bundle, key: str) -> Iterator[None]:
    """Labels a track refuses, or files that cannot be read, as one line naming the bundle and the key."""
    try:
        yield
    except (LabelsError, OSError) as exc:
        raise BundleError([f"{bundle.path.name}: {key}: {exc}"]) from exc


def _load_source(ctx: Context, bundle: Bundle, spec: SplitSpec, replaces: bool) -> None:
    split = _split(bundle.track, spec.name)
    previous = split.active_labels
    with _about(bundle, f"{spec.labels.key}.source"):
        label_set, created = do_load_labels(split, spec.labels.source, loaded_by=ctx.actor_name,
                                            partition=spec.labels.public_subset)
    if created:
        ctx.stored.append(label_set.storage_key)
    # Results on the earlier labels: revisions bumped, rows "awaiting re-score", re-scores queued.
    queued = do_new_labels(split, previous)
    if replaces:
        ctx.notes.append(f"{split}: labels {label_set.sha256[:12]} active; {queued} submissions queued "
                         f"to be re-scored")


def _load_synthetic(ctx: Context, track: str, name: str) -> None:
    split = _split(track, name)
    labels, predictions = demo_writer(track)(Path(settings.DATA_DIR) / "demo" / track, name)
    label_set, created = do_load_labels(split, labels, loaded_by=ctx.actor_name, synthetic=True)
    if created:
        ctx.stored.append(label_set.storage_key)
    ctx.notes.append(f"{split}: synthetic demo labels {label_set.sha256[:12]}; try uploading {predictions}")


def _plan_labels(plan: Plan, split: Split | None, spec: SplitSpec, synthetic: bool) -> None:
    track, labels = plan.bundle.track, spec.labels
    active = split.active_labels if split else None
    if labels.kind == "synthetic" and synthetic and active is None:
        if demo_writer(track) is None:
            raise BundleError([f"{plan.bundle.path.name}: {labels.key}.synthetic: synthetic labels, but the track "
                               f"{track} has no demo generator (write_demo)"])
        plan.change(f"split {track}/{spec.name}: load the track's synthetic demo labels",
                    lambda ctx: _load_synthetic(ctx, track, spec.name))
    if labels.kind != "source":
        return
    with _about(plan.bundle, f"{labels.key}.source"):
        sha = labels_checksum(split or _draft(track, spec.name), labels.source, labels.public_subset)
    if active is not None and active.sha256 == sha:
        return
    was = f" (replacing {active.sha256[:12]})" if active else ""
    plan.change(f"split {track}/{spec.name}: load labels {sha[:12]} from {labels.source}{was}",
                lambda ctx: _load_source(ctx, plan.bundle, spec, replaces=active is not None),
                affected=published_results(split) if split and active else "")


def _plan_dropped(plan: Plan, split: Split) -> None:
    if not Submission.objects.filter(split=split).exists():
        plan.change(f"remove split {split} (no submissions; its paper rows, labels and limits go with it)",
                    lambda ctx, pk=split.pk: Split.objects.filter(pk=pk).delete())
        return
    plan.change(f"split {split} is no longer declared: it has submissions, so it is kept, closed to submissions "
                f"and not the default (delete it in the admin)",
                lambda ctx, pk=split.pk: Split.objects.filter(pk=pk).update(accepting_submissions=False,
                                                                            is_default=False),
                affected=published_results(split))


def _plan_paper_rows(plan: Plan, splits: dict[str, Split]) -> None:
    b = plan.bundle
    declared: dict[str, set[str]] = {}
    for block in b.paper_rows:
        split = splits.get(block["split"])
        target = split or _draft(b.track, block["split"])
        have = {e.name: e for e in LeaderboardEntry.objects.filter(split=split, is_paper=True)} if split else {}
        changed = []
        for row in block["rows"]:
            declared.setdefault(block["split"], set()).add(row["method"])
            fields = paper_row_fields(target, block, row, b.path.name)
            old = have.get(row["method"])
            if old is None:
                changed.append(f"add paper row {row['method']!r}")
            elif keys := [k for k, v in fields.items() if getattr(old, k) != v]:
                changed.append(f"paper row {row['method']!r}: {', '.join(keys)}")
        for text in changed:
            plan.change(f"split {b.track}/{block['split']}: {text}")
        if changed:
            plan.steps.append(lambda ctx, block=block: do_load_paper_rows(_split(b.track, block["split"]), block,
                                                                          b.path.name))
    for name, split in splits.items():
        if name not in {s.name for s in b.splits}:
            continue
        for entry in LeaderboardEntry.objects.filter(split=split, is_paper=True).exclude(
                name__in=declared.get(name, set())):
            plan.change(f"split {split}: remove paper row {entry.name!r} (not in the bundle)",
                        lambda ctx, pk=entry.pk: LeaderboardEntry.objects.filter(pk=pk).delete())


def _plan_maintainers(plan: Plan) -> None:
    from django.contrib.auth import get_user_model

    b = plan.bundle
    users = {u.get_username(): u for u in get_user_model().objects.filter(username__in=b.maintainers)}
    if unknown := [n for n in b.maintainers if n not in users]:
        raise BundleError([f"{b.path.name}: maintainers: no user {', '.join(map(repr, unknown))}"])
    group_name = maintainer_group(b.track)
    members = set(Group.objects.filter(name=group_name).values_list("user__username", flat=True))
    for name in b.maintainers:
        if name not in members:
            plan.change(f"add {name} to the group {group_name}", lambda ctx, u=users[name]: u.groups.add(
                Group.objects.get_or_create(name=group_name)[0]))


def plan(bundle: Bundle, *, synthetic: bool = True, paper_rows: bool = True) -> Plan:
    """What loading ``bundle`` would change, in order; nothing is written.

    ``synthetic``: give splits with ``labels: {synthetic: true}`` the track's demo labels where
    they have none. ``paper_rows``: load the bundle's paper rows (and remove those it lost).
    """
    out = Plan(bundle)
    benchmark = Benchmark.objects.filter(track=bundle.track).first()
    _plan_benchmark(out, benchmark)
    _plan_pages(out, benchmark)
    splits = {s.name: s for s in Split.objects.filter(benchmark=benchmark).select_related("benchmark")}
    for spec in bundle.splits:
        _plan_fields(out, splits.get(spec.name), spec)
        _plan_limits(out, splits.get(spec.name), spec)
        _plan_labels(out, splits.get(spec.name), spec, synthetic)
    for name, split in splits.items():
        if name not in {s.name for s in bundle.splits}:
            _plan_dropped(out, split)
    plan_challenges(out, benchmark)
    if paper_rows:
        _plan_paper_rows(out, splits)
    _plan_maintainers(out)
    plan_participation(out, benchmark)  # who may submit, announcements, the webhook
    return out


def apply(planned: Plan, *, allow_rescore: bool = False, dry_run: bool = False, actor: Any = None,
          actor_name: str = "", audit: bool = True) -> Plan:
    """Make the planned changes in one transaction, with one audit entry (``RescoreRefused`` first
    when one would re-score or hide published results and ``allow_rescore`` is off)."""
    if planned.refusals and not allow_rescore:
        raise RescoreRefused(planned)
    if dry_run or not planned.changes:
        return planned
    b = planned.bundle
    ctx = Context(actor_name=actor_name or (actor.get_username() if actor else LOADED_BY))
    try:
        with transaction.atomic():
            for step in planned.steps:
                step(ctx)
            bump(b.track)
            if audit:
                AuditEntry.objects.create(
                    actor=actor, actor_name=ctx.actor_name, action=AuditEntry.Action.LOAD_BENCHMARK, track=b.track,
                    target=f"benchmark {b.track} from {b.path.name}"[:300],
                    details={"bundle": str(b.path), "changes": [c.whole for c in planned.changes],
                             "allow_rescore": allow_rescore, "affected": [c.affected for c in planned.refusals]})
    except BaseException:
        discard_labels(ctx.stored)  # the rows went with the transaction; the files they named go too
        raise
    planned.notes = [*planned.notes, *ctx.notes]
    return planned


def load_bundle(path: Path | str | Bundle, *, synthetic: bool = True, paper_rows: bool = True,
                **options: Any) -> Plan:
    """Read, plan and apply one bundle (``apply``'s options); the plan, with what was changed."""
    bundle = path if isinstance(path, Bundle) else read_bundle(path)
    return apply(plan(bundle, synthetic=synthetic, paper_rows=paper_rows), **options)


def load_bundled_benchmarks(synthetic: bool = False) -> list[Benchmark]:
    """The repository's benchmarks (``bundles/*.yaml``), loaded without paper rows, audit or (by
    default) labels: the starting point of tests, as ``load_demo`` is the demo site's."""
    loaded = [load_bundle(p, synthetic=synthetic, paper_rows=False, allow_rescore=True, audit=False).bundle.track
              for p in bundled_paths()]
    return list(Benchmark.objects.filter(track__in=loaded))


def load_bundled_paper_rows(track: str) -> int:
    """The paper rows of the repository's bundle of ``track`` (added or updated, none removed)."""
    bundle = read_bundle(BUNDLES_DIR / f"{track}.yaml")
    return sum(do_load_paper_rows(_split(track, block["split"]), block, bundle.path.name)
               for block in bundle.paper_rows)
