"""Run the whole service on this machine; one Ctrl-C stops all of it.

Started by deploy/run.sh. Starts Redis when REDIS_URL is not set, migrates,
loads the demo benchmarks, then runs the site worker (queue ``site``, with
Celery beat's periodic jobs embedded), a scoring worker (the eval queues) and
the web server on 127.0.0.1:$PORT.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "deploy"))

import local_redis  # noqa: E402


def main() -> int:
    env = os.environ.copy()
    data_dir = Path(env.setdefault("DATA_DIR", str(ROOT / "data"))).resolve()
    env["DATA_DIR"] = str(data_dir)
    env.setdefault("DEBUG", "true")
    env.setdefault("EVAL_UPLOADS_DIR", str(data_dir / "uploads"))
    env.setdefault("EVAL_LABELS_DIR", str(data_dir / "labels"))
    env.setdefault("PYTHONUNBUFFERED", "1")
    port = env.get("PORT", "8000")
    python = sys.executable
    procs: list[subprocess.Popen[bytes]] = []

    def stop(*_: object) -> None:
        for proc in reversed(procs):
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + 15
        for proc in procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()

    stopping = []
    # Ctrl-C reaches the whole process group: the children shut down by
    # themselves, and this loop only has to notice and wait for them.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *a: stopping.append(True))
    try:
        if not env.get("REDIS_URL"):
            redis, env["REDIS_URL"] = local_redis.start(data_dir / "redis")
            procs.append(redis)
            print(f"Started Redis at {env['REDIS_URL']}", flush=True)
        manage = [python, str(ROOT / "manage.py")]
        subprocess.run([*manage, "migrate", "--noinput", "-v0"], env=env, check=True)
        subprocess.run([*manage, "load_demo"], env=env, check=True)
        queues = ",".join({env.get("EVAL_QUEUE_CPU", "eval-cpu"), env.get("EVAL_QUEUE_GPU", "eval-gpu")})
        celery = [python, "-m", "celery"]
        procs.append(subprocess.Popen([*celery, "-A", "leaderboard", "worker", "-Q", env.get("SITE_QUEUE", "site"),
                                       "-P", "solo", "-n", "site@%h", "-l", "warning",
                                       # Embedded beat runs the periodic jobs (expiring abandoned uploads).
                                       "-B", "--schedule", str(data_dir / "celerybeat-schedule")],
                                      env=env, cwd=ROOT))
        procs.append(subprocess.Popen([*celery, "-A", "evaluation_workers.app", "worker", "-Q", queues,
                                       "-c", env.get("EVAL_CONCURRENCY", "1"), "-n", "eval@%h", "-l", "info"],
                                      env=env, cwd=ROOT))
        procs.append(subprocess.Popen([*manage, "runserver", f"127.0.0.1:{port}", "--noreload"], env=env))
        print(f"\n  Leaderboard: http://127.0.0.1:{port}/   (sign in as demo / demo-password)\n"
              f"  Data: {data_dir}   Stop: Ctrl-C\n", flush=True)
        while not stopping and all(p.poll() is None for p in procs):
            time.sleep(0.3)
        time.sleep(0.3)
        if stopping:
            return 0
        failed = next(p for p in procs if p.poll() is not None)
        print(f"{' '.join(map(str, failed.args[:5]))} exited with {failed.returncode}; stopping.",
              file=sys.stderr)
        return 1
    finally:
        stop()
        print("Stopped.", flush=True)


if __name__ == "__main__":
    sys.exit(main())
