"""How long the local service takes to resume its work after a crash.

    .venv/bin/python benchmarks/recovery.py [--submissions 6] [--env NAME=VALUE ...]

Starts the whole local service (``deploy/run_local.py``: its own Redis with an
append-only file, SQLite, the site worker with the sweeper, one scoring worker,
gunicorn) with a fresh data folder and the deploy's default clocks (the
sweeper's and the workers' settings as ``deploy/.env.example`` leaves them;
``--env`` overrides one), then breaks it twice and prints how long the work
took to resume:

1. **power cut**: ``--submissions`` SQA3D uploads in flight (each attempt held
   ``--hold`` s before scoring, through the fault-injection folder, so that one
   is being scored and the others wait in Redis), then ``kill -9`` of
   run_local, every child and their pool processes at once; run_local is
   started again on the same data folder. Printed: when the site answered
   again, and when each submission that was in flight finished, counted from
   the restart.
2. **scoring worker killed**: one upload held while it is scored, then
   ``kill -9`` of the scoring worker's main process and its pool process
   together (the whole worker); run_local starts it again. Printed: when the
   attempt was sent again (a new attempt) and when the submission finished,
   counted from the kill.
3. **scoring worker vanished**: a second scoring worker beside run_local's;
   one upload held while it is scored, then ``SIGSTOP`` of the worker scoring
   it, main and pool process (a host cut off: it neither dies nor is started
   again). Printed: the same, counted from the stop.

Only the local machine is used; everything started is stopped at the end.
"""

from __future__ import annotations

import argparse
import os
import signal
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.faults.service import LocalService  # noqa: E402 - the harness that starts and breaks run_local


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _attempt(service: LocalService, pk: int) -> int | None:
    """The submission's current attempt, read from the embedded set-up's SQLite file (the API does not show it)."""
    try:
        with sqlite3.connect(f"file:{service.data_dir / 'db.sqlite3'}?mode=ro", uri=True, timeout=5) as db:
            row = db.execute("SELECT attempt FROM submissions_submission WHERE id = ?", (pk,)).fetchone()
    except sqlite3.Error:
        return None
    return None if row is None else int(row[0])


def _poll(service: LocalService, ids: list[int], since: float, timeout: float) -> dict[int, dict[str, float]]:
    """Seconds from ``since`` at which each submission was first seen sent again (a new attempt) and done."""
    seen: dict[int, dict[str, float]] = {pk: {} for pk in ids}
    attempts = {pk: _attempt(service, pk) for pk in ids}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not all("done" in s for s in seen.values()):
        for pk in ids:
            if "done" in seen[pk]:
                continue
            try:
                body = service.api("GET", f"submissions/{pk}").json()
            except Exception:  # noqa: BLE001 - the site is still starting
                continue
            now = time.monotonic() - since
            if "resent" not in seen[pk] and _attempt(service, pk) not in (None, attempts[pk]):
                seen[pk]["resent"] = now
            if body["status"] in {"finished", "failed", "cancelled"}:
                seen[pk]["done"] = now
                seen[pk]["ok"] = float(body["status"] == "finished")
        time.sleep(0.2)
    return seen


def power_cut(service: LocalService, predictions: Path, n: int, hold: float, timeout: float) -> None:
    service.hold("hold-scoring", hold)
    ids = [service.submit(predictions, f"power-cut-{i}").json()["id"] for i in range(n)]
    service.wait_status(ids[0], "running")
    statuses = {pk: service.api("GET", f"submissions/{pk}").json()["status"] for pk in ids}
    service.kill_everything()
    service.hold("hold-scoring", 0)
    restarted = time.monotonic()
    service.start(timeout=timeout)
    up = time.monotonic() - restarted
    seen = _poll(service, ids, restarted, timeout)
    print(f"\npower cut, {n} in flight ({', '.join(f'{s}' for s in statuses.values())} at the kill):")
    print(f"  site answering again after {up:.1f} s (run_local's own start: Redis, migrate, load_demo, workers)")
    for pk in ids:
        s = seen[pk]
        done = f"{s['done']:.1f} s" if "done" in s else f"not done after {timeout:.0f} s"
        print(f"  #{pk} ({statuses[pk]} at the kill): finished {done}{'' if s.get('ok', 1) else ' (FAILED)'}")
    times = [s["done"] for s in seen.values() if "done" in s]
    if times:
        print(f"  all in flight finished {max(times):.1f} s after the restart, "
              f"{max(times) - up:.1f} s after the site answered")


