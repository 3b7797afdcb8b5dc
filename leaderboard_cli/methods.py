"""``lb method``: show, describe (details and method fields) or reveal a method of your teams."""

from __future__ import annotations

import argparse
from typing import Any

from leaderboard_cli.client import ApiError, Client


def _find_method(client: Client, name: str, team: str | None) -> dict[str, Any]:
    params = {"name": name, **({"team": team} if team else {})}
    methods = client.get("my/methods", params=params)["methods"]
    if not methods:
        raise ApiError(f"No method {name!r} in your teams (a method is created by its first submission).")
    if len(methods) > 1:
        raise ApiError(f"Several teams have a method {name!r}; pick one with --team "
                       f"({', '.join(m['team'] for m in methods)}).")
    return methods[0]


def _print_method(m: dict[str, Any]) -> None:
    for field in ("name", "team", "description", "authors", "paper_url", "code_url", "uses_extra_data", "details"):
        print(f"{field:<16} {m[field] if m[field] not in (None, '') else '—'}")
    for track, fields in (m.get("declared_fields") or {}).items():
        given = (m.get("fields") or {}).get(track, {})
        for f in fields:
            value = given.get(f["name"])
            shown = "—" if value is None else ("yes" if value is True else "no" if value is False else value)
            print(f"{f['name'] + ' (' + track + ')':<16} {shown}" + ("  (required)" if f["required"] else ""))
    if m.get("anonymous"):
        print(f"{'public as':<16} Anonymous (under review): `lb method reveal {m['name']}` shows the team")
    missing = m["missing_for_publishing"]
    print("ready to publish" if not missing else f"missing for publishing: {', '.join(missing)}")


def _field_changes(method: dict[str, Any], given: list[str], track: str | None) -> dict[str, dict[str, Any]]:
    """``--field NAME=VALUE`` answers by track (the server checks each value); ``--track`` where
    several benchmarks the method entered declare the same field (an empty VALUE clears it)."""
    declared = method.get("declared_fields") or {}
    changes: dict[str, dict[str, Any]] = {}
    for item in given:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ApiError(f"Expected --field NAME=VALUE, but got {item!r}.")
        owners = [t for t, fields in declared.items() if any(f["name"] == name for f in fields)]
        if track:
            owners = [track]
        elif len(owners) != 1:
            where = (f"{', '.join(owners)} declare it: pick one with --track" if owners else
                     "no benchmark it entered declares it (fields: " + ", ".join(
                         f"{f['name']} ({t})" for t, fields in declared.items() for f in fields) + ")")
            raise ApiError(f"--field {name}: {where}.")
        changes.setdefault(owners[0], {})[name] = value if value != "" else None
    return changes


def cmd_method(args: argparse.Namespace, client: Client) -> int:
    method = _find_method(client, args.name, args.team)
    if args.action == "reveal":
        method = client.post(f"my/methods/{method['id']}/reveal")
    elif args.action == "set":
        changes = {field: getattr(args, field) for field in
                   ("description", "authors", "paper_url", "code_url", "details") if getattr(args, field) is not None}
        if args.rename:
            changes["name"] = args.rename
        if args.extra_data is not None:
            changes["uses_extra_data"] = args.extra_data == "yes"
        if args.field:
            changes["fields"] = _field_changes(method, args.field, args.track)
        if not changes:
            raise ApiError("Nothing to change: give --description, --authors, --paper-url, --code-url, "
                           "--extra-data yes|no, --details, --field NAME=VALUE or --rename.")
        method = client.call("PATCH", f"my/methods/{method['id']}", json=changes)
    _print_method(method)
    return 0
