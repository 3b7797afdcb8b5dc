"""Describing a method: its details, and its answers to the method fields of each benchmark it
entered (``lib.method_fields``). The method form, the API (``PATCH /api/v1/my/methods/<id>``)
and ``lb method set`` all save through ``check_update_method``, which rewrites the method's
leaderboard rows so that boards, filters and exports show the new answers at once."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from leaderboard.benchmarks.models import Benchmark, Split
from leaderboard.lib.method_fields import MethodField, declared, missing
from leaderboard.rankings.services import refresh_entry
from leaderboard.submissions.models import Method


def entered(method: Method) -> list[Benchmark]:
    """The benchmarks ``method`` has a submission on, in the site's order."""
    return list(Benchmark.objects.filter(splits__submissions__method=method).distinct().order_by("order", "track"))


def field_sets(method: Method) -> list[tuple[Benchmark, list[MethodField]]]:
    """Each benchmark the method entered that declares method fields, with its fields."""
    return [(b, fields) for b in entered(method) if (fields := declared(b))]


def answers(method: Method, benchmark: Benchmark) -> dict[str, Any]:
    """The method's answers to ``benchmark``'s fields."""
    return dict((method.fields or {}).get(benchmark.track, {}))


def missing_fields(method: Method, benchmark: Benchmark) -> list[str]:
    """The required fields of ``benchmark`` the method has not answered (their labels)."""
    return missing(declared(benchmark), answers(method, benchmark))


def missing_for_publishing(method: Method) -> list[str]:
    """What the method lacks before it may be published: its details, then each benchmark's
    required fields (``Input (MMScan visual grounding)``)."""
    lacking = [str(m) for m in method.missing_metadata]
    for benchmark, _ in field_sets(method):
        lacking += [f"{label} ({benchmark.title})" for label in missing_fields(method, benchmark)]
    return lacking


def parse_changes(method: Method, data: Any) -> dict[str, dict[str, Any]]:
    """An API body's ``fields`` (``{"<track>": {"<field>": value}}``) checked and cleaned; ``ValueError``
    naming the track, the field and what was expected."""
    if not isinstance(data, dict):
        raise ValueError(f'Expected fields to be an object {{"<track>": {{"<field>": value}}}}, but got {data!r}')
    known = {b.track: fields for b, fields in field_sets(method)}
    changes: dict[str, dict[str, Any]] = {}
    for track, values in data.items():
        if track not in known:
            raise ValueError(f"fields.{track}: {method.name!r} answers the fields of "
                             f"{', '.join(known) or 'no benchmark'} (the benchmarks it entered that declare some)")
        if not isinstance(values, dict):
            raise ValueError(f"fields.{track}: expected an object of answers, but got {values!r}")
        by_name = {f.name: f for f in known[track]}
        for name, raw in values.items():
            if name not in by_name:
                raise ValueError(f"fields.{track}.{name}: unknown field; {track} declares: {', '.join(by_name)}")
            try:
                changes.setdefault(track, {})[name] = by_name[name].clean(raw)
            except ValueError as exc:
                raise ValueError(f"fields.{track}.{name}: {exc}") from None
    return changes


def do_set_answers(method: Method, changes: dict[str, dict[str, Any]]) -> None:
    """Store ``changes`` (cleaned answers by track; None clears one) on the method; no checks."""
    stored = {track: dict(values) for track, values in (method.fields or {}).items()}
    for track, values in changes.items():
        for name, value in values.items():
            if value is None:
                stored.get(track, {}).pop(name, None)
            else:
                stored.setdefault(track, {})[name] = value
    method.fields = {track: values for track, values in stored.items() if values}


def check_update_method(form: Any) -> Method:
    """Save a valid ``MethodForm`` (details and field answers) and rewrite the method's rows."""
    with transaction.atomic():
        method: Method = form.save()
        do_refresh_rows(method)
    return method


def do_refresh_rows(method: Method) -> None:
    """Rewrite the method's leaderboard rows from what it says now (a frozen board keeps them until the reveal)."""
    for split in Split.objects.filter(entries__method=method).select_related("benchmark").distinct():
        refresh_entry(method, split)
