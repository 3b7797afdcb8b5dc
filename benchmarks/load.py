"""A crowd of readers and a stream of uploads against a locally started service.

    .venv/bin/python benchmarks/load.py --setup embedded|production [--mix mixed|pages] [--seconds 60]

Starts the service on loopback with a fresh data folder, then for ``--seconds``
runs ``--readers`` concurrent readers of ``--mix`` (``wrk`` with a Lua script:
cheap on CPU, which it shares with the service) while this process uploads SQA3D
predictions through ``POST /api/v1/submissions`` at ``--uploads-per-minute``,
spread over the run. Afterwards it waits (at most ``--drain-seconds``) for every
upload to end, prints requests/s, latency percentiles, errors and how many
uploads finished, failed or are stuck, and stops everything it started.

Mixes (``MIXES``: paths, weights and the status each must answer):
  mixed  what a crowd reads (issue 26): two boards, a method page, the API's
         leaderboard, the tracks, a manifest, a format page and an unknown method id (404).
  pages  boards with sorts, filters and later pages, their exports and API (the earlier default).
Errors are wrk's connection errors plus every answer whose status is not its path's,
counted from the gunicorn access log (on, as the deploy has it), since wrk alone
cannot tell an expected 404 from another.

Set-ups:
  embedded    deploy/run_local.py as the README runs it (SQLite, its own Redis,
              its own site and scoring workers) with a temporary DATA_DIR and a free PORT.
  production  gunicorn (deploy/gunicorn.conf.py, WEB_CONCURRENCY workers) + PostgreSQL
              (database ``--database``, dropped and created) + the machine's Redis
              (db ``--redis-db``, flushed; queues *-load) + a site and a scoring worker.

Both are first migrated and given the demo data, a token for the demo user and
``--entries`` synthetic published rows on OpenScan (a fifth as many on SQA3D).
Needs ``wrk``: ``apt-get install -y wrk`` (Debian's package).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
UNKNOWN_METHOD = 987654321  # no method has this id: its page is a 404
# (path, weight, expected status); {method} is a seeded method with rows on OpenScan and SQA3D.
MIXES: dict[str, list[tuple[str, int, int]]] = {
    "mixed": [
        ("/benchmarks/openscan/", 2, 200), ("/benchmarks/sqa3d/", 1, 200), ("/methods/{method}/", 1, 200),
        ("/api/v1/leaderboards/openscan", 1, 200), ("/api/v1/tracks", 1, 200),
        ("/api/v1/tracks/sqa3d/test/manifest", 1, 200), ("/benchmarks/openscan/format/", 1, 200),
        (f"/methods/{UNKNOWN_METHOD}/", 1, 404),
    ],
    "pages": [(path, 1, 200) for path in [
        "/", "/benchmarks/openscan/", "/benchmarks/openscan/?sort=material/AP",
        "/benchmarks/openscan/?metric=AP50&page=3", "/benchmarks/openscan/?paper=0&extra=no", "/benchmarks/sqa3d/",
        "/benchmarks/sqa3d/?sort=What/EM&order=asc", "/benchmarks/mmscan-vg/", "/benchmarks/mmscan-vg/?split=test",
        "/api/v1/leaderboards/openscan", "/api/v1/leaderboards/openscan?sort=affordance/AP&page=2",
        "/api/v1/leaderboards/sqa3d", "/api/v1/leaderboards/openscan/progress", "/benchmarks/sqa3d/export.json",
        "/benchmarks/sqa3d/export.csv",
    ]],
}
ACCESS_LINE = re.compile(rb'"(?:GET|HEAD) (\S+) HTTP/[0-9.]+" (\d{3}) ')
LUA = """
local paths = {%(paths)s}
local n = math.random(#paths)
request = function()
  n = n %% #paths + 1
  return wrk.format("GET", paths[n])
end
-- No response() callback: with one, wrk copies every body into Lua, which costs
-- the CPU that the service needs. errors.status counts the statuses above 399
-- (expected 404s included: the access log tells them apart); every path was
-- checked to answer its status (not a redirect) before the run.
done = function(summary, latency, requests)
  local e = summary.errors
  local bad = e.status
  io.write(string.format('WRK-JSON {"requests": %%d, "duration_us": %%d, "bytes": %%d, "connect": %%d, ' ..
    '"read": %%d, "write": %%d, "timeout": %%d, "non2xx": %%d, "p50": %%d, "p95": %%d, "p99": %%d, "max": %%d}\\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.timeout, bad,
    latency:percentile(50), latency:percentile(95), latency:percentile(99), latency.max))
end
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, procs: list[subprocess.Popen[bytes]], timeout: float) -> None:
    import requests

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in procs):
            raise SystemExit(f"A service process exited early: {[p.args for p in procs if p.poll() is not None]}")
        with contextlib.suppress(requests.RequestException):
            if requests.get(url, timeout=2).status_code == 200:
                return
        time.sleep(0.5)
    raise SystemExit(f"{url} did not answer within {timeout:.0f} s")


