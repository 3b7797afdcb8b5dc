"""The import rules of the house, read from the source (no module is imported): no circle anywhere in
``leaderboard/`` or ``evaluation_workers/``, and the site's floors, each importing only its own floor and
those below it, but for the few imports listed in ``ALLOWED_UP``. (``test_boundaries.py`` checks the
scoring core's rules in fresh interpreters; ``test_plugin_api.py`` what a track may import.)"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from fnmatch import fnmatchcase
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("leaderboard", "evaluation_workers")

# The site's floors, bottom first. A module belongs to the first floor, in ``_MATCH_ORDER``, one of whose
# patterns its dotted name matches (fnmatch: ``*`` spans dots).
FLOORS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("lib", "helpers: no model, no app", ("leaderboard.lib", "leaderboard.lib.*")),
    ("base", "the settings, the site's Celery app, the API's one error shape",
     ("leaderboard", "leaderboard.settings", "leaderboard.celery", "leaderboard.api_errors")),
    ("models", "every app's tables, and the phase rules a model computes with",
     ("leaderboard.*.models", "leaderboard.benchmarks.phases")),
    ("accounts", "users, teams, tokens and their throttles", ("leaderboard.accounts", "leaderboard.accounts.*")),
    ("rankings", "the board's precomputed rows, written from the models alone; what reads them",
     ("leaderboard.rankings", "leaderboard.rankings.*")),
    ("benchmarks", "tracks, splits, labels and bundles (which refresh the rows they change)",
     ("leaderboard.benchmarks", "leaderboard.benchmarks.*")),
    ("submissions", "uploads, their lifecycle, results (which refresh their rows), quotas",
     ("leaderboard.submissions", "leaderboard.submissions.*")),
    ("moderation", "the desk and its audit log, over all of the above", ("leaderboard.moderation", "leaderboard.moderation.*")),
    ("ops", "health, outages and metrics of the whole site", ("leaderboard.ops", "leaderboard.ops.*")),
    ("entry points", "what requests, the admin, Celery and manage.py call: views, the API, admin, tasks, "
     "commands, template tags, URLs, app configs, migrations",
     ("leaderboard.*.views", "leaderboard.*.api", "leaderboard.*.forms", "leaderboard.*.admin",
      "leaderboard.*.tasks", "leaderboard.*.urls", "leaderboard.*.api_urls", "leaderboard.*.apps",
      "leaderboard.*.management", "leaderboard.*.management.*", "leaderboard.*.templatetags",
      "leaderboard.*.templatetags.*", "leaderboard.*.migrations", "leaderboard.*.migrations.*",
      "leaderboard.urls", "leaderboard.wsgi", "leaderboard.openapi", "leaderboard.openapi_schemas")),
)
# Entry points and models are told apart by their module's name, before the app they live in.
_MATCH_ORDER = ("entry points", "models", "lib", "base", "accounts", "rankings", "benchmarks", "submissions",
                "moderation", "ops")

# The imports allowed to run up a floor (at most three), each with its reason.
ALLOWED_UP: dict[tuple[str, str], str] = {
    ("leaderboard.benchmarks.bundle_apply", "leaderboard.submissions.lifecycle"):
        "a bundle's new labels queue its split's submissions to be re-scored (--allow-rescore)",
}


def module_files() -> dict[str, Path]:
    """Every module of the two packages, by dotted name (a package by its own name)."""
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            found[name] = path
    return found


def _imported(node: ast.AST, package: str) -> Iterable[tuple[str, str | None]]:
    """``(module, name)`` pairs one import statement names (``name`` None for ``import x``)."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield alias.name, None
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            parts = package.split(".")
            anchor = ".".join(parts[: len(parts) - node.level + 1])
            base = f"{anchor}.{base}" if base else anchor
        for alias in node.names:
            yield base, alias.name


def import_graph() -> dict[str, set[str]]:
    """Module -> the project's modules it imports anywhere (at the top, in a function, for type checking).

    ``from p import x`` is an edge to ``p.x`` where that is a module, else to ``p``; ``import a.b.c`` to the
    deepest module of the project it names. A parent package an import runs on the way is no edge of its own.
    """
    files = module_files()

    def resolve(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        edges = graph.setdefault(module, set())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            for base, name in _imported(node, package):
                target = f"{base}.{name}" if name and f"{base}.{name}" in files else resolve(base)
                if target is not None and target != module:
                    edges.add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle through each strongly connected group of modules, as ``[a, b, ..., a]``."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []
    for start in sorted(graph):  # Tarjan's algorithm, iteratively (a deep recursion is no test's business)
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(group)
    return [_circle(graph, group) for group in groups]


def _circle(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """The shortest way from the group's first module back to itself, inside the group."""
    first = min(group)
    paths = {child: [first, child] for child in sorted(graph[first] & group)}
    frontier = list(paths)
    while first not in paths:
        nxt = []
        for node in frontier:
            for child in sorted(graph[node] & group):
                if child not in paths:
                    paths[child] = [*paths[node], child]
                    nxt.append(child)
        frontier = nxt
    return paths[first]


def floor_of(module: str) -> str | None:
    patterns = {name: globs for name, _, globs in FLOORS}
    return next((name for name in _MATCH_ORDER if any(fnmatchcase(module, g) for g in patterns[name])), None)


def upward_imports(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """The site's imports from a floor to one above it."""
    level = {name: i for i, (name, _, _) in enumerate(FLOORS)}
    up = []
    for module, targets in sorted(graph.items()):
        if not module.startswith("leaderboard"):
            continue
        for target in sorted(targets):
            if target.startswith("leaderboard") and level[floor_of(target)] > level[floor_of(module)]:
                up.append((module, target))
    return up


def test_no_module_imports_itself_in_a_circle():
    """A circle (``a`` imports ``b``, which reaches ``a`` again) is named, module by module."""
    found = cycles(import_graph())
    assert found == [], "import circles:\n" + "\n".join(" -> ".join(circle) for circle in found)


def test_the_circle_finder_names_a_circle_it_is_shown():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e2"}, "e2": {"e"}}
    assert sorted(cycles(graph)) == [["a", "b", "c", "a"], ["e", "e2", "e"]]


def test_every_site_module_is_on_one_floor_and_imports_none_above_it_but_the_allowed():
    graph = import_graph()
    homeless = [m for m in graph if m.startswith("leaderboard") and floor_of(m) is None]
    assert homeless == [], f"modules on no floor (add them to FLOORS): {homeless}"
    assert FLOORS[0][0] == "lib" and len(ALLOWED_UP) <= 3
    up = upward_imports(graph)
    unexplained = [f"{a} ({floor_of(a)}) -> {b} ({floor_of(b)})" for a, b in up if (a, b) not in ALLOWED_UP]
    assert unexplained == [], "imports up a floor:\n" + "\n".join(unexplained)
    stale = [pair for pair in ALLOWED_UP if pair not in up]
    assert stale == [], f"allowed upward imports that no longer exist (remove them): {stale}"


def test_lib_imports_no_floor_above_it():
    """``lib`` counts and caches with what it holds: nothing of ``ops``, ``rankings``, ``submissions`` or any app."""
    graph = import_graph()
    above = sorted((m, t) for m, targets in graph.items() if floor_of(m) == "lib"
                   for t in targets if t.startswith("leaderboard") and floor_of(t) != "lib")
    assert above == []
