"""Run the whole service on this machine; one Ctrl-C stops all of it.

Started by deploy/run.sh. Starts Redis when REDIS_URL is not set (keeping an
append-only file under DATA_DIR/redis, so queued work survives a restart, and
writing its URL to DATA_DIR/redis/url, where ``manage.py`` in any shell finds
it), migrates, loads the demo benchmarks, then runs the site worker (queue
``site``, with Celery beat's periodic jobs embedded: the sweeper, upload
expiry), a scoring worker (the eval queues) and the web server (gunicorn) on
127.0.0.1:$PORT. The site and the scoring worker sign their messages with the
same keys: ``RESULTS_SIGNING_KEYS`` or ``RESULTS_SIGNING_KEY`` (or their
``_FILE``) when given, else one generated once into DATA_DIR/results_signing_key
(which ``manage.py`` then reads too).

Each process is supervised: one that dies is started again (after a pause that
grows while it keeps dying), and the others go on; the web server never stops
because a worker died. Each process's id is in DATA_DIR/run/<name>.pid.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "deploy"))

import local_redis  # noqa: E402

MAX_BACKOFF = 30.0


@dataclass
class Child:
    """One supervised process: how to start it, and what it is doing now."""

    name: str
    start: object  # () -> Popen
    proc: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    due: float = 0.0
    started: float = field(default_factory=time.monotonic)


def main() -> int:
    env = os.environ.copy()
    data_dir = Path(env.setdefault("DATA_DIR", str(ROOT / "data"))).resolve()
    env["DATA_DIR"] = str(data_dir)
    env.setdefault("EVAL_UPLOADS_DIR", str(data_dir / "uploads"))
    env.setdefault("EVAL_LABELS_DIR", str(data_dir / "labels"))
    env.setdefault("EVAL_OUTCOMES_DIR", str(data_dir / "outcomes"))  # one host: a folder of the data
    env.setdefault("EVAL_SITE_QUEUE", env.get("SITE_QUEUE", "site"))  # where a starting worker asks for a sweep
    env.setdefault("PYTHONUNBUFFERED", "1")
    share_signing_key(env, data_dir)
    port = env.get("PORT", "8000")
    python = sys.executable
    run_dir = data_dir / "run"
    run_dir.mkdir(parents=True, exist_ok=True)
    children: list[Child] = []
    stopping: list[bool] = []
    # Ctrl-C reaches the whole process group: the children shut down by
    # themselves, and this loop only has to notice and wait for them.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *a: stopping.append(True))

    def popen(args: list[str], **extra: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(args, env={**env, **extra}, cwd=ROOT)

    def launch(child: Child) -> None:
        child.proc = child.start()  # type: ignore[operator]
        child.started = time.monotonic()
        (run_dir / f"{child.name}.pid").write_text(f"{child.proc.pid}\n")

    try:
        if not env.get("REDIS_URL"):
            redis_dir = data_dir / "redis"
            url_file = redis_dir / "url"
            last = url_file.read_text().strip() if url_file.is_file() else ""
            preferred = int(last.rsplit(":", 1)[-1].split("/")[0]) if last else None

            def start_redis() -> subprocess.Popen[bytes]:
                # Started again on the same port, so running workers reconnect to it.
                port = int(env["REDIS_URL"].rsplit(":", 1)[-1].split("/")[0]) if env.get("REDIS_URL") else preferred
                proc, url = local_redis.start(redis_dir, persistent=True, port=port)
                url_file.write_text(url + "\n")
                env["REDIS_URL"] = url
                return proc

            redis = Child("redis", start_redis)
            launch(redis)
            children.append(redis)
            print(f"Started Redis at {env['REDIS_URL']} (data in {redis_dir})", flush=True)
        manage = [python, str(ROOT / "manage.py")]
        subprocess.run([*manage, "migrate", "--noinput", "-v0"], env=env, check=True)
        subprocess.run([*manage, "load_demo"], env=env, check=True)
        celery = [python, "-m", "celery"]
        site_worker = [*celery, "-A", "leaderboard", "worker", "-Q", env.get("SITE_QUEUE", "site"), "-P", "solo",
                       "-n", "site@%h", "-l", "warning",
                       # Embedded beat runs the periodic jobs (the sweeper, expiring abandoned uploads).
                       "-B", "--schedule", str(data_dir / "celerybeat-schedule")]
        # One scoring worker for every track's queues, CPU and GPU alike (it builds its own -Q list).
        scoring_worker = [python, "-m", "evaluation_workers", "worker",
                          "-c", env.get("EVAL_CONCURRENCY", "1"), "-n", "eval@%h", "-l", "info"]
        web = [python, "-m", "gunicorn", "leaderboard.wsgi", "-c", str(ROOT / "deploy" / "gunicorn.conf.py"),
               "--bind", f"127.0.0.1:{port}"]
        every_queue = {"EVAL_TRACKS": "all", "EVAL_QUEUE_DEVICES": "cpu,gpu"}
        for name, args, extra in (("site-worker", site_worker, {}), ("scoring-worker", scoring_worker, every_queue),
                                  ("web", web, {})):
            child = Child(name, lambda args=args, extra=extra: popen(args, **extra))
            launch(child)
            children.append(child)
        print(f"\n  Leaderboard: http://127.0.0.1:{port}/   (sign in as demo / demo-password)\n"
              f"  Data: {data_dir}   Stop: Ctrl-C\n", flush=True)
        supervise(children, launch, stopping)
        return 0
    finally:
        stop(children)
        print("Stopped.", flush=True)


def share_signing_key(env: dict[str, str], data_dir: Path) -> None:
    """Give the site (``RESULTS_SIGNING_KEYS`` or ``RESULTS_SIGNING_KEY``) and the scoring worker
    (``EVAL_RESULTS_SIGNING_KEYS`` or ``EVAL_RESULTS_SIGNING_KEY``) the same keys."""
    worker_given = any(env.get(name) for name in ("EVAL_RESULTS_SIGNING_KEYS", "EVAL_RESULTS_SIGNING_KEYS_FILE",
                                                  "EVAL_RESULTS_SIGNING_KEY", "EVAL_RESULTS_SIGNING_KEY_FILE"))
    if env.get("RESULTS_SIGNING_KEYS") or env.get("RESULTS_SIGNING_KEYS_FILE"):
        if not worker_given:
            name = "RESULTS_SIGNING_KEYS" if env.get("RESULTS_SIGNING_KEYS") else "RESULTS_SIGNING_KEYS_FILE"
            env[f"EVAL_{name}"] = env[name]
        return
    if not (env.get("RESULTS_SIGNING_KEY") or env.get("RESULTS_SIGNING_KEY_FILE")):
        path = data_dir / "results_signing_key"
        data_dir.mkdir(parents=True, exist_ok=True)
        try:  # once, random, readable by this user only (as the settings generate it)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_urlsafe(50) + "\n")
        env["RESULTS_SIGNING_KEY_FILE"] = str(path)
    if not worker_given:
        if env.get("RESULTS_SIGNING_KEY"):
            env["EVAL_RESULTS_SIGNING_KEY"] = env["RESULTS_SIGNING_KEY"]
        else:
            env["EVAL_RESULTS_SIGNING_KEY_FILE"] = env["RESULTS_SIGNING_KEY_FILE"]


def supervise(children: list[Child], launch: object, stopping: list[bool]) -> None:
    """Start again whatever dies, with a pause that doubles while it keeps dying (up to 30 s)."""
    while not stopping:
        now = time.monotonic()
        for child in children:
            if child.proc is None or child.proc.poll() is None:
                if child.proc is None and now >= child.due:
                    launch(child)  # type: ignore[operator]
                continue
            # A process that ran a minute before dying starts over at a 1 s pause.
            child.restarts = 0 if now - child.started > 60 else child.restarts + 1
            pause = min(MAX_BACKOFF, 2.0 ** child.restarts)
            print(f"{child.name} exited with {child.proc.returncode}; starting it again in {pause:.0f} s.",
                  file=sys.stderr, flush=True)
            child.proc, child.due = None, now + pause
        time.sleep(0.3)


def stop(children: list[Child]) -> None:
    """Stop the web server and workers first, Redis last, so workers can acknowledge what they finish."""
    others = [c for c in reversed(children) if c.name != "redis"]
    for group in (others, [c for c in children if c.name == "redis"]):
        for child in group:
            if child.proc is not None and child.proc.poll() is None:
                child.proc.terminate()
        deadline = time.monotonic() + 20
        for child in group:
            if child.proc is None:
                continue
            try:
                child.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.proc.kill()


if __name__ == "__main__":
    sys.exit(main())