def prepare(env: dict[str, str], entries: int, log: Any) -> dict[str, Any]:
    """Migrate, load the demo, publish synthetic rows; the demo user's token and predictions file."""
    manage = [PYTHON, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "--noinput", "-v0"], env=env, check=True, stdout=log, stderr=log)
    subprocess.run([*manage, "load_demo"], env=env, check=True, stdout=log, stderr=log)
    out = subprocess.run([PYTHON, __file__, "_seed", str(entries)], env=env, check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def seed(entries: int) -> None:
    """(In a subprocess with the service's environment.) Rows, a token, the predictions path."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "leaderboard.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth.models import User

    from leaderboard.accounts.services import do_create_token, personal_team
    from leaderboard.benchmarks.models import Split
    from leaderboard.rankings.models import LeaderboardEntry, export_columns, export_texts
    from leaderboard.submissions.models import Method

    rng = random.Random(0)
    demo = User.objects.get(username="demo")
    # The method page of the mix: the first synthetic row of each track is this method's.
    method = Method.objects.create(team=personal_team(demo), name="synthetic-method", description="Seeded.",
                                   authors="Load Benchmark", uses_extra_data=False)
    for track, split_name, count in [("openscan", "val", entries), ("sqa3d", "test", entries // 5)]:
        split = Split.objects.select_related("benchmark").get(benchmark__track=track, name=split_name)
        spec = split.benchmark.spec
        rows = []
        for i in range(count):
            scores = {m: rng.random() for m in spec.metrics}
            scores.update({f"{g}/{m}": rng.random() for g in spec.groups for m in spec.metrics})
            as_json, as_csv = export_texts(scores, export_columns(spec))
            rows.append(LeaderboardEntry(split=split, method=method if i == 0 else None,
                                         name=method.name if i == 0 else f"synthetic-{i}", team_name=f"team-{i % 97}",
                                         uses_extra_data=i % 7 == 0, primary_score=scores[spec.primary_metric],
                                         scores=scores, export_json=as_json, export_csv=as_csv))
        LeaderboardEntry.objects.bulk_create(rows, batch_size=500)
    token = do_create_token(demo, name="load")
    predictions = sorted((Path(settings.DATA_DIR) / "demo" / "sqa3d").rglob("*predictions*"))
    print(json.dumps({"token": token, "predictions": str(predictions[0]), "method": method.pk}))


def base_env(data_dir: Path, port: int, args: argparse.Namespace) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "CACHE_URL"}}
    env.update({"DATA_DIR": str(data_dir), "PORT": str(port), "PYTHONUNBUFFERED": "1",
                "EVAL_UPLOADS_DIR": str(data_dir / "uploads"), "EVAL_LABELS_DIR": str(data_dir / "labels"),
                "EVAL_DEVICE": "cpu", "EVAL_GPU_TRACKS": "",
                # The deploy's default; the statuses of the run are counted from it.
                "ACCESS_LOG": "-",
                # One demo user uploads all of it: quotas would refuse most of the stream.
                "QUOTA_PER_DAY": "100000", "QUOTA_TOTAL": "100000", "QUOTA_IN_FLIGHT": "100000",
                "PUBLISH_NEEDS_METHOD_DETAILS": "false"})
    return env


@contextlib.contextmanager
def embedded(args: argparse.Namespace, data_dir: Path, port: int, log: Any) -> Iterator[dict[str, Any]]:
    env = base_env(data_dir, port, args)
    # Migrating and seeding before run_local (which then finds both done) keeps its own
    # start-up as the README runs it; the page cache of this step goes to the load db.
    prep = prepare({**env, "DEBUG": "true", "CACHE_URL": f"redis://127.0.0.1:6379/{args.redis_db}"},
                   args.entries, log)
    proc = subprocess.Popen([PYTHON, str(ROOT / "deploy" / "run_local.py")], env=env, cwd=ROOT,
                            stdout=log, stderr=log, start_new_session=True)
    try:
        wait_http(f"http://127.0.0.1:{port}/", [proc], 180)
        yield {**prep, "pids": [proc.pid]}
    finally:
        stop([proc])


@contextlib.contextmanager
def production(args: argparse.Namespace, data_dir: Path, port: int, log: Any) -> Iterator[dict[str, Any]]:
    import psycopg
    import redis

    if args.database == "test" or args.redis_db in {0, 15}:
        raise SystemExit("Refusing the database 'test' and Redis dbs 0 and 15: they belong to others.")
    with psycopg.connect(f"{args.postgres}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{args.database}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{args.database}"')
    redis_url = f"redis://127.0.0.1:6379/{args.redis_db}"
    redis.Redis.from_url(redis_url).flushdb()
    env = base_env(data_dir, port, args)
    env.update({"DATABASE_URL": f"{args.postgres}/{args.database}", "REDIS_URL": redis_url,
                "EVAL_BROKER_URL": redis_url, "SECRET_KEY": "load-benchmark", "DEBUG": "false",
                "RESULTS_SIGNING_KEY": "load-benchmark-results-signing-key",
                "EVAL_RESULTS_SIGNING_KEY": "load-benchmark-results-signing-key",
                "SITE_QUEUE": "site-load", "EVAL_QUEUE_CPU": "eval-cpu-load", "EVAL_QUEUE_GPU": "eval-gpu-load",
                "WEB_CONCURRENCY": str(args.web_concurrency or ""), "LOG_LEVEL": "WARNING"})
    if not args.web_concurrency:
        env.pop("WEB_CONCURRENCY")
    prep = prepare(env, args.entries, log)
    celery = [PYTHON, "-m", "celery"]
    procs = [
        subprocess.Popen([PYTHON, "-m", "gunicorn", "leaderboard.wsgi", "-c", str(ROOT / "deploy" / "gunicorn.conf.py"),
                          "--bind", f"127.0.0.1:{port}"],
                         env=env, cwd=ROOT, stdout=log, stderr=log, start_new_session=True),
        subprocess.Popen([*celery, "-A", "leaderboard", "worker", "-Q", "site-load", "-P", "solo",
                          "-n", "site-load@%h", "-l", "warning"], env=env, cwd=ROOT, stdout=log, stderr=log,
                         start_new_session=True),
        # As the deploy starts it: on every track's queues (per track, device and scorer version,
        # named after EVAL_QUEUE_CPU/GPU); plain "-Q eval-cpu-load" left every upload queued.
        subprocess.Popen([PYTHON, "-m", "evaluation_workers", "worker", "-c", "1", "-n", "eval-load@%h",
                          "-l", "warning"], env={**env, "EVAL_TRACKS": "all", "EVAL_QUEUE_DEVICES": "cpu,gpu"},
                         cwd=ROOT, stdout=log, stderr=log, start_new_session=True),
    ]
    try:
        wait_http(f"http://127.0.0.1:{port}/", procs, 120)
        yield {**prep, "pids": [p.pid for p in procs]}
    finally:
        stop(procs)


def tree_cpu_seconds(roots: list[int]) -> float:
    """CPU time used so far by ``roots`` and their descendants (Linux /proc)."""
    children: dict[int, list[int]] = {}
    ticks: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            pid = int(stat.parent.name)
            children.setdefault(int(fields[1]), []).append(pid)
            ticks[pid] = int(fields[11]) + int(fields[12])
    total, todo = 0, list(roots)
    while todo:
        pid = todo.pop()
        total += ticks.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total / os.sysconf("SC_CLK_TCK")


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + 20
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


class Uploader(threading.Thread):
    """``count`` uploads evenly spread over ``seconds``; records each submission id or refusal."""

    def __init__(self, base: str, token: str, predictions: Path, count: int, seconds: float) -> None:
        super().__init__(daemon=True)
        self.base, self.count, self.seconds = base, count, seconds
        self.headers = {"Authorization": f"Token {token}"}
        self.data = predictions.read_bytes()
        self.ids: list[int] = []
        self.refused: list[str] = []

    def run(self) -> None:
        import requests

        start = time.monotonic()
        for i in range(self.count):
            time.sleep(max(0.0, start + (i + 0.5) * self.seconds / self.count - time.monotonic()))
            try:
                r = requests.post(f"{self.base}/api/v1/submissions", headers=self.headers, timeout=30,
                                  data={"track": "sqa3d", "split": "test", "method_name": f"load-{i % 10}"},
                                  files={"file": ("predictions.json", self.data)})
                if r.status_code == 201:
                    self.ids.append(r.json()["id"])
                else:
                    # Django's error pages name the exception in their title.
                    title = r.text.partition("<title>")[2].partition("</title>")[0].split()
                    self.refused.append(f"HTTP {r.status_code}: {' '.join(title) or r.text[:200]}")
            except requests.RequestException as exc:
                self.refused.append(f"{type(exc).__name__}: {exc}")

    def outcomes(self, wait: float) -> dict[str, list[str]]:
        """Poll every accepted upload until it ends or ``wait`` seconds pass."""
        import requests

        done: dict[int, str] = {}
        deadline = time.monotonic() + wait
        while len(done) < len(self.ids) and time.monotonic() < deadline:
            for pk in self.ids:
                if pk in done:
                    continue
                with contextlib.suppress(requests.RequestException, ValueError):
                    body = requests.get(f"{self.base}/api/v1/submissions/{pk}", headers=self.headers,
                                        timeout=10).json()
                    if body.get("status") in {"finished", "failed", "cancelled"}:
                        done[pk] = body["status"] + ("" if body["status"] == "finished"
                                                     else f": {body.get('error') or body.get('status_detail')}")
            time.sleep(1)
        return {"finished": [s for s in done.values() if s == "finished"],
                "failed": [s for s in done.values() if s != "finished"],
                "stuck": [str(pk) for pk in self.ids if pk not in done]}


def mix_paths(mix: str, prep: dict[str, Any]) -> list[tuple[str, int, int]]:
    return [(path.format(method=prep["method"]), weight, status) for path, weight, status in MIXES[mix]]


def check_paths(base: str, paths: list[tuple[str, int, int]]) -> None:
    """Every read path answers its status (this also fills the cache, as a crowd finds it)."""
    import requests

    for path, _, expected in paths:
        status = requests.get(base + path, timeout=60, allow_redirects=False).status_code
        if status != expected:
            raise SystemExit(f"{path} answered {status}, expected {expected}")


def unexpected_statuses(access_log: bytes, paths: list[tuple[str, int, int]]) -> dict[str, int]:
    """How many answers to each read path in ``access_log`` had another status than its own."""
    expected = {path: status for path, _, status in paths}
    wrong: dict[str, int] = {}
    for match in ACCESS_LINE.finditer(access_log):
        path, status = match.group(1).decode(errors="replace"), int(match.group(2))
        if path in expected and status != expected[path]:
            wrong[f"{path} {status}"] = wrong.get(f"{path} {status}", 0) + 1
    return wrong


def run_wrk(base: str, args: argparse.Namespace, workdir: Path, paths: list[tuple[str, int, int]]) -> dict[str, int]:
    script = workdir / "readers.lua"
    weighted = [path for path, weight, _ in paths for _ in range(weight)]
    script.write_text(LUA % {"paths": ", ".join(json.dumps(p) for p in weighted)})
    out = subprocess.run(["wrk", f"-t{args.wrk_threads}", f"-c{args.readers}", f"-d{args.seconds}s",
                          "--timeout", "10s", "-s", str(script), base], capture_output=True, text=True,
                         timeout=args.seconds + 60)
    line = next((x for x in out.stdout.splitlines() if x.startswith("WRK-JSON ")), None)
    if line is None:
        raise SystemExit(f"wrk printed no summary:\n{out.stdout}\n{out.stderr}")
    return dict(json.loads(line.removeprefix("WRK-JSON ")))


def main() -> None:
    if sys.argv[1:2] == ["_seed"]:
        seed(int(sys.argv[2]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--setup", choices=["embedded", "production"], required=True)
    parser.add_argument("--mix", choices=sorted(MIXES), default="mixed", help="the read paths (MIXES)")
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--readers", type=int, default=200)
    parser.add_argument("--uploads-per-minute", type=float, default=50)
    parser.add_argument("--drain-seconds", type=float, default=180, help="longest wait for uploads to end")
    parser.add_argument("--entries", type=int, default=3000, help="synthetic OpenScan rows (SQA3D: a fifth)")
    parser.add_argument("--wrk-threads", type=int, default=1)
    parser.add_argument("--web-concurrency", type=int, default=0, help="production: gunicorn workers")
    parser.add_argument("--postgres", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--database", default="lb_load")
    parser.add_argument("--redis-db", type=int, default=14)
    parser.add_argument("--keep", action="store_true", help="keep the data folder and logs")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed: apt-get install -y wrk (Debian's package)")
    load = os.getloadavg()
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} ({os.cpu_count()} CPUs)", flush=True)
    workdir = Path(tempfile.mkdtemp(prefix=f"lb-load-{args.setup}-"))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    setup = embedded if args.setup == "embedded" else production
    uploads = max(1, round(args.seconds * args.uploads_per_minute / 60))
    try:
        with open(workdir / "service.log", "wb") as log, setup(args, workdir / "data", port, log) as prep:
            paths = mix_paths(args.mix, prep)
            print(f"{args.setup} set-up up at {base} (logs: {workdir / 'service.log'}); "
                  f"{args.readers} readers of the {args.mix!r} mix for {args.seconds} s, {uploads} uploads", flush=True)
            for path, weight, status in paths:
                print(f"  {weight} x {path} ({status})")
            check_paths(base, paths)
            uploader = Uploader(base, prep["token"], Path(prep["predictions"]), uploads, args.seconds)
            cpu_before, wrk_before = tree_cpu_seconds(prep["pids"]), os.times()
            log_start = (workdir / "service.log").stat().st_size
            uploader.start()
            reads = run_wrk(base, args, workdir, paths)
            cpu = tree_cpu_seconds(prep["pids"]) - cpu_before
            time.sleep(1)  # the answers wrk left in flight reach the log
            with open(workdir / "service.log", "rb") as written:
                written.seek(log_start)
                access_log = written.read()
            wrong = unexpected_statuses(access_log, paths)
            logged = len(ACCESS_LINE.findall(access_log))
            wrk_after = os.times()
            wrk_cpu = (wrk_after.children_user + wrk_after.children_system
                       - wrk_before.children_user - wrk_before.children_system)
            uploader.join(timeout=60)
            outcomes = uploader.outcomes(args.drain_seconds)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    seconds = reads["duration_us"] / 1e6
    errors = reads["connect"] + reads["read"] + reads["write"] + reads["timeout"]
    print(f"reads: {reads['requests']} in {seconds:.1f} s = {reads['requests'] / seconds:.0f} requests/s, "
          f"{reads['bytes'] / seconds / 2**20:.1f} MiB/s")
    print(f"  latency p50 {reads['p50'] / 1000:.1f} ms, p95 {reads['p95'] / 1000:.1f} ms, "
          f"p99 {reads['p99'] / 1000:.1f} ms, max {reads['max'] / 1000:.1f} ms")
    print(f"  errors: {sum(wrong.values()) + errors} ({sum(wrong.values())} answers with another status than "
          f"their path's, {errors} connection errors: connect {reads['connect']}, read {reads['read']}, "
          f"write {reads['write']}, timeout {reads['timeout']}); wrk counted {reads['non2xx']} statuses "
          f"above 399, the access log {logged} answers")
    for what, count in sorted(wrong.items()):
        print(f"    {count} x {what}")
    # On a shared machine the rate depends on what else runs; the CPU per read does much less.
    print(f"  CPU during the run: service {cpu:.1f} s ({cpu * 1000 / max(1, reads['requests']):.2f} ms per read, "
          f"uploads included; {'PostgreSQL and ' if args.setup == 'production' else ''}"
          f"{'the machine' if args.setup == 'production' else 'its own'} Redis "
          f"{'not counted' if args.setup == 'production' else 'included'}), wrk {wrk_cpu:.1f} s")
    print(f"uploads: {uploads} sent, {len(uploader.ids)} accepted, {len(uploader.refused)} refused; "
          f"{len(outcomes['finished'])} finished, {len(outcomes['failed'])} failed, "
          f"{len(outcomes['stuck'])} stuck after a wait of at most {args.drain_seconds:.0f} s")
    for problem in (uploader.refused + outcomes["failed"])[:5]:
        print(f"  {problem}")


if __name__ == "__main__":
    main()
