"""The whole local service as real processes (``deploy/run_local.py``), for breaking it in tests.

``LocalService`` starts run_local with its own DATA_DIR and port: its own
Redis (append-only file), the site worker with beat (the sweeper), a scoring
worker and gunicorn, on SQLite (the embedded set-up) or on a fresh PostgreSQL
database, with the deploy's default clocks. It knows each child's pid
(DATA_DIR/run/<name>.pid), starts a spare scoring worker beside them
(``spare_worker``), talks to the API with a token, reads the database through
``manage.py shell`` and switches the fault-injection holds (FAULT_DIR files)
on and off.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import requests

from tests.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]
DONE = {"finished", "failed", "cancelled"}

# No quota in the way of many uploads at once. The sweeper's and the workers' clocks are the
# deploy's defaults: recovering within seconds is what the tests check.
LIMITS = {"QUOTA_PER_DAY": "1000", "QUOTA_TOTAL": "1000", "QUOTA_IN_FLIGHT": "1000",
          "VALIDATE_AT_UPLOAD_MAX_BYTES": "0"}


def postgres_url(base: str) -> str:
    """A fresh database on the server of ``base`` (a postgres:// URL); dropped by ``drop_postgres``."""
    import psycopg

    name = f"lb_fault_{uuid.uuid4().hex[:10]}"
    server = base.rsplit("/", 1)[0]
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{server}/{name}"


def drop_postgres(url: str) -> None:
    import psycopg

    server, name = url.rsplit("/", 1)
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class LocalService:
    def __init__(self, data_dir: Path, database_url: str | None = None,
                 settings: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.fault_dir = data_dir / "faults"
        self.fault_dir.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items()
               if k not in {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE"} and not k.startswith("EVAL_")}
        env.update(LIMITS, **(settings or {}), DATA_DIR=str(data_dir), PORT=str(self.port), FAULT_DIR=str(self.fault_dir),
                   EVAL_FAULT_DIR=str(self.fault_dir), SECRET_KEY="fault-tests-" + uuid.uuid4().hex,
                   WEB_CONCURRENCY="2", PYTHONUNBUFFERED="1")
        if database_url:
            env["DATABASE_URL"] = database_url
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = data_dir / "run_local.log"
        self.token = ""

    # Processes

    def start(self, timeout: float = 180) -> None:
        self.out = open(self.log, "ab")
        ready_before = self.ready_count() if self.log.exists() else 0
        self.proc = subprocess.Popen([sys.executable, str(ROOT / "deploy" / "run_local.py")], cwd=ROOT,
                                     env=self.env, stdout=self.out, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"run_local exited:\n{self.log.read_text()[-4000:]}")
            if self._ready():
                break
            time.sleep(0.5)
        else:
            raise RuntimeError(f"run_local did not come up:\n{self.log.read_text()[-4000:]}")
        self.wait_for_worker("scoring-worker", ready_before + 1)
        if not self.token:
            self.token = self.manage("issue_token", "demo").strip().splitlines()[-1]

    def _ready(self) -> bool:
        try:
            return requests.get(f"{self.url}/api/v1/tracks", timeout=2).status_code == 200
        except requests.RequestException:
            return False

    def ready_count(self) -> int:
        """How many times the scoring worker said it is ready (each start says it once, at INFO;
        the site worker logs warnings only)."""
        return len(re.findall(r"eval@\S+ ready\.", self.log.read_text(errors="replace")))

    def wait_for_worker(self, name: str, at_least: int = 1, timeout: float = 90) -> None:
        """Until the log shows ``at_least`` starts of the scoring worker."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.ready_count() >= at_least:
                time.sleep(0.5)
                return
            time.sleep(0.3)
        raise RuntimeError(f"{name} not ready:\n{self.log.read_text()[-3000:]}")

    def pid(self, name: str) -> int:
        return int((self.data_dir / "run" / f"{name}.pid").read_text())

    def kill(self, name: str, sig: int = signal.SIGKILL) -> int:
        pid = self.pid(name)
        os.kill(pid, sig)
        return pid

    def wait_restarted(self, name: str, old_pid: int, ready_before: int | None = None,
                       timeout: float = 90) -> None:
        """Until run_local started ``name`` again (and, for a Celery worker, it said ready)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if self.pid(name) != old_pid:
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.2)
        else:
            raise AssertionError(f"{name} was not started again within {timeout} s")
        if name == "scoring-worker" and ready_before is not None:
            self.wait_for_worker(name, ready_before + 1, timeout=max(1.0, deadline - time.monotonic()))
        else:
            time.sleep(3)  # the site worker and Redis say nothing at INFO; give them a moment

    def kill_everything(self) -> None:
        """SIGKILL run_local and every child at once, as a power cut would."""
        assert self.proc is not None
        pids = [self.proc.pid] + [self.pid(p.stem) for p in (self.data_dir / "run").glob("*.pid")]
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:  # gunicorn's and celery's own pool processes
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(10)
        time.sleep(1)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(40)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self.out.close()

    @contextlib.contextmanager
    def spare_worker(self, name: str = "spare", timeout: float = 60) -> Iterator[subprocess.Popen[bytes]]:
        """A second scoring worker on the same broker and folders (another host would have its own
        folders; these tests share run_local's), as run_local starts its own, until the block ends."""
        env = {**self.env, "REDIS_URL": (self.data_dir / "redis" / "url").read_text().strip(),
               "EVAL_UPLOADS_DIR": str(self.data_dir / "uploads"), "EVAL_LABELS_DIR": str(self.data_dir / "labels"),
               "EVAL_OUTCOMES_DIR": str(self.data_dir / "outcomes"), "EVAL_SITE_QUEUE": "site",
               "EVAL_TRACKS": "all", "EVAL_QUEUE_DEVICES": "cpu,gpu"}
        # The site's key, as run_local hands it to its own worker.
        if self.env.get("RESULTS_SIGNING_KEY"):
            env["EVAL_RESULTS_SIGNING_KEY"] = self.env["RESULTS_SIGNING_KEY"]
        else:
            env["EVAL_RESULTS_SIGNING_KEY_FILE"] = str(self.data_dir / "results_signing_key")
        log = self.data_dir / f"{name}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "evaluation_workers", "worker", "-c", "1",
                                     "-n", f"{name}@%h", "-l", "info"], cwd=ROOT, env=env, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + timeout
            while b" ready." not in log.read_bytes():
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the spare worker did not start:\n{log.read_text()[-3000:]}")
                time.sleep(0.2)
            yield proc
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(10)

    def hold(self, name: str, seconds: float) -> None:
        """Switch a fault-injection hold on (``seconds`` > 0) or off."""
        path = self.fault_dir / name
        if seconds > 0:
            path.write_text(str(seconds))
        else:
            path.unlink(missing_ok=True)

    # The service as its users see it

    def manage(self, *args: str) -> str:
        return subprocess.run([sys.executable, str(ROOT / "manage.py"), *args], cwd=ROOT, env=self.env,
                              check=True, capture_output=True, text=True, timeout=120).stdout

    def api(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        headers = {"Authorization": f"Token {self.token}", **kwargs.pop("headers", {})}
        return requests.request(method, f"{self.url}/api/v1/{path}", headers=headers, timeout=60, **kwargs)

    def submit(self, predictions: Path, method: str) -> requests.Response:
        with open(predictions, "rb") as f:
            return self.api("POST", "submissions", data={"track": "sqa3d", "split": "test",
                                                         "method_name": method}, files={"file": f})

    def wait_done(self, ids: list[int], timeout: float) -> dict[int, dict[str, Any]]:
        deadline = time.monotonic() + timeout
        last: dict[int, dict[str, Any]] = {}
        while time.monotonic() < deadline:
            for pk in ids:
                if last.get(pk, {}).get("status") in DONE:
                    continue
                try:
                    last[pk] = self.api("GET", f"submissions/{pk}").json()
                except (requests.RequestException, ValueError):
                    pass
            if all(last.get(pk, {}).get("status") in DONE for pk in ids):
                return last
            time.sleep(0.5)
        stuck = {pk: last.get(pk, {}).get("status") for pk in ids if last.get(pk, {}).get("status") not in DONE}
        raise AssertionError(f"not done within {timeout} s: {stuck}\n{self.log.read_text()[-3000:]}")

    def wait_status(self, pk: int, status: str, timeout: float = 60) -> None:
        """Until submission ``pk`` is ``status`` (or already past it: done)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.api("GET", f"submissions/{pk}").json()["status"] in {status} | DONE:
                return
            time.sleep(0.2)
        raise AssertionError(f"submission {pk} never became {status}")

    def rows(self, ids: list[int]) -> dict[int, dict[str, Any]]:
        """Database facts of submissions that the API does not show (quota, results, attempts)."""
        code = ("import json; from leaderboard.submissions.models import Submission as S; "
                f"print(json.dumps({{s.pk: {{'status': s.status, 'quota': s.quota, 'kind': s.failure_kind, "
                f"'attempt': s.attempt, 'lost': s.lost_attempts, 'results': s.results.count(), "
                f"'worker': s.worker}} "
                f"for s in S.objects.filter(pk__in={list(ids)!r})}}))")
        return {int(k): v for k, v in json.loads(self.manage("shell", "-c", code).strip().splitlines()[-1]).items()}
