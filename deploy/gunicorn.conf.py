"""gunicorn settings for the web process: gunicorn leaderboard.wsgi -c deploy/gunicorn.conf.py"""

import os

# Loopback unless told otherwise: the site belongs behind a reverse proxy (TLS, request
# limits). BIND=0.0.0.0:8000 listens on every interface, e.g. inside a container.
bind = os.environ.get("BIND") or f"127.0.0.1:{os.environ.get('PORT') or '8000'}"
# Threads, because most requests are cache hits that wait on Redis (or queries
# waiting on the database), not on the CPU: 2 processes x 4 threads kept 2
# cores busier than 3 or 4 single-threaded workers, and keep-alive spares a
# connection per request (benchmarks/README.md, load.py).
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
threads = int(os.environ.get("WEB_THREADS", "4"))
worker_class = "gthread" if threads > 1 else "sync"
# Uploads in parts arrive as many requests of up to UPLOAD_PART_BYTES each; give
# a slow link time to send one part.
timeout = 300
# One line per request on stdout; ACCESS_LOG= (empty) turns it off where a proxy
# in front logs already: formatting it costs ~0.3 ms of CPU per request.
accesslog = os.environ.get("ACCESS_LOG", "-") or None


# Metrics of every web process, summed at /metrics (prometheus_client's multiprocess mode,
# leaderboard/ops/metrics.py): each process writes its counters under PROMETHEUS_MULTIPROC_DIR.
# Unless it is set, a fresh folder per server start, removed when the server stops.
def on_starting(server):
    import tempfile

    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="lb-web-metrics-")
        server._metrics_dir_ours = True  # removed in on_exit
    # Imported here, once the folder is set (the module picks its mode at import) and before any worker
    # exists: child_exit runs inside gunicorn's SIGCHLD handler, where an import can be interrupted by
    # the next worker's SIGCHLD and the nested import fails on the half-loaded module.
    from prometheus_client import multiprocess

    server._metrics_multiprocess = multiprocess


def child_exit(server, worker):
    server._metrics_multiprocess.mark_process_dead(worker.pid)


def on_exit(server):
    import shutil

    if getattr(server, "_metrics_dir_ours", False):
        shutil.rmtree(os.environ.get("PROMETHEUS_MULTIPROC_DIR", ""), ignore_errors=True)
