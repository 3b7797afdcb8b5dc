"""How lb prints what the API answers: statuses, results (by each metric's spec), splits and challenges."""

from __future__ import annotations

from typing import Any

from leaderboard_cli.client import Client

NOT_OPEN = "not open yet: labels not loaded yet: opens when they are"


def pct(value: Any, spec: dict[str, Any] | None = None) -> str:
    """A score as lb prints it: a fraction as a percentage with two decimals; a value (a metric the track
    declares with a unit, ``metric_specs``) as it is, with the decimals pages show."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return "     —"
    if spec and spec.get("kind") == "value":
        return f"{value:6.{int(spec.get('precision', 2))}f}"
    return f"{value * 100:6.2f}"


def metric_specs(client: Client, track: str) -> dict[str, dict[str, Any]]:
    """The track's metric specs (``GET /tracks``); empty from a server that has none (all fractions)."""
    return next((t.get("metric_specs") or {} for t in client.get("tracks")["tracks"] if t["track"] == track), {})


def heading(metric: str, spec: dict[str, Any] | None) -> str:
    """``EM``, or ``error(cm)↓`` for a value with a unit where lower is better."""
    if not spec:
        return metric
    unit = f"({spec['unit']})" if spec.get("kind") == "value" and spec.get("unit") else ""
    return metric + unit + ("↓" if spec.get("direction") == "lower" else "")


def print_status(s: dict[str, Any]) -> None:
    line = f"#{s['id']} {s['track']}/{s['split']} {s['method']} (team {s['team']}): {s['status']}"
    if s["status"] == "running":
        line += f" {s['progress'] * 100:.0f}%"
    if s.get("is_published"):
        line += ", published"
    print(line)
    if s.get("error"):
        print(f"  {s['error']['kind'].replace('_', ' ')}: {s['error']['message']}")
    elif s.get("message"):
        print(f"  {s['message']}")


def print_results(s: dict[str, Any], specs: dict[str, dict[str, Any]] | None = None) -> None:
    """A result's scores, overall and per group; ``specs``: the track's metric specs (a fraction where absent)."""
    specs = specs or {}
    result = s.get("result")
    if not result:
        print(f"#{s['id']} has no scores yet (status {s['status']}).")
        return
    metrics = list(result["metrics"])
    print(f"#{s['id']} {s['track']}/{s['split']} {s['method']}: scorer {result['scorer_version']}")
    width = max([len("Overall"), *(len(g) for g in result["breakdown"])])
    print(" " * width + "  " + "  ".join(f"{heading(m, specs.get(m)):>8}" for m in metrics) + "     count")
    print(f"{'Overall':<{width}}  " + "  ".join(f"{pct(result['metrics'][m], specs.get(m)):>8}" for m in metrics))
    for group, values in result["breakdown"].items():
        print(f"{group:<{width}}  " + "  ".join(f"{pct(values.get(m), specs.get(m)):>8}" for m in metrics)
              + f"  {values.get('count', ''):>8}")
    for warning in result.get("warnings", []):
        print(f"warning: {warning}")


def split_state(split: dict[str, Any]) -> str:
    """``test``, ``test (not open yet: labels not loaded yet: opens when they are)`` or ``test (closed)``."""
    if split["accepting_submissions"]:
        return str(split["name"])
    if split.get("labels_loaded") is False:
        return f"{split['name']} ({NOT_OPEN})"
    return f"{split['name']} (closed)"


def challenge_line(c: dict[str, Any]) -> str:
    """``challenge mmscan-vg-2027 (MMScan VG Challenge): running, development phase; phases: development on
    val to 2031-06-30, test on test (hidden, 1 row a team) 2031-07-01 to 2031-07-31``."""
    state = c["state"] + (f", {c['current_phase']} phase" if c.get("current_phase") else "")
    phases = []
    for p in c["phases"]:
        rules = [r for r in ("hidden" if p["board"] == "hidden" else "",
                             f"{p['max_published_per_team']} row{'s' * (p['max_published_per_team'] != 1)} a team"
                             if p.get("max_published_per_team") else "") if r]
        dates = f"{(p['starts_at'] or '')[:10]} to {(p['deadline'] or '')[:10]}"
        phases.append(f"{p['name']} on {p['split']}{' (' + ', '.join(rules) + ')' if rules else ''} {dates}")
    final = f"; final board: {c['url']}" if c.get("archived_at") and c.get("url") else ""
    return f"challenge {c['name']} ({c['title']}): {state}; phases: {', '.join(phases)}{final}"
