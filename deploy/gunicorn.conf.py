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