def worker_killed(service: LocalService, predictions: Path, hold: float, timeout: float) -> None:
    service.hold("hold-scoring", hold)
    pk = service.submit(predictions, "worker-killed").json()["id"]
    service.wait_status(pk, "running")
    time.sleep(1)
    main = service.pid("scoring-worker")
    victims = [main, *_children(main)]
    killed = time.monotonic()
    for pid in victims:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    service.hold("hold-scoring", 0)
    seen = _poll(service, [pk], killed, timeout)[pk]
    print(f"\nscoring worker killed mid-scoring (pids {victims}):")
    print(f"  sent again (a new attempt) {seen['resent']:.1f} s after the kill" if "resent" in seen
          else f"  not sent again within {timeout:.0f} s")
    print(f"  finished {seen['done']:.1f} s after the kill" if "done" in seen
          else f"  not finished within {timeout:.0f} s")


def worker_vanished(service: LocalService, predictions: Path, hold: float, timeout: float) -> None:
    with service.spare_worker() as spare:
        service.hold("hold-scoring", hold)
        pk = service.submit(predictions, "worker-vanished").json()["id"]
        service.wait_status(pk, "running")
        time.sleep(1)
        taken_by = service.rows([pk])[pk]["worker"]
        main = spare.pid if taken_by.startswith("spare@") else service.pid("scoring-worker")
        victims = [main, *_children(main)]
        stopped = time.monotonic()
        for pid in victims:
            os.kill(pid, signal.SIGSTOP)
        service.hold("hold-scoring", 0)
        try:
            seen = _poll(service, [pk], stopped, timeout)[pk]
        finally:
            for pid in victims:
                os.kill(pid, signal.SIGCONT)
    print(f"\nscoring worker {taken_by.split(':')[0]} stopped mid-scoring (SIGSTOP of pids {victims}), another one running:")
    print(f"  sent again (a new attempt) {seen['resent']:.1f} s after the stop" if "resent" in seen
          else f"  not sent again within {timeout:.0f} s")
    print(f"  finished {seen['done']:.1f} s after the stop" if "done" in seen
          else f"  not finished within {timeout:.0f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--submissions", type=int, default=6)
    parser.add_argument("--hold", type=float, default=2.0, help="seconds each attempt waits before scoring")
    parser.add_argument("--timeout", type=float, default=400.0, help="seconds to wait for each recovery")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="a setting for the service (e.g. SWEEP_INTERVAL=60)")
    parser.add_argument("--only", choices=["power-cut", "worker-killed", "worker-vanished"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lb-recovery-") as tmp:
        service = LocalService(Path(tmp))
        service.env.update(dict(item.split("=", 1) for item in args.env))
        started = time.monotonic()
        service.start(timeout=args.timeout)
        print(f"service up in {time.monotonic() - started:.1f} s at {service.url} "
              f"(settings: {', '.join(args.env) or 'the defaults'})")
        predictions = service.data_dir / "demo" / "sqa3d" / "predictions.json"
        try:
            if args.only in (None, "power-cut"):
                power_cut(service, predictions, args.submissions, args.hold, args.timeout)
            if args.only in (None, "worker-killed"):
                worker_killed(service, predictions, args.hold + 2, args.timeout)
            if args.only in (None, "worker-vanished"):
                worker_vanished(service, predictions, args.hold + 2, args.timeout)
        finally:
            service.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
