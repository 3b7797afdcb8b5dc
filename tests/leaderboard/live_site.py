"""The site as real processes: migrated, one SQA3D split with labels, a user's token, gunicorn with the deploy's settings.

For tests that break what is under it (a disk filled, a database cut) and
read what a client sees. No site worker and no scoring worker: submissions
stay queued in the broker, under queue names of this site only.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import requests

from tests.conftest import free_port, stop

ROOT = Path(__file__).resolve().parents[2]
METRICS_TOKEN = "live-metrics-" + secrets.token_hex(16)
SETUP = """
from pathlib import Path
from django.contrib.auth import get_user_model
from evaluation_workers.synthetic import sqa3d
from leaderboard.accounts.services import do_create_token, personal_team
from leaderboard.benchmarks.models import Split
from leaderboard.benchmarks.bundle_apply import load_bundled_benchmarks
from leaderboard.benchmarks.services import do_load_labels
load_bundled_benchmarks()
source = Path({source!r})
sqa3d.write_labels(source, 60, seed=1, split="test")
sqa3d.write_predictions(source, source.parent / "predictions.json", accuracy=0.6, seed=2)
do_load_labels(Split.objects.get(benchmark__track="sqa3d", name="test"), source)
user = get_user_model().objects.create_user("operator", password="correct horse battery")
personal_team(user)
print(do_create_token(user, name="live"))
"""


@dataclass
class Site:
    url: str
    token: str
    predictions: Path
    proc: subprocess.Popen[bytes]
    log: Path

    def get(self, path: str, **kwargs: object) -> requests.Response:
        return requests.get(self.url + path, **{"timeout": 30, **kwargs})  # type: ignore[arg-type]

    def api(self, method: str, path: str, **kwargs: object) -> requests.Response:
        return requests.request(method, self.url + path, headers={"Authorization": f"Token {self.token}"},
                                **{"timeout": 30, **kwargs})  # type: ignore[arg-type]

    def upload(self, name: str) -> requests.Response:
        with open(self.predictions, "rb") as f:
            return self.api("POST", "/api/v1/submissions", files={"file": ("p.json", f)},
                            data={"track": "sqa3d", "split": "test", "method_name": name})

    def metrics(self) -> str:
        response = self.get("/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
        response.raise_for_status()
        return response.text


@contextlib.contextmanager
def live_site(data_dir: Path, redis_url: str, *, database_url: str = "", workers: int = 1, threads: int = 2,
              **extra: str) -> Iterator[Site]:
    data_dir.mkdir(parents=True, exist_ok=True)
    tag = secrets.token_hex(4)
    env = {k: v for k, v in os.environ.items()
           if k not in {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE", "PROMETHEUS_MULTIPROC_DIR"}}
    env.update(DATA_DIR=str(data_dir), REDIS_URL=redis_url, SECRET_KEY="live-" + secrets.token_hex(16),
               RESULTS_SIGNING_KEY=secrets.token_urlsafe(40), METRICS_TOKEN=METRICS_TOKEN, PORT=str(free_port()),
               WEB_CONCURRENCY=str(workers), WEB_THREADS=str(threads), ACCESS_LOG="", PYTHONUNBUFFERED="1",
               EVAL_QUEUE_CPU=f"eval-cpu-live{tag}", EVAL_QUEUE_GPU=f"eval-gpu-live{tag}", SITE_QUEUE=f"site-live{tag}",
               CACHE_KEY_PREFIX=f"live{tag}", **extra)
    if database_url:
        env["DATABASE_URL"] = database_url
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "-v0"], cwd=ROOT, env=env, check=True, capture_output=True, timeout=300)
    source = data_dir / "source" / "labels"
    setup = subprocess.run([*manage, "shell", "-c", SETUP.format(source=str(source))], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=300)
    assert setup.returncode == 0, setup.stderr
    token = setup.stdout.strip().splitlines()[-1]
    log = data_dir.parent / f"gunicorn-{tag}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "gunicorn", "leaderboard.wsgi", "-c",
                                 str(ROOT / "deploy" / "gunicorn.conf.py")], cwd=ROOT, env=env, stdout=out,
                                stderr=subprocess.STDOUT)
    site = Site(f"http://127.0.0.1:{env['PORT']}", token, source.parent / "predictions.json", proc, log)
    deadline = time.monotonic() + 60
    while True:
        try:
            if site.get("/healthz").status_code == 200:
                break
        except requests.ConnectionError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            stop(proc)
            raise RuntimeError(f"gunicorn did not start:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)
    try:
        yield site
    finally:
        stop(proc)
