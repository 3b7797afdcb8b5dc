"""First page of a leaderboard with 5,000 published entries: render time and queries.

    .venv/bin/python benchmarks/leaderboard_pages.py [--entries 5000] [--repeat 20]

Builds a throwaway SQLite database (or uses DATABASE_URL), fills one OpenScan
split with entries whose scores cover every aspect and metric, then times the
page as the test client renders it: by primary metric, by a group column,
a later page, the JSON API and the JSON and CSV exports of all rows (the
page cache is off: this measures rendering; benchmarks/load.py measures the
cache). The baseline in the same run ranks the rows in
Python from all entries, as a view without precomputed ordering would.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="lb-bench-")
    os.environ.setdefault("SECRET_KEY", "benchmark")
    os.environ.setdefault("DATA_DIR", tmp)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "leaderboard.settings")
    os.environ["PAGE_CACHE_SECONDS"] = "0"
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext, setup_test_environment

    setup_test_environment()
    call_command("migrate", verbosity=0)
    from leaderboard.benchmarks.bundle_apply import load_bundled_benchmarks
    from leaderboard.benchmarks.models import Split
    from leaderboard.rankings.models import LeaderboardEntry, export_columns, export_texts

    load_bundled_benchmarks()
    split = Split.objects.select_related("benchmark").get(benchmark__track="openscan", name="val")
    spec = split.benchmark.spec
    rng = random.Random(0)
    LeaderboardEntry.objects.filter(split=split).delete()
    rows = []
    for i in range(args.entries):
        scores = {m: rng.random() for m in spec.metrics}
        scores.update({f"{g}/{m}": rng.random() for g in spec.groups for m in spec.metrics})
        # bulk_create skips save(), which stores the export texts of each row.
        as_json, as_csv = export_texts(scores, export_columns(spec))
        rows.append(LeaderboardEntry(split=split, name=f"method-{i}", team_name=f"team-{i % 97}",
                                     primary_score=scores[spec.primary_metric], scores=scores,
                                     export_json=as_json, export_csv=as_csv))
    LeaderboardEntry.objects.bulk_create(rows, batch_size=500)
    client = Client()

    cpu_times: list[float] = []

    def timed(url: str) -> tuple[float, int]:
        client.get(url)  # warm caches (templates, query plans)
        times = []
        with CaptureQueriesContext(connection) as queries:
            client.get(url)
            n_queries = len(queries.captured_queries)
        cpu_times.clear()
        for _ in range(args.repeat):
            start, cpu = time.perf_counter(), time.process_time()
            response = client.get(url)
            times.append(time.perf_counter() - start)
            cpu_times.append(time.process_time() - cpu)
            assert response.status_code == 200
        return statistics.median(times), n_queries

    def python_ranking() -> float:
        times = []
        for _ in range(max(3, args.repeat // 4)):
            start = time.perf_counter()
            entries = list(LeaderboardEntry.objects.filter(split=split))
            entries.sort(key=lambda e: -(e.scores.get("material/AP") or -1))
            entries[:50]
            times.append(time.perf_counter() - start)
        return statistics.median(times)

    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {args.entries} entries on {split}, "
          f"{connection.vendor}; median of {args.repeat} requests")
    for label, url in [("page 1, by AP", "/benchmarks/openscan/"),
                       ("page 1, by material/AP", "/benchmarks/openscan/?sort=material/AP"),
                       ("page 40, by AP50", "/benchmarks/openscan/?metric=AP50&page=40"),
                       ("API page 1", "/api/v1/leaderboards/openscan"),
                       (f"export.json, {args.entries} rows", "/benchmarks/openscan/export.json"),
                       (f"export.csv, {args.entries} rows", "/benchmarks/openscan/export.csv"),
                       ("export.json by material/AP", "/benchmarks/openscan/export.json?sort=material/AP")]:
        seconds, n = timed(url)
        # CPU time of this process (SQLite runs in it) is steadier than wall time on a shared machine.
        print(f"  {label:28s} {seconds * 1000:7.1f} ms  (CPU {statistics.median(cpu_times) * 1000:6.1f} ms)"
              f"   {n} queries")
    baseline = python_ranking()
    sql, _ = timed("/benchmarks/openscan/?sort=material/AP")
    print(f"  baseline: load all rows and sort in Python: {baseline * 1000:7.1f} ms "
          f"(page by material/AP is {baseline / sql:.1f}x faster end to end)")


if __name__ == "__main__":
    main()
